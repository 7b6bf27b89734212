"""What the API server's structural schema checks, for a CRD's ``openAPIV3Schema`` given as data:
standalone mode has no API server, so a plugin's ``WatchSpec.validate`` runs this instead.

:func:`openapi_problems` walks the schema generically (types, required, enum, pattern, bounds,
lengths, item counts) and runs the CEL rules (``x-kubernetes-validations``) the plugin implements
in Python, keyed by the rule's text.  Problems read like the API server's::

    spec.virtualhost.fqdn: Required value
    spec.routes[0].services[0].port: Invalid value: 70000: spec.routes[0].services[0].port in body \
should be less than or equal to 65535

One difference, on purpose: an API server with a structural schema silently prunes fields the
schema does not know; standalone users are better served by being told (``spec.foo: unknown
field``), because a misspelt field would otherwise just do nothing.  ``null`` values count as absent
(the API server drops them), ``metadata`` is the API server's own business and ``status`` is ignored
as the status subresource makes it be on create.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import re2

from cpx.builtin.typecheck import capped, metadata_problems, shown

Schema = Mapping[str, Any]
# A CEL rule in Python: takes the object the rule is attached to (nulls removed), says whether it holds.
CelRule = Callable[[Mapping[str, Any]], bool]

# JSON type names, as the API server reports them.
_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),  # before int: a bool is an int in Python
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (Mapping, "object"),
)
# The same for values of exactly these types (all of a parsed manifest), in one lookup.
_EXACT_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
_EXACT_JSON_TYPES[dict] = "object"


def _json_type(value: Any) -> str:
    exact = _EXACT_JSON_TYPES.get(type(value))
    if exact is not None:
        return exact
    for python_type, name in _JSON_TYPES:
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def _is_type(value: Any, expected: str) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer" and actual == "number":
        return float(value).is_integer()  # 3.0 from a JSON decoder is still the integer 3
    return actual == expected


def _shown(value: Any) -> str:
    """A value as Go's field errors print it: strings quoted, numbers and booleans bare (bounded)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        return str(int(value))
    return shown(value)


_patterns: dict[str, Any] = {}
# Only whether a value matches is wanted: without capture groups, and given the UTF-8 bytes re2
# would encode the text to anyway, a search skips the wrapper's per-group offset decoding (4x faster).
_NO_CAPTURE = re2.Options()
_NO_CAPTURE.never_capture = True


def _matches(pattern: str, value: str) -> bool:
    # The API server searches (ECMA-262 semantics); CRD patterns anchor themselves with ^...$.
    return _pattern(pattern).search(value.encode()) is not None


def _pattern(pattern: str) -> Any:
    compiled = _patterns.get(pattern)
    if compiled is None:
        compiled = _patterns[pattern] = re2.compile(pattern, _NO_CAPTURE)
    return compiled


def _invalid(path: str, value: Any, detail: str) -> str:
    """A field.Invalid error whose detail is kube-openapi's "<path> in body <detail>"."""
    return f"{path}: Invalid value: {_shown(value)}: {path} in body {detail}"


def _wrong_type(path: str, actual: str, expected: str) -> str:
    return f'{path}: Invalid value: "{actual}": {path} in body must be of type {expected}: "{actual}"'


# -- the walk -----------------------------------------------------------------------------------


def _walk(value: Any, schema: Schema, path: str, problems: list[str], rules: Mapping[str, CelRule]) -> None:
    expected = schema.get("type")
    if expected is not None and not _is_type(value, expected):
        actual = _json_type(value)
        problems.append(
            f'{path}: Invalid value: "{actual}": {path} in body must be of type {expected}: "{actual}"'
        )
        return
    if expected == "object":
        _object(value, schema, path, problems, rules)
    elif expected == "array":
        _array(value, schema, path, problems, rules)
    else:
        _scalar(value, schema, path, problems)


# What _scalar checks beyond the type.
_SCALAR_RULES = frozenset(("enum", "minLength", "maxLength", "pattern", "minimum", "maximum"))
_SCALAR_TYPES = frozenset(("string", "integer", "number", "boolean"))
_plain_types: dict[int, str | None] = {}  # by id: the schemas are the CRD's, kept for the process


def _plain_type(schema: Schema) -> str | None:
    """The type of a scalar schema with no rule beyond its type, else None: a value of exactly that
    type needs no walk (nor a path built for it), as nearly every field of every HTTPProxy."""
    key = id(schema)
    if key not in _plain_types:
        kind = schema.get("type")
        plain = kind in _SCALAR_TYPES and not _SCALAR_RULES.intersection(schema)
        _plain_types[key] = kind if plain else None
    return _plain_types[key]


