"""Every hookspec is documented (datasette's test), and docs/hooks.md lists each one."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from cpx import hookspecs
from cpx.records import OptionSpec, ProcessorSpec, ResourceCacheSpec, StatusWriterSpec, WatchSpec

ROOT = Path(__file__).resolve().parents[2]
HOOKS = [
    (name, fn) for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("cpx_")
]
SECTIONS = ("**When it is called**", "**Returns**", "**Ordering and conflicts**", "**Example**")


def test_there_are_hooks() -> None:
    assert len(HOOKS) >= 8


@pytest.mark.parametrize(("name", "fn"), HOOKS, ids=[h[0] for h in HOOKS])
def test_hookspec_docstring_is_complete(name: str, fn: object) -> None:
    doc = inspect.getdoc(fn) or ""
    assert doc, f"{name} has no docstring"
    for section in SECTIONS:
        assert section in doc, f"{name} docstring lacks {section}"
    for param in inspect.signature(fn).parameters:  # type: ignore[arg-type]
        assert f":param {param}:" in doc, f"{name} does not document {param}"


@pytest.mark.parametrize(("name", "fn"), HOOKS, ids=[h[0] for h in HOOKS])
def test_hook_is_in_docs(name: str, fn: object) -> None:
    text = (ROOT / "docs" / "hooks.md").read_text()
    signature = f"{name}({', '.join(inspect.signature(fn).parameters)})"  # type: ignore[arg-type]
    assert signature in text, f"docs/hooks.md does not show {signature}"


@pytest.mark.parametrize(
    "record", [WatchSpec, ProcessorSpec, ResourceCacheSpec, StatusWriterSpec, OptionSpec]
)
def test_record_fields_are_in_docs(record: type) -> None:
    import attrs

    text = (ROOT / "docs" / "hooks.md").read_text()
    assert f"### {record.__name__}" in text
    for field in attrs.fields(record):
        assert f"`{field.name}`" in text, f"docs/hooks.md does not describe {record.__name__}.{field.name}"


def test_hooks_md_is_current() -> None:
    from cpx.hookdocs import render

    assert (ROOT / "docs" / "hooks.md").read_text() == render(), "run: python -m cpx.hookdocs > docs/hooks.md"
