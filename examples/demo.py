#!/usr/bin/env python3
"""Run the quickstart demo: ``python3 examples/demo.py``.

Creates or refreshes .venv first, then runs ``cpx run examples/quickstart``: cpx, a real Envoy
and a small backend, until Ctrl-C.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import devenv


def main() -> None:
    python = devenv.ensure()
    cpx = python.parent / "cpx"
    example = sys.argv[1] if len(sys.argv) > 1 else str(devenv.ROOT / "examples" / "quickstart")
    os.execv(str(cpx), [str(cpx), "run", example, *sys.argv[2:]])


if __name__ == "__main__":
    main()
