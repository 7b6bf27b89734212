"""JSON type checks in the API server's words, for any value at all (type confusion never raises).

A schema here is a small OpenAPI subset: ``type`` (string, integer, boolean, object, array),
``properties`` (unknown fields are ignored: cpx never reads them), ``additionalProperties`` (maps),
``items`` (lists), and ``int-or-string``.  ``null`` counts as absent, as the API server decodes it
for optional fields.  The walk only follows the schema, so its depth is the schema's, not the
input's: a value nested 990 levels deep is one "must be a string".

Values are shown bounded and escaped (a tenant's CR/LF must not forge log lines or status text).
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from cpx.objects import take_nesting_bound

Schema = Mapping[str, Any]

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
BOOLEAN: Schema = {"type": "boolean"}
INT_OR_STRING: Schema = {"type": "int-or-string"}
STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}
STRING_LIST: Schema = {"type": "array", "items": STRING}
ANY_OBJECT: Schema = {"type": "object"}

OBJECT_META: Schema = {
    "type": "object",
    "properties": {
        "name": STRING,
        "generateName": STRING,
        "namespace": STRING,
        "uid": STRING,
        "resourceVersion": STRING,
        "generation": INTEGER,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
        "finalizers": STRING_LIST,
        "ownerReferences": {"type": "array", "items": ANY_OBJECT},
    },
}

_SHOWN_CHARS = 80
# No manifest needs more; comparing or copying much deeper values hits Python's recursion limit.
MAX_DEPTH = 64
# Problems reported per object: a list of 100k wrong items must not make a 100k-line status.
MAX_PROBLEMS = 20
# The API server's limit on the total size of an object's annotations (keys and values).
MAX_ANNOTATIONS_BYTES = 256 * 1024
_PLAIN_KEY = re.compile(r"[-._/a-zA-Z0-9]{1,253}")
_EXPECTED = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "a list",
    "int-or-string": "an integer or a string",
}


# JSON type names of values of exactly these types (all of a parsed manifest), in one lookup.
_EXACT_TYPES: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}
_EXACT_TYPES.update({list: "array", dict: "object", type(None): "null"})


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value (bool before int: a bool is an int in Python)."""
    exact = _EXACT_TYPES.get(type(value))
    if exact is not None:
        return exact
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null" if value is None else type(value).__name__


def shown(value: Any) -> str:
    """A value as a field error shows it: JSON-quoted and escaped, bounded; containers by type."""
    if isinstance(value, str):
        text = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "..."
        return json.dumps(text)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # str() of a huge int raises past 4300 digits; past 18 it says nothing useful anyway.
        return str(value) if -(10**18) < value < 10**18 else f'"{"-" if value < 0 else ""}huge integer"'
    if isinstance(value, float):
        return repr(value) if abs(value) < 1e18 else '"huge number"'
    if isinstance(value, list | Mapping) and not value:
        return "[]" if isinstance(value, list) else "{}"
    return f'"{json_type(value)}"'


def key_shown(key: Any) -> str:
    """A map key as a path element: bare when it is plain (``annotations[a.b/c]``), else quoted."""
    return key if isinstance(key, str) and _PLAIN_KEY.fullmatch(key) else shown(key)


def must_be(path: str, value: Any, expected: str) -> str:
    return f"{path}: Invalid value: {shown(value)}: must be {_EXPECTED.get(expected, expected)}"


def _is(value: Any, expected: str) -> bool:
    actual = _EXACT_TYPES.get(type(value)) or json_type(value)
    if expected == "int-or-string":
        return actual in ("integer", "string")
    return actual == expected


# Schema types with nothing to check below the value's own type.
_SCALAR_TYPES = frozenset(("string", "integer", "number", "boolean", "int-or-string"))


def check(value: Any, schema: Schema, path: str, problems: list[str]) -> None:
    """Append a problem for every value of the wrong JSON type along ``schema``."""
    expected = schema.get("type")
    if expected is not None and not _is(value, expected):
        problems.append(must_be(path, value, expected))
    elif expected == "object":
        _check_object(value, schema, path, problems)
    elif expected == "array":
        items: Schema | None = schema.get("items")
        if items is not None:
            for i, item in enumerate(value):
                if item is None:
                    problems.append(must_be(f"{path}[{i}]", item, items.get("type", "object")))
                else:
                    check(item, items, f"{path}[{i}]", problems)