def _object(
    value: Mapping[str, Any], schema: Schema, path: str, problems: list[str], rules: Mapping[str, CelRule]
) -> None:
    present = {k: v for k, v in value.items() if v is not None}
    for name in schema.get("required", ()):
        if name not in present:
            problems.append(f"{path}.{name}: Required value")
    properties: Mapping[str, Schema] = schema.get("properties", {})
    additional: Schema | None = schema.get("additionalProperties")
    for key, item in present.items():
        if additional is not None:
            if _plain_type(additional) != _EXACT_JSON_TYPES.get(type(item), ""):
                _walk(item, additional, f"{path}[{key}]", problems, rules)
        elif key in properties:
            field = properties[key]
            if _plain_type(field) != _EXACT_JSON_TYPES.get(type(item), ""):
                _walk(item, field, f"{path}.{key}", problems, rules)
        else:
            problems.append(f"{path}.{key}: unknown field")
    for rule in schema.get("x-kubernetes-validations", ()):
        check = rules.get(rule["rule"])
        if check is not None and not check(present):
            problems.append(f'{path}: Invalid value: "object": {rule["message"]}')


def _array(
    value: list[Any], schema: Schema, path: str, problems: list[str], rules: Mapping[str, CelRule]
) -> None:
    min_items, max_items = schema.get("minItems"), schema.get("maxItems")
    if min_items is not None and len(value) < min_items:
        problems.append(_invalid(path, len(value), f"should have at least {min_items} items"))
    if max_items is not None and len(value) > max_items:
        problems.append(f"{path}: Too many: {len(value)}: must have at most {max_items} items")
    items: Schema | None = schema.get("items")
    if items is None:
        return
    for i, item in enumerate(value):
        if item is None:
            # A null list item is not pruned; it is a type error for a non-nullable schema.
            problems.append(_wrong_type(f"{path}[{i}]", "null", items.get("type", "object")))
            continue
        _walk(item, items, f"{path}[{i}]", problems, rules)


def _scalar(value: Any, schema: Schema, path: str, problems: list[str]) -> None:
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(f'"{v}"' for v in enum)
        problems.append(f"{path}: Unsupported value: {_shown(value)}: supported values: {supported}")
        return
    if isinstance(value, str):
        min_length, max_length = schema.get("minLength"), schema.get("maxLength")
        if min_length is not None and len(value) < min_length:
            problems.append(_invalid(path, value, f"should be at least {min_length} chars long"))
        if max_length is not None and len(value) > max_length:
            problems.append(f"{path}: Too long: may not be more than {max_length} bytes")
        pattern = schema.get("pattern")
        if pattern is not None and not _matches(pattern, value):
            problems.append(_invalid(path, value, f"should match '{pattern}'"))
    elif not isinstance(value, bool):
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if minimum is not None and value < minimum:
            problems.append(_invalid(path, value, f"should be greater than or equal to {minimum}"))
        if maximum is not None and schema.get("exclusiveMaximum") is True and value >= maximum:
            problems.append(_invalid(path, value, f"should be less than {maximum}"))
        elif maximum is not None and value > maximum:
            problems.append(_invalid(path, value, f"should be less than or equal to {maximum}"))


# -- the fast path ------------------------------------------------------------------------------
# Nearly every object is valid, so each schema is compiled once into small closures that only say
# whether a value passes (no paths, no messages, no schema lookups); a value that does not pass is
# walked again by the code above, which words the problems.  Each closure answers False whenever
# the walk above would report a problem (or when unsure: the walk decides).

Check = Callable[[Any], bool]
# Python types of values that pass a schema type outright (other values ask _is_type).
_PASSING: dict[Any, frozenset[type]] = {
    "string": frozenset((str,)),
    "integer": frozenset((int,)),
    "number": frozenset((int, float)),
    "boolean": frozenset((bool,)),
    "array": frozenset((list,)),
    "object": frozenset((dict,)),
}
_SCALARS = frozenset((str, int, float, bool))
_NO_RULES: Mapping[str, CelRule] = {}
# By (id(schema), id(rules)), keeping both alive so that their ids are not reused.
_compiled: dict[tuple[int, int], tuple[Schema, Mapping[str, CelRule], Check]] = {}
_MAX_COMPILED = 1024  # schemas built per call (a few callers do) must not pile up


def _checker(schema: Schema, rules: Mapping[str, CelRule]) -> Check:
    key = (id(schema), id(rules))
    entry = _compiled.get(key)
    if entry is None:
        if len(_compiled) >= _MAX_COMPILED:
            _compiled.clear()
        entry = _compiled[key] = (schema, rules, _compile(schema, rules))
    return entry[2]


