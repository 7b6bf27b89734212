"""The checks the API server makes on an HTTPProxy with cpx's CRD installed (for standalone mode).

:func:`validate` walks :data:`cpx_httpproxy.crd.OPENAPI_SCHEMA` with the core's generic walk
(``cpx.openapi_problems``: the API server's wording, and unknown fields reported rather than
pruned) and runs the CRD's CEL rules, re-implemented in Python below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cpx import openapi_problems

from cpx_httpproxy import crd

# -- the CEL rules of crd.py, in Python --------------------------------------------------------
# Each takes the object the rule is attached to (a mapping, nulls removed) and says whether it holds.


def _http_settings_only_for_http(value: Mapping[str, Any]) -> bool:
    # serviceType defaults to grpc before CEL runs.
    return "httpSettings" not in value or value.get("serviceType", "grpc") == "http"


def _exactly_one_jwks(value: Mapping[str, Any]) -> bool:
    return ("remoteJWKS" in value) != ("localJWKS" in value)


def _subject_names_first(value: Mapping[str, Any]) -> bool:
    names = value.get("subjectNames")
    if not isinstance(names, list) or not names:
        return True  # absent, or minItems reports it
    return bool(names[0] == value.get("subjectName"))


def _mirror_weight(value: Mapping[str, Any]) -> bool:
    weight = value.get("weight")
    if value.get("mirror") is not True or not isinstance(weight, int | float) or isinstance(weight, bool):
        return True
    return weight <= 100


CEL_RULES: Mapping[str, Callable[[Mapping[str, Any]], bool]] = {
    crd.RULE_HTTP_SETTINGS[0]: _http_settings_only_for_http,
    crd.RULE_ONE_JWKS[0]: _exactly_one_jwks,
    crd.RULE_SUBJECT_NAMES[0]: _subject_names_first,
    crd.RULE_MIRROR_WEIGHT[0]: _mirror_weight,
}


def validate_global_rate_limit_policy(value: Any, path: str) -> list[str]:
    """What the API server would refuse in a ``rateLimitPolicy.global`` given elsewhere (the rate
    limit service's default policy)."""
    return openapi_problems({path: value}, {"properties": {path: crd.GLOBAL_RATE_LIMIT}})


def validate_http_settings(value: Any, path: str) -> list[str]:
    """What the API server would refuse in an ``authorization.httpSettings`` given elsewhere
    (the global authorization server's)."""
    return openapi_problems(
        {path: value}, {"properties": {path: crd.AUTHORIZATION["properties"]["httpSettings"]}}
    )


def validate(obj: Mapping[str, Any]) -> list[str]:
    """WatchSpec.validate: the problems the API server would refuse this HTTPProxy for."""
    return openapi_problems(obj, crd.OPENAPI_SCHEMA, cel_rules=CEL_RULES)
