"""GRPCRoute ``matches[]`` entries as DAG match conditions.

A gRPC call is an HTTP/2 POST to ``/<service>/<method>``, so a method match is a path match:
Exact with service and method is an exact path, service alone a ``/<service>/`` prefix, method
alone a regex over any service; RegularExpression puts the two patterns (RE2, Envoy's engine) in
place of the names.  Header matches are HTTPRoute's (case-insensitive names, first one wins).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
from cpx.dag import PathKind, PathMatch

from cpx_gatewayapi import routematch
from cpx_gatewayapi.filters import FilterProblem
from cpx_gatewayapi.routematch import Match

_ANY_NAME = "[^/]+"


def matches(rule: Mapping[str, Any]) -> list[Match]:
    """The rule's matches (every call when it has none); FilterProblem when one cannot be served."""
    entries = [m for m in rule.get("matches") or () if isinstance(m, Mapping)]
    return [match(m) for m in entries] or [routematch.DEFAULT_MATCH]


def match(entry: Mapping[str, Any]) -> Match:
    headers_only = routematch.match({"headers": entry.get("headers") or ()})
    return attrs.evolve(headers_only, path=method_path(entry.get("method")))


def method_path(spec: object) -> PathMatch:
    if not isinstance(spec, Mapping):
        return routematch.ROOT
    service, method = spec.get("service") or None, spec.get("method") or None
    kind = spec.get("type") or "Exact"
    if kind == "RegularExpression":
        pattern = f"/{service or _ANY_NAME}/{method or _ANY_NAME}"
        # Through the HTTPRoute matcher: RE2 checks it, a bad pattern is the rule's UnsupportedValue.
        return routematch.match({"path": {"type": "RegularExpression", "value": pattern}}).path
    if kind != "Exact":
        raise FilterProblem(f"method match type {kind!r} is not supported")
    if service and method:
        return PathMatch(kind=PathKind.EXACT, value=f"/{service}/{method}")
    if service:
        return PathMatch(kind=PathKind.PREFIX, value=f"/{service}/")
    if method:
        return PathMatch(kind=PathKind.REGEX, value=f"/{_ANY_NAME}/{re.escape(str(method))}")
    raise FilterProblem("a method match needs a service or a method")
