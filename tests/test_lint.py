"""The code stays ruff-clean and the whole tree mypy-strict: checked with every test run."""

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


def test_mypy_strict_on_the_whole_tree() -> None:
    result = _run("mypy", "--no-error-summary")
    assert result.returncode == 0, result.stdout + result.stderr


PLUGIN_TESTS = sorted(
    str(p.relative_to(ROOT))
    for pattern in ("plugins/*/tests", "examples/plugins/*/tests")
    for p in ROOT.glob(pattern)
)


@pytest.mark.parametrize("tests", PLUGIN_TESTS)
def test_mypy_strict_on_each_plugins_tests(tests: str) -> None:
    # Run one at a time: every plugin's test directory is the package `tests`.
    result = _run("mypy", "--no-error-summary", tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_covers_the_whole_tree() -> None:
    import tomllib

    files = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"])
    packages = {
        str(init.parent.relative_to(ROOT))
        for pattern in ("plugins/*/cpx_*/__init__.py", "examples/plugins/*/cpx_*/__init__.py")
        for init in ROOT.glob(pattern)
    }
    assert packages and packages <= files, f"add to [tool.mypy] files: {sorted(packages - files)}"
    sources = {
        path
        for top in ("core", "plugins", "tests", "examples")
        for path in (ROOT / top).rglob("*.py")
        if not {".venv", "build"} & set(path.parts)
    }
    checked = {path for path in sources for entry in files if path.is_relative_to(ROOT / entry)}
    plugin_tests = {path for path in sources if any(path.is_relative_to(ROOT / t) for t in PLUGIN_TESTS)}
    missing = sorted(str(path.relative_to(ROOT)) for path in sources - checked - plugin_tests)
    assert not missing, f"not checked by mypy: {missing}"
