"""The compiled pass/fail checks of admission against the walks that word the problems: a value the
fast check passes must be one the walk finds nothing in (otherwise a problem would go unreported)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cpx.builtin import openapi, typecheck
from cpx.builtin.schema import ENDPOINT_SLICE_SCHEMA, SECRET_SCHEMA, SERVICE_SCHEMA

# Every keyword the openapi walk knows, on a few levels.
_OPENAPI: Mapping[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 6, "pattern": "^[a-z]+$"},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "port": {"type": "integer", "minimum": 1, "maximum": 9},
        "ratio": {"type": "number", "maximum": 1, "exclusiveMaximum": True},
        "flag": {"type": "boolean"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "anything": {},
        "limited": {"minimum": 2},
        "items": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "not-5", "message": "5"},
                    {"rule": "other", "message": "m"},
                ],
                "properties": {
                    "x": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "free": {"type": "array"},
    },
}
_RULES: Mapping[str, openapi.CelRule] = {"not-5": lambda value: value.get("x") != 5}

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "a", "b", "abc", "ABC", "toolongname", "µs", "x"]),
)


_SHAPED_SCALARS: Mapping[Any, st.SearchStrategy[Any]] = {
    "string": st.sampled_from(["a", "b", "abc", "ABC", "toolongname", "", "µs"]),
    "integer": st.integers(-2, 12) | st.just(3.0),
    "number": st.floats(0, 2) | st.integers(0, 2),
    "boolean": st.booleans(),
}


def _values(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly values of the schema's shape (so that checks run deep), some of any shape."""
    kind = schema.get("type")
    shaped: st.SearchStrategy[Any] = _SHAPED_SCALARS.get(kind, _SCALARS)
    if kind == "object" and "additionalProperties" in schema:
        keys = st.sampled_from(["k", "x", "y", 1])
        shaped = st.dictionaries(keys, _values(schema["additionalProperties"]), max_size=3)
    elif kind == "object":
        fields = {name: _values(field) for name, field in schema.get("properties", {}).items()}
        required = {name: fields.pop(name) for name in schema.get("required", ())}
        shaped = st.fixed_dictionaries(required, optional=fields)
    elif kind == "array" and "items" in schema:
        shaped = st.lists(_values(schema["items"]), max_size=4)
    elif kind == "array":
        shaped = st.lists(st.one_of(_SCALARS, st.lists(_SCALARS, max_size=2)), max_size=2)
    odd = st.one_of(
        _SCALARS, st.just({}), st.just([]), st.just([None]), st.just({"a": [1]}), st.just({"unknown": 1})
    )
    return st.one_of(shaped, shaped, shaped, shaped, shaped, shaped, shaped, odd)


def _nodes(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    below = [*schema.get("properties", {}).values(), schema.get("items"), schema.get("additionalProperties")]
    return [schema, *(node for child in below if child is not None for node in _nodes(child))]


@settings(max_examples=500)
@given(st.data())
def test_openapi_fast_check_passes_only_what_the_walk_passes(data: st.DataObject) -> None:
    schema = data.draw(st.sampled_from(_nodes(_OPENAPI)))  # each node alone, so that most values pass
    value = data.draw(_values(schema))
    problems: list[str] = []
    try:
        openapi._walk(value, schema, "spec", problems, _RULES)
    except TypeError:  # an untyped field's bounds against a container: the walk decides (and raises)
        problems.append("raised")
    if openapi._checker(schema, _RULES)(value):
        assert problems == []


_KINDS = [typecheck._root(schema)[0] for schema in (SERVICE_SCHEMA, ENDPOINT_SLICE_SCHEMA, SECRET_SCHEMA)]


@settings(max_examples=500)
@given(st.data())
def test_typecheck_fast_check_passes_exactly_what_the_walk_passes(data: st.DataObject) -> None:
    schema = data.draw(st.sampled_from([node for kind in _KINDS for node in _nodes(kind)]))
    value = data.draw(_values(schema))
    problems: list[str] = []
    typecheck.check(value, schema, "", problems)
    assert typecheck._passes(schema)(value) == (problems == [])


@given(
    st.recursive(
        _SCALARS,
        lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=1), inner, max_size=2),
    ),
    st.integers(0, 4),
)
def test_shallow_agrees_with_the_path_walk(value: Any, limit: int) -> None:
    if type(value) in (dict, list):
        assert typecheck._shallow(value, limit) == (typecheck._deep_path(value, limit) is None)
