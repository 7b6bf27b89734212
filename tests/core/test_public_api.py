"""The plugin API: cpx, cpx.dag and cpx.xds (plus cpx.testing for tests) name all a plugin uses."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import cpx
from cpx.testing.contract import private_imports

ROOT = Path(__file__).resolve().parents[2]
FACADES = ("cpx", "cpx.dag", "cpx.xds", "cpx.testing")
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


@pytest.mark.parametrize("package", PLUGIN_PACKAGES, ids=lambda p: p.name)
def test_plugin_packages_import_only_the_public_api(package: Path) -> None:
    assert package.is_dir()
    assert private_imports(package) == []


def test_a_private_import_breaks_the_contract(tmp_path: Path) -> None:
    package = tmp_path / "cpx_sneaky"
    package.mkdir()
    (package / "__init__.py").write_text("from cpx import hookimpl\nfrom cpx.dag import DAG\n")
    (package / "cache.py").write_text("from cpx.sources.cache import SourceCache\nimport cpx.snapshot\n")
    assert private_imports(package) == [
        "cpx_sneaky/cache.py: cpx.snapshot",
        "cpx_sneaky/cache.py: cpx.sources.cache",
    ]
