"""Every hookspec is documented (datasette's test), and docs/hooks.md lists each one."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from cpx import hookspecs
from cpx.hookdocs import PROTOCOLS, RECORDS

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


@pytest.mark.parametrize("record", RECORDS)
def test_record_fields_are_in_docs(record: type) -> None:
    import attrs

    text = (ROOT / "docs" / "hooks.md").read_text()
    assert f"### {record.__name__}" in text
    for field in attrs.fields(record):
        assert f"`{field.name}`" in text, f"docs/hooks.md does not describe {record.__name__}.{field.name}"


@pytest.mark.parametrize("record", RECORDS)
def test_every_record_has_an_example(record: type) -> None:
    assert "**Example**::" in (record.__doc__ or ""), f"{record.__name__}: add an example to its docstring"


def test_every_public_record_and_protocol_is_documented() -> None:
    import attrs

    import cpx
    from cpx import records

    public = {getattr(cpx, name) for name in cpx.__all__}
    public = {thing for thing in public if getattr(thing, "__module__", None) == records.__name__}
    documented = {*RECORDS, *PROTOCOLS}
    missing = {
        thing.__name__
        for thing in public
        if isinstance(thing, type) and (attrs.has(thing) or getattr(thing, "_is_protocol", False))
    } - {thing.__name__ for thing in documented}
    assert not missing, f"add to cpx.hookdocs: {sorted(missing)}"


def test_hooks_md_is_current() -> None:
    from cpx.hookdocs import render

    assert (ROOT / "docs" / "hooks.md").read_text() == render(), "run: python -m cpx.hookdocs > docs/hooks.md"
