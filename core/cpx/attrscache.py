"""A bytecode cache for the methods attrs writes, as ``__pycache__`` is for modules.

attrs writes every class's ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` as Python source
and compiles it when the class is made.  ``cpx translate`` makes ~165 classes before it reads a
file, and compiling their methods was about a quarter of its start-up (~60 ms of CPU).  The
compiled code depends only on the source and its file name, so it is kept on disk, keyed by both,
and read back on the next start: same source, same code.  One part of that source differs per
process: the salt attrs puts first in each ``__hash__`` tuple is ``hash()`` of a string, which
Python randomises per process.  The cached code reads the salt as a global set beside it instead
of a constant, so the hashes are what attrs computes in this process.

Importing this module installs the cache (``cpx`` imports it first): ``install`` replaces attrs'
private ``_compile_and_eval`` (the one function that compiles and runs that source); an attrs
without it, or whose hash source has another shape, compiles as before.  The cache is written at
exit when something was compiled, unless Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``);
an unreadable or unwritable cache only costs the compiling.
"""

from __future__ import annotations

import atexit
import importlib.util
import marshal
import os
import re
import sys
from pathlib import Path
from types import CodeType
from typing import Any

import attr._make

# The salt line of attrs' hash source: `hash((` then the salt alone on its line.
_SALT = re.compile(r"(?<=hash\(\(\n)(\s+)(-?\d+),\n")
_SALT_NAME = "_cpx_attrs_hash_salt"
# More entries than this: the next write keeps only this process's (edits leave stale ones).
_MAX_ENTRIES = 4096


class _Cache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.known: dict[str, CodeType] = _read(path)
        self.used: dict[str, CodeType] = {}
        self.compiled = False

    def compile_and_eval(
        self, script: str, globs: dict[str, Any] | None, locs: Any = None, filename: str = ""
    ) -> None:
        source, count = _SALT.subn(rf"\g<1>{_SALT_NAME},\n", script)
        if count > 1 or globs is None:  # not a shape this cache knows: as attrs does it
            eval(compile(script, filename, "exec"), globs, locs)
            return
        if count:
            salt = _SALT.search(script)
            assert salt is not None
            globs[_SALT_NAME] = int(salt.group(2))
        key = f"{filename}\0{source}"
        code = self.known.get(key)
        if code is None:
            # compile() inherits this module's `from __future__ import annotations`, as it
            # inherits attr._make's when attrs compiles: the same flags, the same code.
            code = compile(source, filename, "exec")
            self.compiled = True
        self.used[key] = code
        eval(code, globs, locs)

    def write(self) -> None:
        if not self.compiled or sys.dont_write_bytecode:
            return
        entries = {**self.known, **self.used}
        if len(entries) > _MAX_ENTRIES:
            entries = self.used
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}")
            temporary.write_bytes(marshal.dumps(entries))
            os.replace(temporary, self.path)
        except (OSError, ValueError):
            pass


def _read(path: Path) -> dict[str, CodeType]:
    try:
        loaded = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, CodeType)}


def cache_path() -> Path:
    """Per bytecode format, in the user's cache folder (as stevedore's).  Not per attrs version:
    the source is the key (and ``attr.__version__`` reads the installed distributions)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    magic = importlib.util.MAGIC_NUMBER.hex()
    return Path(base, "cpx", f"attrs-methods-{sys.implementation.cache_tag}-{magic}.marshal")


def install() -> None:
    """Compile attrs' methods through the cache from now on (once per process)."""
    if not hasattr(attr._make, "_compile_and_eval") or isinstance(
        getattr(attr._make._compile_and_eval, "__self__", None), _Cache
    ):
        return
    cache = _Cache(cache_path())
    setattr(attr._make, "_compile_and_eval", cache.compile_and_eval)  # noqa: B010 (a private name)
    atexit.register(cache.write)


install()
