"""The code stays ruff-clean and the core mypy-strict: checked with every test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["core", "plugins", "tests", "examples"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("command", [["ruff", "check", *PATHS], ["ruff", "format", "--check", *PATHS]])
def test_ruff(command: list[str]) -> None:
    result = _run(*command)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_on_the_core_and_every_plugin() -> None:
    result = _run("mypy", "--no-error-summary")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_covers_every_plugin_package() -> None:
    import tomllib

    files = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"])
    packages = {
        str(init.parent.relative_to(ROOT))
        for pattern in ("plugins/*/cpx_*/__init__.py", "examples/plugins/*/cpx_*/__init__.py")
        for init in ROOT.glob(pattern)
    }
    assert packages and packages <= files, f"add to [tool.mypy] files: {sorted(packages - files)}"
