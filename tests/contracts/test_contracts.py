"""The enforced boundaries (issue #9 item 4): import contracts, no cycles, mypy strict, complexity.

Each check runs on the real tree, and on a deliberately broken fixture to prove it fails on that
violation.  The import fixtures are checked with the contracts exactly as pyproject.toml writes
them; only ``root_packages`` points at the fixture's packages.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
IMPORTLINTER: dict[str, Any] = PYPROJECT["tool"]["importlinter"]
CONTRACTS = {contract["id"]: contract for contract in IMPORTLINTER["contracts"]}
BIN = Path(sys.executable).parent
RULES = ROOT / "core" / "cpx" / "testing" / "importrules.py"


def _plugin_dirs() -> list[Path]:
    return sorted({p.parent.parent for p in ROOT.glob("examples/plugins/*/cpx_*/__init__.py")})


def _lint_imports(cwd: Path, config: Path, contract: str, pythonpath: list[Path]) -> tuple[bool, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath)), "COLUMNS": "200"}
    result = subprocess.run(
        [str(BIN / "lint-imports"), str(config), "--contract", contract, "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode == 0, result.stdout + result.stderr


# -- the real tree ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "contract",
    CONTRACTS,
)
def test_import_contract_holds(contract: str) -> None:
    kept, report = _lint_imports(ROOT, ROOT / "pyproject.toml", contract, _plugin_dirs())
    assert kept, report


def test_every_plugin_package_is_a_root_package() -> None:
    packages = {init.parent.name for init in ROOT.glob("plugins/*/cpx_*/__init__.py")}
    packages |= {init.parent.name for init in ROOT.glob("examples/plugins/*/cpx_*/__init__.py")}
    missing = packages - set(IMPORTLINTER["root_packages"])
    assert packages and not missing, f"add to [tool.importlinter] root_packages: {sorted(missing)}"


def _core_modules() -> set[str]:
    core = ROOT / "core"
    return {
        ".".join(path.relative_to(core).with_suffix("").parts).removesuffix(".__init__")
        for path in (core / "cpx").rglob("*.py")
    }


def _layer_modules() -> list[str]:
    return [name.strip() for layer in CONTRACTS["core-layers"]["layers"] for name in re.split("[:|]", layer)]


def test_every_core_module_is_in_a_layer() -> None:
    layers = _layer_modules()
    # Packages split over several layers (cpx.dag, cpx.sources, cpx.xds) are namespaces, or facades
    # like cpx itself: their __init__ is not layered.
    split = {layer.rsplit(".", 1)[0] for layer in layers}
    unplaced = {
        module
        for module in _core_modules() - split
        if not any(module == layer or module.startswith(layer + ".") for layer in layers)
    }
    assert not unplaced, f"place in the core-layers contract: {sorted(unplaced)}"


def test_the_version_has_one_source() -> None:
    import cpx

    # cpx.ops.metrics reads the installed version so that it need not import the facade.
    assert cpx.__version__ == importlib.metadata.version("cpx")


# -- broken fixtures: each contract fails on its violation ---------------------------------------


def _write_module(base: Path, module: str, body: str = "") -> None:
    parts = module.split(".")
    for depth in range(1, len(parts)):
        init = base.joinpath(*parts[:depth], "__init__.py")
        init.parent.mkdir(parents=True, exist_ok=True)
        init.touch()
    # Core modules keep the real tree's shape; fixture plugins are packages.
    package = (ROOT / "core" / Path(*parts)).is_dir() if parts[0] == "cpx" else True
    path = base.joinpath(*parts, "__init__.py") if package else base.joinpath(*parts[:-1], f"{parts[-1]}.py")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(body)


def _ignored_imports() -> Iterator[tuple[str, str]]:
    for contract in CONTRACTS.values():
        for expression in contract.get("ignore_imports", ()):
            importer, imported = (name.strip() for name in expression.split("->"))
            yield importer, imported


Check = Callable[[str, Mapping[str, str]], tuple[bool, str]]


@pytest.fixture
def fixture_tree(tmp_path: Path) -> Iterator[Check]:
    """A skeleton core with every module the contracts name (and the imports they waive), plus the
    given modules; returns whether one contract holds on it, and import-linter's report."""

    def check(contract: str, modules: Mapping[str, str]) -> tuple[bool, str]:
        for module in _layer_modules():
            _write_module(tmp_path, module)
        for importer, imported in _ignored_imports():
            _write_module(tmp_path, imported)
            _write_module(tmp_path, importer, f"import {imported}\n")
        for module, body in modules.items():
            _write_module(tmp_path, module, body)
        shutil.copy(RULES, tmp_path / "importrules_under_test.py")
        roots = sorted({module.split(".")[0] for module in modules} | {"cpx"})
        config = {**IMPORTLINTER, "root_packages": roots}
        config["contract_types"] = [
            entry.replace("cpx.testing.importrules", "importrules_under_test")
            for entry in config["contract_types"]
        ]
        config["contracts"] = [CONTRACTS[contract]]
        (tmp_path / "importlinter.toml").write_text(_toml({"tool": {"importlinter": config}}))
        return _lint_imports(tmp_path, tmp_path / "importlinter.toml", contract, [tmp_path])

    yield check


