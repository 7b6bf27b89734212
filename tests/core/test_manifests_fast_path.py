"""The yaml-rs fast path of ``load_documents`` builds exactly what the PyYAML path builds, or
declines (the PyYAML path then decides, errors included)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cpx.objects import take_nesting_bound
from cpx.sources.manifests import FAST_NESTING, _fast_documents, _libyaml_documents, load_documents

SERVICE = (
    "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  namespace: default\n"
    "spec:\n  ports:\n  - port: 80\n    name: http\n  selector: {}\n  ips: []\n"
)


def built(load: Any, text: str) -> str:
    """What ``load`` builds, as a repr: dict order and types (1 is not True) count too."""
    try:
        return repr(load(text))
    except Exception as err:  # PyYAML's own IndexError on `!!int ''` included
        return f"error: {type(err).__name__}: {err}"


def assert_exact(text: str) -> list[Any] | None:
    """The fast path declined or built what the PyYAML path builds; returns its result."""
    fast = _fast_documents(text)
    if fast is not None:
        assert repr(fast) == built(_libyaml_documents, text)
    assert built(load_documents, text) == built(_libyaml_documents, text)
    return fast


@pytest.mark.parametrize(
    "text",
    [
        SERVICE,
        SERVICE + "---\n" + SERVICE,
        "",
        "# only a comment\n\n",
        "---\n",
        "a: 1\n---\n",
        "---\n---\n- x\n",
        "# head\n---\na: 1\n",
        "- 1\n---\n- 2\n",  # two documents that are lists: not one list of two
        "- - 1\n",  # one document, a list holding a list
        "a: 1\n---\n- x\n",
        "--- # comment\na: 1\n",
        "a: 1\n--- \nb: 2\n",
        "---a: 1\n",  # not a marker: a key
        "a: 1\n---x: 2\n",
        "~\n---\nnull\n",
        "a: ''\nb: \"\"\nc:\nd: ~\n",
        "a: true\nb: False\nc: TRUE\n",
        "a: 0\nb: -1\nc: +1\nd: 8080\ne: 127.0.0.1\n",
        "a: folded\n  text\n\n  para\nb: 'x\n\n  y'\n",
        "a: http://x:80/y\nb: x:y\n",
        "a: 'it''s'\nb: \"x y\"\n",
        "a: x #c\nb: x#c\n",
        # Quoted values yaml-rs would read as no string if plain: quoted for sure, PyYAML's strings.
        "a: '80'\nb: \"1\"\nc: 'true'\nd: 'True'\ne: '~'\nf: 'null'\ng: '1.5'\nh: '0x1F'\n",
        "metadata:\n  resourceVersion: '1'\nspec:\n  port: '8080'\n",
    ],
)
def test_taken(text: str) -> None:
    assert assert_exact(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "--- x\n",  # a document that is a string
        "|-\n# c\n  x\n",  # ... which yaml-rs reads where libyaml refuses
        "a: |\n",  # block scalars: yaml-rs reads an empty one as "\n"
        "a: >-\n  x\n",
        "a: [x:]\n",  # flow collections: yaml-rs reads what libyaml refuses
        "a: {b: ?}\n",
        "? a\n: b\n",  # explicit keys
        "a: :x\n",  # a plain scalar starting with `:`
        "- ::1\n",
        "a: _1\n",  # yaml-rs reads 1
        "a: yes\n",  # YAML 1.1 bools
        "a: On\n",
        "on: x\n",
        "a: 'yes'\n",  # quoted: PyYAML's string too, but yaml-rs reads a plain yes as a string too
        "a: 1_000\n",
        "a: 0b101\n",
        "a: 1:30\n",  # sexagesimal
        "a: 2024-01-01\n",  # timestamps
        "a: 2001-12-14\n  21:59:43.10\n",  # a timestamp folded over two lines
        "=: x\n",
        "<<: {a: 1}\nb: 2\n",
        "a: 017\n",  # 1.1 octal 15, 1.2 decimal 17
        "a: 1\nb: 017\n",
        "a: 0o17\n",  # 1.2 int, 1.1 string
        "a: -0o17\n",
        "a: 0x1F\n",
        "a: -0x1F\n",
        "a: 1e3\n",  # 1.2 float, 1.1 string
        "a: 1.5\n",
        "a: .inf\n",
        "a: .NaN\n",
        "a: !!str 1\n",
        "a: !custom 1\n",
        "a: &x 1\nb: *x\n",
        "a: *x\n",
        'a: "\\t"\n',
        "a:\tb\n",
        "a: b\r\n",
        "a: \u00e9\n",
        "\ufeffa: 1\n",
        "%YAML 1.1\n---\na: 1\n",
        "a: 1\n...\n",
        "a: 1\na: 2\n",  # PyYAML keeps the last value
        "1: one\n",
        "? [1]\n: x\n",
        ":\n",
        "[1, 2\n",
        "a: " + "1" * 5000 + "\n",
    ],
)
def test_declined(text: str) -> None:
    assert assert_exact(text) is None


def test_interned_like_the_pyyaml_path() -> None:
    one, two = _fast_documents(SERVICE + "---\n" + SERVICE) or []
    assert all(a is b for a, b in zip(one, two, strict=True))  # keys
    assert one["kind"] is two["kind"] and one["metadata"]["namespace"] is two["metadata"]["namespace"]


TRICKY = [
    "yes", "On", "off", "y", "n", "017", "0o17", "1e3", "1_000", "0b101", "1:30", "2024-01-01", "~", "null",
    ".inf", "0x1F", "-0x1F", "+1", "", "a: b", "#x", "x #y", "- x", "---", "...", "--- x", "<<", "=", "0",
    "-0", "007", "1.", ".5", "True", "FALSE", "Null", "? x", "[x]", "{x}", "'q'", '"d"', "a\nb", "a\n\nb",
    " lead", "trail ", "x\n", "\n", "%x", "@x", "`x`", "a,b", "*x", "&x", "!x", "\\x", "tab\tx", "caf\u00e9",
]  # fmt: skip
scalars = st.one_of(
    st.sampled_from(TRICKY),
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, width=32),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30),
    st.text(st.sampled_from("ab -:#'\"\n0x1._"), max_size=30),
)
keys = st.one_of(
    st.sampled_from(TRICKY), st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
dump_options = st.fixed_dictionaries(
    {
        "default_flow_style": st.sampled_from([False, True, None]),
        "default_style": st.sampled_from([None, '"', "'", "|"]),
        "explicit_start": st.booleans(),
        "width": st.sampled_from([20, 80]),
        "indent": st.sampled_from([2, 4]),
        "sort_keys": st.booleans(),
    }
)


@settings(max_examples=400, deadline=None)
@given(st.lists(values, min_size=1, max_size=3), dump_options, st.data())
def test_the_fast_path_builds_what_pyyaml_builds(docs: list[Any], options: dict[str, Any], data: Any) -> None:
    text = yaml.dump_all(docs, Dumper=yaml.SafeDumper, **options)
    lines = text.split("\n")
    for _ in range(data.draw(st.integers(0, 3))):  # comments anywhere: whatever they do, both see them
        at = data.draw(st.integers(0, len(lines)))
        lines.insert(at, data.draw(st.sampled_from(["# c", "  # c", "", "---", "--- # c"])))
    assert_exact("\n".join(lines))


# Pieces of text the fast path does not decline at sight (no `!`, `&`, tab ...), so that it parses.
PIECES = [p for p in TRICKY if p.isascii() and not set(p) & set("!&*\\\t%")]


@settings(max_examples=600, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [*PIECES, " ", "  ", "\n", "\n  ", "\n- ", ": ", "- ", ",", "[", "]", "{", "}", "|", ">"]
        )
    )
)
def test_the_fast_path_on_any_text(parts: list[str]) -> None:
    """Random text, mostly not YAML at all: declined, or exactly PyYAML's documents."""
    assert_exact("".join(parts))


def _nested(depth: int) -> str:
    """A Service whose ``spec.x`` holds maps ``depth`` levels below the document (block style)."""
    lines = ["apiVersion: v1", "kind: Service", "metadata:", "  name: s", "spec:"]
    lines += ["  " * level + "x:" for level in range(1, depth - 1)]
    lines.append("  " * (depth - 1) + "y: 1")
    return "\n".join(lines) + "\n"


def test_deep_documents_are_left_to_pyyaml_and_shallow_ones_marked() -> None:
    shallow = _fast_documents(_nested(FAST_NESTING))
    assert shallow is not None and take_nesting_bound(shallow[0]) == FAST_NESTING
    assert take_nesting_bound(shallow[0]) is None  # answered once
    assert _fast_documents(_nested(FAST_NESTING + 1)) is None
    deep = load_documents(_nested(FAST_NESTING + 1))
    assert deep == _libyaml_documents(_nested(FAST_NESTING + 1))
    assert take_nesting_bound(deep[0]) is None
