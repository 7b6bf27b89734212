"""``cpx translate``'s YAML writer: the same bytes as ``yaml.dump`` for JSON-shaped values."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cpx.cli.translate_yaml import dump

# Strings the resolver or the emitter treat specially: quoted, folded, escaped or kept plain.
AWKWARD = [
    "",
    " x",
    "x ",
    "true",
    "yes",
    "No",
    "null",
    "~",
    "-",
    "0o12",
    "1e3",
    "0x1F",
    "12:30",
    "2024-01-01",
    "a: b",
    "#c",
    "&a",
    "*a",
    "!t",
    "'q'",
    '"q"',
    "multi\nline",
    "tab\there",
    "\u00e9\u4e2d",
    "\U0001f600",
    "long words " * 20,
    "x" * 200,
    "=",
    "<<",
    "[1]",
    "{a: 1}",
    "%x",
    "@x",
    "`x",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40) | st.sampled_from(AWKWARD),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)


def expected(doc: Any) -> str:
    text: str = yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False)
    return text


@pytest.mark.parametrize(
    "value", [*AWKWARD, 0, -1.5, float("inf"), float("nan"), True, None, {}, [], [[]], [{}]]
)
def test_awkward_scalars_and_empty_collections(value: Any) -> None:
    # Through JSON, as translate does: no object appears twice (yaml.dump would anchor it).
    doc = json.loads(
        json.dumps({"key": value, "list": [value, {value if isinstance(value, str) else "k": value}]})
    )
    assert dump(doc) == expected(doc)
    assert dump(value) == expected(value)


@given(json_values)
def test_any_json_value_dumps_as_yaml_dump_does(doc: Any) -> None:
    assert dump(doc) == expected(doc)


# Words near the line width, made of the characters that decide between plain and quoted scalars.
wordy = st.text(alphabet="ab1/_-.=+()@,;:#'\" ", max_size=100)
wordy_values = st.recursive(
    wordy | st.integers() | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(wordy, inner, max_size=3),
    max_leaves=20,
)


@given(st.dictionaries(wordy, wordy_values, min_size=1, max_size=4))
def test_words_at_any_column_dump_as_yaml_dump_does(doc: dict[str, Any]) -> None:
    assert dump(doc) == expected(doc)


def test_keys_libyaml_writes_as_complex_keys() -> None:
    for key in ("", "k" * 130, "a\nb"):
        for value in ("x", {"b": 1}, [1], {}, []):
            doc = json.loads(json.dumps({"a": [{key: value}], key: {"c": value}}))  # nothing shared
            assert dump(doc) == expected(doc)


class Level(enum.IntEnum):
    HIGH = 2


SHARED = {"x": [1]}  # yaml.dump would anchor it; its JSON holds two copies


@pytest.mark.parametrize(
    "doc",
    [
        {"tuple": ("a", 1)},
        {"a": {1: "int key"}},
        {"a": [{None: 1}]},
        {"a": Level.HIGH},
        {"a": [1.5, float("nan")]},
        {"shared": [SHARED, SHARED]},
        {"shared": [SHARED, {"": SHARED}]},  # a complex key: the emitter writes the whole document
    ],
)
def test_other_values_dump_as_their_json_would(doc: Any) -> None:
    assert dump(doc) == expected(json.loads(json.dumps(doc)))