def _check_object(value: Mapping[Any, Any], schema: Schema, path: str, problems: list[str]) -> None:
    """A field of a scalar type and of the right type is passed over without building its path:
    nearly every field of every admitted object is one."""
    properties: Mapping[str, Schema] = schema.get("properties", {})
    additional: Schema | None = schema.get("additionalProperties")
    plain_values = additional is not None and additional.get("type") in _SCALAR_TYPES
    for key, item in value.items():
        if item is None:
            continue
        if additional is not None and not isinstance(key, str):
            problems.append(f"{path}: Invalid value: {shown(key)}: keys must be strings")
        elif additional is not None:
            if not (plain_values and _is(item, additional["type"])):
                check(item, additional, f"{path}[{key_shown(key)}]", problems)
        elif key in properties:
            field = properties[key]
            kind = field.get("type")
            if not (kind in _SCALAR_TYPES and _is(item, kind)):
                check(item, field, f"{path}.{key}" if path else str(key), problems)


# -- the fast path: each schema compiled once into closures that only say whether a value passes,
# as nearly every value does; one that does not is checked again by check(), which words why.

Check = Callable[[Any], bool]
# Python types of values that pass a schema type outright (others ask _is).
_PASSING: dict[Any, frozenset[type]] = {
    "string": frozenset((str,)),
    "integer": frozenset((int,)),
    "number": frozenset((float,)),
    "boolean": frozenset((bool,)),
    "object": frozenset((dict,)),
    "array": frozenset((list,)),
    "int-or-string": frozenset((int, str)),
}


def _passes(schema: Schema) -> Check:
    """Each closure checks its value's type itself: one call per value."""
    expected = schema.get("type")
    if expected is None:
        return _anything
    if expected == "object":
        return _passes_object(schema)
    if expected == "array":
        return _passes_array(schema)
    passing = _PASSING.get(expected, frozenset())

    def type_passes(value: Any) -> bool:
        return type(value) in passing or _is(value, expected)

    return type_passes


def _anything(value: Any) -> bool:
    return True


def _plain(schema: Schema) -> type | None:
    """The one Python type whose values pass ``schema`` with nothing below (a scalar's), if any."""
    passing = _PASSING.get(schema.get("type"), frozenset())
    return next(iter(passing)) if len(passing) == 1 and schema.get("type") in _SCALAR_TYPES else None


def _passes_object(schema: Schema) -> Check:
    additional: Schema | None = schema.get("additionalProperties")
    if additional is not None:
        plain, each = _plain(additional), _passes(additional)

        def map_passes(value: Any) -> bool:
            if type(value) is not dict and not _is(value, "object"):
                return False
            for key, item in value.items():
                if item is not None and (
                    not isinstance(key, str) or (type(item) is not plain and not each(item))
                ):
                    return False
            return True

        return map_passes
    fields = {name: (_plain(field), _passes(field)) for name, field in schema.get("properties", {}).items()}

    def fields_pass(value: Any) -> bool:
        if type(value) is not dict and not _is(value, "object"):
            return False
        for key, item in value.items():
            field = fields.get(key)
            if field is not None and item is not None and type(item) is not field[0] and not field[1](item):
                return False
        return True

    return fields_pass


def _passes_array(schema: Schema) -> Check:
    items: Schema | None = schema.get("items")
    plain, each = (_plain(items), _passes(items)) if items is not None else (None, _anything)

    def items_pass(value: Any) -> bool:
        if type(value) is not list and not _is(value, "array"):
            return False
        if items is not None:
            for item in value:  # (a loop: all() of a generator costs a frame per list)
                if type(item) is not plain and (item is None or not each(item)):
                    return False
        return True

    return items_pass


def too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """The path where lists and maps nest deeper than ``limit``, or None (iterative: safe at any depth)."""
    bound = take_nesting_bound(value)  # (a manifest's parser may have bounded it already)
    if bound is not None and bound <= limit:
        return None
    if limit >= 0 and type(value) in _PLAIN_CONTAINERS and _shallow(value, limit):
        return None
    return _deep_path(value, limit)


_PLAIN_CONTAINERS = (dict, list)


