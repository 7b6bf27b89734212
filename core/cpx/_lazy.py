"""Lazy re-exports for the public facades (``cpx``, ``cpx.xds``).

``import cpx`` runs for every CLI command, and ``cpx.xds``'s ``__init__`` for every module under it: a
facade that imported its whole surface eagerly would load protobuf and cryptography for ``cpx --help``
and make the xDS subpackages import each other in a cycle.  A name is imported on first use instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exporter(facade: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``table``: public name -> ``"module"`` (the same name there),
    ``"module:attribute"`` (another name there) or ``"module:"`` (the module itself)."""

    def getattr_(name: str) -> Any:
        try:
            where = table[name]
        except KeyError:
            raise AttributeError(f"module {facade!r} has no attribute {name!r}") from None
        module, colon, attribute = where.partition(":")
        loaded = importlib.import_module(module)
        value = loaded if colon and not attribute else getattr(loaded, attribute or name)
        globals_ = importlib.import_module(facade).__dict__
        globals_[name] = value  # later lookups are plain attribute reads
        return value

    return getattr_
