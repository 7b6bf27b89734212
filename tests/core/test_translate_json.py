"""``cpx translate -o json``'s writer: the same text as ``json.dumps(doc, indent=2)`` for any value."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpx.cli.translate import json_text


class Level(enum.IntEnum):
    HIGH = 2


# Values orjson writes unlike json (or refuses): the writer must notice and use json's text.
UNLIKE = [
    1e-05,
    1e16,
    float("nan"),
    float("-inf"),
    -0.0,
    2**70,
    "\u00e9\u4e2d",
    "\x7f",
    "\x00\x1f\t\n",
    "\ud800",
    {1: "int key"},
    {True: None},
    ("a", "tuple"),
    Level.HIGH,
    [[]],
    {"": {}},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.sampled_from(UNLIKE),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10) | st.integers(), inner, max_size=4)
    ),
    max_leaves=30,
)


@pytest.mark.parametrize("value", UNLIKE)
def test_values_orjson_writes_otherwise(value: Any) -> None:
    for doc in (value, {"k": [value, {"n": value}]}):
        assert json_text(doc) == json.dumps(doc, indent=2)


@given(json_values)
def test_any_value_as_json_dumps_writes_it(doc: Any) -> None:
    assert json_text(doc) == json.dumps(doc, indent=2)


def test_refused_values_raise_as_json_does() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_text({"a": {1, 2}})


@pytest.mark.parametrize(
    "doc",
    [
        {"a": "x:1.5,2e3[null", "b": None, "c": [1.5]},  # text that looks like a float or null
        {"a": [0.5]},
        {"a": {"b": float("inf")}},
        {"a": [None, 1, "\x7f"]},
    ],
)
def test_floats_and_nulls_anywhere(doc: Any) -> None:
    assert json_text(doc) == json.dumps(doc, indent=2)