def _shallow(value: Any, limit: int) -> bool:
    """Whether no container holding anything lies ``limit`` levels down, for plain dicts and lists
    of plain values (as parsed YAML or JSON is); False when unsure.  Runs on every admitted object:
    plain recursion (at most ``limit`` deep), twice as fast as comprehensions level by level and
    a sixth of the time of the walk that tracks paths."""
    if limit == 0:
        return not value
    for item in value.values() if type(value) is dict else value:
        kind = type(item)
        if kind is dict or kind is list:
            if item and not _shallow(item, limit - 1):
                return False
        elif kind not in _LEAVES:
            return False  # a Mapping or list of another type: the exact walk decides
    return True


def _deep_path(value: Any, limit: int) -> str | None:
    """:func:`too_deep`, tracking paths: only containers are stacked, and paths are kept as
    linked (parent, key, in a map) triples, joined only for the answer."""
    if not _is_container(value):
        return None if limit >= 0 else ""
    if limit < 0:
        return ""
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        item, depth, link = stack.pop()
        in_map = not isinstance(item, list)
        elements = enumerate(item) if not in_map else item.items()
        if depth == limit:
            last = collections.deque(elements, maxlen=1)
            if last:  # its elements are one level too deep: the last one is looked at first
                return _joined((link, last[0][0], in_map))
            continue
        stack.extend((v, depth + 1, (link, k, in_map)) for k, v in elements if _is_container(v))
    return None


def _is_container(value: Any) -> bool:
    kind = type(value)
    if kind in _LEAVES:
        return False
    return kind is dict or kind is list or isinstance(value, list | Mapping)


_LEAVES = frozenset((str, int, float, bool, type(None)))


def _joined(link: Any) -> str:
    parts: list[str] = []
    while link is not None:
        link, key, in_map = link
        parts.append(f".{key_shown(key)}" if in_map else f"[{key}]")
    return "".join(reversed(parts)).lstrip(".")


def object_problems(obj: Any, schema: Schema) -> list[str]:
    """Type problems of a whole object (metadata included) against its kind's schema."""
    if type(obj) is not dict and not isinstance(obj, Mapping):  # (a parsed object is a dict: no ABC check)
        return [must_be("<object>", obj, "object")]
    problems: list[str] = []
    root, passes = _root(schema)
    if not passes(obj):
        check(obj, root, "", problems)
    if problems:
        return capped(problems)
    deep = too_deep(obj)
    if deep is not None:
        # Fields cpx does not read are not type-checked, but comparing, copying or printing
        # such a value later would exhaust Python's recursion limit.
        problems.append(f'{deep}: Invalid value: "object": nested more than {MAX_DEPTH} levels deep')
    annotations = (obj.get("metadata") or {}).get("annotations")
    if annotations and _annotations_size(annotations) > MAX_ANNOTATIONS_BYTES:
        problems.append(f"metadata.annotations: Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes")
    return problems


def _annotations_size(annotations: Mapping[str, str]) -> int:
    return sum(
        len(k.encode(errors="replace")) + len(v.encode(errors="replace")) for k, v in annotations.items() if v
    )


# By id(schema), keeping the schema alive so that its id is not reused.
_roots: dict[int, tuple[Schema, Schema, Check]] = {}
_MAX_ROOTS = 256  # schemas built per call must not pile up


def _root(schema: Schema) -> tuple[Schema, Check]:
    """A kind's schema as a whole object's (metadata added), and its fast check."""
    entry = _roots.get(id(schema))
    if entry is None:
        if len(_roots) >= _MAX_ROOTS:
            _roots.clear()
        properties = {"metadata": OBJECT_META, **schema.get("properties", {})}
        root: Schema = {"type": "object", "properties": properties}
        entry = _roots[id(schema)] = (schema, root, _passes(root))
    return entry[1], entry[2]


def capped(problems: list[str], limit: int = MAX_PROBLEMS) -> list[str]:
    """At most ``limit`` problems, the last one saying how many more there were."""
    if len(problems) <= limit:
        return problems
    return [*problems[: limit - 1], f"... and {len(problems) - limit + 1} more problems"]


def metadata_problems(obj: Any) -> list[str]:
    """Type problems in ``metadata`` only (labels and annotations are maps of strings), for plugins."""
    return object_problems(obj, _NO_FIELDS)


_NO_FIELDS: Schema = {}