def _toml(value: Mapping[str, Any], prefix: str = "") -> str:
    """Just enough TOML for import-linter's configuration (tomllib only reads)."""
    lines, tables = [], []
    for key, item in value.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(item, Mapping):
            tables.append(_toml(item, name))
        elif isinstance(item, list) and item and isinstance(item[0], Mapping):
            tables += [f"[[{name}]]\n" + _toml(entry, name).split("\n", 1)[1] for entry in item]
        else:
            lines.append(f"{key} = {_toml_value(item)}")
    head = f"[{prefix}]\n" if prefix else ""
    return head + "\n".join(lines) + "\n" + "\n".join(tables)


def _toml_value(item: Any) -> str:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, list):
        return "[" + ", ".join(_toml_value(entry) for entry in item) + "]"
    return '"' + str(item).replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_the_clean_fixture_keeps_every_contract(fixture_tree: Check) -> None:
    for contract in CONTRACTS:
        kept, report = fixture_tree(contract, {"cpx_good": "import cpx\nimport cpx.dag\nimport cpx.xds\n"})
        assert kept, report


def test_the_core_importing_any_cpx_package_breaks(fixture_tree: Check) -> None:
    # cpx_something is not a root package: a plugin that does not exist yet is caught too.
    kept, report = fixture_tree("core-never-imports-plugins", {"cpx.events": "import cpx_something\n"})
    assert not kept
    assert "cpx.events -> cpx_something" in report


def test_a_plugin_importing_another_breaks(fixture_tree: Check) -> None:
    kept, report = fixture_tree("plugins-independent", {"cpx_one": "import cpx_two\n", "cpx_two": ""})
    assert not kept
    assert "cpx_one -> cpx_two" in report


def test_a_plugin_importing_a_private_core_module_breaks(fixture_tree: Check) -> None:
    kept, report = fixture_tree(
        "plugins-use-public-api", {"cpx_one": "import cpx.dag\nfrom cpx.sources import cache\n"}
    )
    assert not kept
    assert "cpx_one -> cpx.sources.cache" in report
    assert "-> cpx.dag " not in report


def test_a_layer_violation_breaks(fixture_tree: Check) -> None:
    kept, report = fixture_tree("core-layers", {"cpx.dag.nodes": "import cpx.snapshot\n"})
    assert not kept
    assert "cpx.dag.nodes -> cpx.snapshot" in report


@pytest.mark.parametrize(
    "modules",
    [
        {"cpx.dag.dag": "import cpx.dag.nodes\n", "cpx.dag.nodes": "import cpx.dag.dag\n"},
        {
            "cpx_one": "from cpx_one import b\n",
            "cpx_one.b": "import cpx_one.c\n",
            "cpx_one.c": "import cpx_one\n",
        },
    ],
    ids=["core", "plugin"],
)
def test_an_import_cycle_breaks(fixture_tree: Check, modules: Mapping[str, str]) -> None:
    kept, report = fixture_tree("no-cycles", modules)
    assert not kept
    first, second = list(modules)[:2]
    assert f"{first} -> {second}" in report or f"{second} -> {first}" in report


# -- mypy strict and ruff's complexity rules ----------------------------------------------------


def _tool(tmp_path: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", *args], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode != 0, "the check passed on a broken fixture"
    return result.stdout + result.stderr


def test_mypy_strict_rejects_an_unannotated_function(tmp_path: Path) -> None:
    (tmp_path / "loose.py").write_text(
        "from __future__ import annotations\n\n\ndef double(x):\n    return x * 2\n"
    )
    report = _tool(tmp_path, "mypy", "--config-file", str(ROOT / "pyproject.toml"), "loose.py")
    assert "loose.py:4: error: Function is missing a type annotation  [no-untyped-def]" in report


TANGLED = "from __future__ import annotations\n\n\ndef tangled(x: int) -> int:\n" + "".join(
    f"    if x == {n}:\n        return {n}\n" for n in range(14)
)


def test_ruff_rejects_a_too_complex_function(tmp_path: Path) -> None:
    (tmp_path / "tangled.py").write_text(TANGLED + "    return -1\n")
    report = _tool(
        tmp_path,
        "ruff",
        "check",
        "--output-format",
        "concise",
        "--config",
        str(ROOT / "pyproject.toml"),
        "tangled.py",
    )
    for rule in ("C901", "PLR0911", "PLR0912"):
        assert f"tangled.py:4:5: {rule}" in report


COMPLEXITY = re.compile(r"#\s*noqa:[^#]*\b(C901|PLR091[1235])\b(?P<rest>.*)$")


def test_every_complexity_waiver_says_why() -> None:
    unexplained = [
        f"{path.relative_to(ROOT)}:{number}"
        for top in ("core", "plugins", "tests", "examples")
        for path in (ROOT / top).rglob("*.py")
        if ".venv" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if (match := COMPLEXITY.search(line)) and "(why:" not in match.group("rest")
    ]
    assert not unexplained, f"a complexity waiver needs `(why: ...)` on its line: {unexplained}"
