"""Create or refresh the project's virtual environment (.venv) with the core and every plugin.

Standard library only: it runs before anything is installed.  Used by ``tests/run.py`` and
``examples/demo.py``; re-installs only when a pyproject.toml changed since the last install.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / ".cpx-installed"


def _bin(name: str) -> Path:
    return VENV / ("Scripts" if os.name == "nt" else "bin") / name


def _projects() -> list[Path]:
    return [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for project in _projects():
        digest.update((project / "pyproject.toml").read_bytes())
    return digest.hexdigest()


def ensure() -> Path:
    """Return the venv's python, creating and installing into the venv if needed."""
    if sys.version_info < (3, 11):
        sys.exit(f"cpx needs Python 3.11 or newer (this is {sys.version.split()[0]})")
    python = _bin("python")
    if not python.exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    fingerprint = _fingerprint()
    if STAMP.exists() and STAMP.read_text() == fingerprint:
        return python
    print("installing cpx and its plugins into .venv (editable) ...", flush=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    args = [str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[dev]"]
    for project in _projects()[1:]:
        args += ["-e", str(project)]
    subprocess.run(args, check=True)
    STAMP.write_text(fingerprint)
    return python
