#!/usr/bin/env python3
"""Run the whole test suite: ``python3 tests/run.py [pytest args]``.

Creates or refreshes .venv first (core + every plugin, editable), then runs pytest in it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import devenv


def main() -> None:
    python = devenv.ensure()
    os.chdir(devenv.ROOT)
    args = [str(python), "-m", "pytest", *sys.argv[1:]]
    os.execv(args[0], args)


if __name__ == "__main__":
    main()
