"""The checks the API server makes on an ExtensionService with Contour's CRD installed (for
standalone mode): :data:`OPENAPI_SCHEMA` is the ``openAPIV3Schema`` of ``crd/extensionservice.yaml``
(Contour's own manifest, v1alpha1) without its descriptions and status (tests hold the two equal),
walked by the core's ``cpx.openapi_problems`` with the CRD's one CEL rule in Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpx import openapi_problems

Schema = dict[str, Any]

# Contour's duration pattern (apis/projectcontour/v1 TimeoutPolicy).
DURATION = (
    r"^(((\d*(\.\d*)?h)|(\d*(\.\d*)?m)|(\d*(\.\d*)?s)|(\d*(\.\d*)?ms)|(\d*(\.\d*)?us)|(\d*(\.\d*)?µs)"
    r"|(\d*(\.\d*)?ns))+|infinity|infinite)$"
)
SUBJECT_NAMES_RULE = "has(self.subjectNames) ? self.subjectNames[0] == self.subjectName : true"
SUBJECT_NAMES_MESSAGE = "subjectNames[0] must equal subjectName if set"


def _obj(properties: Schema, required: tuple[str, ...] = ()) -> Schema:
    out: Schema = {"properties": properties, "type": "object"}
    if required:
        out["required"] = list(required)
    return out


_INT32: Schema = {"format": "int32", "type": "integer"}
_STRING: Schema = {"type": "string"}
_BOOLEAN: Schema = {"type": "boolean"}
_DURATION: Schema = {"pattern": DURATION, "type": "string"}

SPEC_SCHEMA: Schema = _obj(
    {
        "circuitBreakerPolicy": _obj(
            {
                name: _INT32
                for name in (
                    "maxConnections",
                    "maxPendingRequests",
                    "maxRequests",
                    "maxRetries",
                    "perHostMaxConnections",
                )
            }
        ),
        "loadBalancerPolicy": _obj(
            {
                "requestHashPolicies": {
                    "items": _obj(
                        {
                            "hashSourceIP": _BOOLEAN,
                            "headerHashOptions": _obj(
                                {"headerName": {"minLength": 1, "type": "string"}}, ("headerName",)
                            ),
                            "queryParameterHashOptions": _obj(
                                {"parameterName": {"minLength": 1, "type": "string"}}, ("parameterName",)
                            ),
                            "terminal": _BOOLEAN,
                        }
                    ),
                    "type": "array",
                },
                "strategy": _STRING,
            }
        ),
        "protocol": {"enum": ["http/1.1", "h2", "h2c"], "type": "string"},
        "protocolVersion": {"enum": ["v3"], "type": "string"},
        "services": {
            "items": _obj(
                {
                    "name": _STRING,
                    "port": {"exclusiveMaximum": True, "maximum": 65536, "minimum": 1, "type": "integer"},
                    "weight": _INT32,
                },
                ("name", "port"),
            ),
            "minItems": 1,
            "type": "array",
        },
        "timeoutPolicy": _obj({"idle": _DURATION, "idleConnection": _DURATION, "response": _DURATION}),
        "validation": {
            **_obj(
                {
                    "caSecret": {"maxLength": 317, "minLength": 1, "type": "string"},
                    "subjectName": {"maxLength": 250, "minLength": 1, "type": "string"},
                    "subjectNames": {"items": _STRING, "maxItems": 8, "minItems": 1, "type": "array"},
                },
                ("caSecret", "subjectName"),
            ),
            "x-kubernetes-validations": [{"message": SUBJECT_NAMES_MESSAGE, "rule": SUBJECT_NAMES_RULE}],
        },
    },
    ("services",),
)

OPENAPI_SCHEMA: Schema = _obj(
    {"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"}, "spec": SPEC_SCHEMA}
)


def _subject_names_first(value: Mapping[str, Any]) -> bool:
    names = value.get("subjectNames")
    if not isinstance(names, list) or not names:
        return True  # absent, or minItems says so
    return bool(names[0] == value.get("subjectName"))


def validate(obj: Mapping[str, Any]) -> list[str]:
    """WatchSpec.validate: the problems the API server would refuse this ExtensionService for."""
    return openapi_problems(obj, OPENAPI_SCHEMA, cel_rules={SUBJECT_NAMES_RULE: _subject_names_first})