def _compile(schema: Schema, rules: Mapping[str, CelRule]) -> Check:
    """Each closure checks its value's type itself: one call per value."""
    expected = schema.get("type")
    if expected == "object":
        return _compile_object(schema, rules)
    if expected == "array":
        return _compile_array(schema, rules)
    scalar = _compile_scalar(schema)
    if expected is None:

        def untyped(value: Any) -> bool:  # _scalar's comparisons suit scalars only
            return scalar is None or (type(value) in _SCALARS and scalar(value))

        return untyped
    passing = _PASSING.get(expected, frozenset())

    def typed(value: Any) -> bool:
        if type(value) not in passing and not _is_type(value, expected):
            return False
        return scalar is None or scalar(value)

    return typed


def _field(schema: Schema, rules: Mapping[str, CelRule]) -> tuple[type | None, Check]:
    """A field's check, with the Python type whose values need none (as in _object's shortcut)."""
    plain = _plain_type(schema)
    return _PYTHON_TYPES.get(plain), _compile(schema, rules)


_PYTHON_TYPES: dict[str | None, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


def _compile_object(schema: Schema, rules: Mapping[str, CelRule]) -> Check:
    required = tuple(schema.get("required", ()))
    implemented = (rules.get(rule["rule"]) for rule in schema.get("x-kubernetes-validations", ()))
    cel = tuple(rule for rule in implemented if rule is not None)
    additional: Schema | None = schema.get("additionalProperties")
    fields = {name: _field(field, rules) for name, field in schema.get("properties", {}).items()}
    each = _field(additional, rules) if additional is not None else None

    def check(value: Mapping[str, Any]) -> bool:
        if type(value) is not dict and not _is_type(value, "object"):
            return False
        for key, item in value.items():
            if item is None:
                continue
            plain, field = each or fields.get(key) or (None, None)
            if type(item) is not plain and (field is None or not field(item)):
                return False
        for name in required:
            if value.get(name) is None:
                return False
        if cel:
            present = {k: v for k, v in value.items() if v is not None}
            return all(rule(present) for rule in cel)
        return True

    return check


def _compile_array(schema: Schema, rules: Mapping[str, CelRule]) -> Check:
    min_items, max_items = schema.get("minItems"), schema.get("maxItems")
    items: Schema | None = schema.get("items")
    plain, each = _field(items, rules) if items is not None else (None, None)

    def check(value: list[Any]) -> bool:
        if type(value) is not list and not _is_type(value, "array"):
            return False
        if (min_items is not None and len(value) < min_items) or (
            max_items is not None and len(value) > max_items
        ):
            return False
        if each is not None:
            for item in value:
                if type(item) is not plain and (item is None or not each(item)):
                    return False
        return True

    return check


def _compile_scalar(schema: Schema) -> Check | None:
    if not _SCALAR_RULES.intersection(schema):
        return None
    enum = schema.get("enum")
    min_length, max_length = schema.get("minLength"), schema.get("maxLength")
    pattern: str | None = schema.get("pattern")
    search = _pattern(pattern).search if pattern is not None else None  # as _matches does
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    exclusive = schema.get("exclusiveMaximum") is True

    def check(value: Any) -> bool:
        if enum is not None and value not in enum:
            return False
        if isinstance(value, str):
            return not (
                (min_length is not None and len(value) < min_length)
                or (max_length is not None and len(value) > max_length)
                or (search is not None and search(value.encode()) is None)
            )
        if isinstance(value, bool):
            return True
        if minimum is not None and value < minimum:
            return False
        return maximum is None or (value < maximum if exclusive else value <= maximum)

    return check


def openapi_problems(
    obj: Mapping[str, Any], root: Schema, *, cel_rules: Mapping[str, CelRule] | None = None
) -> list[str]:
    """The problems the API server would refuse ``obj`` for, given its CRD version's
    ``openAPIV3Schema`` (``root``) and the CEL rules implemented in Python (by rule text; a rule
    without an implementation is not checked)."""
    anything: Any = obj  # a YAML document may be anything at all
    if not isinstance(anything, Mapping):
        return [_wrong_type("<object>", _json_type(anything), "object")]
    problems: list[str] = []
    rules = cel_rules or _NO_RULES
    present = {k: v for k, v in obj.items() if v is not None}
    for name in root.get("required", ()):
        if name not in present:
            problems.append(f"{name}: Required value")
    for key, value in present.items():
        if key in ("metadata", "status"):
            continue
        if key not in root["properties"]:
            problems.append(f"{key}: unknown field")
            continue
        field = root["properties"][key]
        if not _checker(field, rules)(value):
            _walk(value, field, key, problems, rules)
    meta = present.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        problems.append(_wrong_type("metadata", _json_type(meta), "object"))
    elif isinstance(meta, Mapping):
        problems += metadata_problems(obj)  # labels and annotations: maps of strings
        if not meta.get("name"):
            problems.append("metadata.name: Required value: name or generateName is required")
    return capped(problems)
