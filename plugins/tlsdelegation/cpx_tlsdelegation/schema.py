"""The checks the API server makes on a TLSCertificateDelegation (for standalone mode), in its
wording, walking :data:`cpx_tlsdelegation.crd.OPENAPI_SCHEMA`.  As for cpx's other kinds, a field
the schema does not know is reported (``spec.foo: unknown field``) rather than silently dropped;
``null`` counts as absent; ``metadata`` is checked as the core checks every kind's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpx import capped, json_type, metadata_problems, must_be

from cpx_tlsdelegation.crd import OPENAPI_SCHEMA

Schema = Mapping[str, Any]


def validate(obj: Mapping[str, Any]) -> list[str]:
    problems = metadata_problems(obj)
    for name in OPENAPI_SCHEMA["required"]:
        if obj.get(name) is None:
            problems.append(f"{name}: Required value")
    spec = obj.get("spec")
    if spec is not None:
        _check(spec, OPENAPI_SCHEMA["properties"]["spec"], "spec", problems)
    for key in obj:
        if key not in OPENAPI_SCHEMA["properties"]:
            problems.append(f"{key}: unknown field")
    return capped(problems)


def _check(value: Any, schema: Schema, path: str, problems: list[str]) -> None:
    expected = schema["type"]
    if json_type(value) != expected:
        problems.append(must_be(path, value, expected))
    elif expected == "array":
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]", problems)
    elif expected == "object":
        _check_fields(value, schema, path, problems)


def _check_fields(value: Mapping[str, Any], schema: Schema, path: str, problems: list[str]) -> None:
    properties: Mapping[str, Schema] = schema["properties"]
    for name in schema.get("required", ()):
        if value.get(name) is None:
            problems.append(f"{path}.{name}: Required value")
    for key, item in value.items():
        field = properties.get(key) if isinstance(key, str) else None
        if field is None:
            problems.append(f"{path}.{key}: unknown field")
        elif item is not None:
            _check(item, field, f"{path}.{key}", problems)
