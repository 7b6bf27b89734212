"""The plugin API: cpx, cpx.dag and cpx.xds (plus cpx.testing for tests) name all a plugin uses."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import cpx

ROOT = Path(__file__).resolve().parents[2]
FACADES = ("cpx", "cpx.dag", "cpx.xds", "cpx.testing")
PUBLIC = {*FACADES, "cpx.testing.strategies"}
PLUGIN_PACKAGES = sorted(p for p in [*ROOT.glob("plugins/*/cpx_*"), *ROOT.glob("examples/plugins/*/cpx_*")])


@pytest.mark.parametrize("facade", FACADES)
def test_every_public_name_resolves(facade: str) -> None:
    module = importlib.import_module(facade)
    assert module.__all__ == sorted(module.__all__, key=lambda n: (not n.isupper(), n))
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_lazy_names_are_the_listed_ones() -> None:
    for facade in ("cpx", "cpx.xds", "cpx.testing"):
        module = importlib.import_module(facade)
        assert set(module._LAZY) <= set(module.__all__), facade
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        cpx.nothing  # noqa: B018


def test_importing_cpx_loads_no_protobuf_grpc_or_cryptography() -> None:
    code = "import sys, cpx, cpx.dag; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("grpc", "google", "cryptography", "envoy"):
        assert f"'{heavy}'" not in loaded


def _cpx_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "cpx" or m.startswith("cpx.")}


@pytest.mark.parametrize("package", PLUGIN_PACKAGES, ids=lambda p: p.name)
def test_plugin_packages_import_only_the_public_api(package: Path) -> None:
    assert package.is_dir()
    private = {f"{p.relative_to(ROOT)}: {m}" for p in package.rglob("*.py") for m in _cpx_imports(p) - PUBLIC}
    assert not private
