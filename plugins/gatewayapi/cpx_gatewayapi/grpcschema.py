"""What the API server's schema (CRD OpenAPI and CEL rules) refuses for GRPCRoutes.

The parts GRPCRoute shares with HTTPRoute (parentRefs, hostnames, header matches, header
modifier and mirror filters, backendRefs) are checked by :mod:`cpx_gatewayapi.routeschema`; this
module adds the method match (type, service and method names) and GRPCRoute's filter types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cpx import capped, metadata_problems, must_be, shown

from cpx_gatewayapi import routeschema as rs

METHOD_TYPES = ("Exact", "RegularExpression")
FILTER_TYPES = ("ResponseHeaderModifier", "RequestHeaderModifier", "RequestMirror", "ExtensionRef")
_UNIQUE_FILTERS = ("RequestHeaderModifier", "ResponseHeaderModifier")
_SERVICE = re.compile(r"^\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$", re.IGNORECASE)
_METHOD = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
_MAX_NAME = 1024
_SHOWN = {  # the patterns as the CEL messages quote them
    "service": r"^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$",
    "method": r"^[A-Za-z_][A-Za-z_0-9]*$",
}


def validate_grpcroute(obj: Mapping[str, Any]) -> list[str]:
    problems = metadata_problems(obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        problems.append("spec: Required value" if spec is None else must_be("spec", spec, "object"))
        return capped(problems)
    for i, ref in enumerate(rs.entries(spec, "parentRefs", "spec", rs.MAX_PARENTS, problems)):
        rs.parent_ref_problems(ref, f"spec.parentRefs[{i}]", problems)
    for i, hostname in enumerate(rs.entries(spec, "hostnames", "spec", rs.MAX_HOSTNAMES, problems, "string")):
        rs.hostname_problem(hostname, f"spec.hostnames[{i}]", problems)
    for i, rule in enumerate(rs.entries(spec, "rules", "spec", rs.MAX_RULES, problems)):
        _rule(rule, f"spec.rules[{i}]", problems)
    return capped(problems)


def _rule(rule: Mapping[str, Any], path: str, problems: rs.Problems) -> None:
    for i, entry in enumerate(rs.entries(rule, "matches", path, rs.MAX_ITEMS, problems)):
        _match(entry, f"{path}.matches[{i}]", problems)
    _filters(rule, path, problems)
    for i, ref in enumerate(rs.entries(rule, "backendRefs", path, rs.MAX_ITEMS, problems)):
        where = f"{path}.backendRefs[{i}]"
        rs.backend_ref_problems({k: v for k, v in ref.items() if k != "filters"}, where, problems)
        _filters(ref, where, problems)


def _match(entry: Mapping[str, Any], path: str, problems: rs.Problems) -> None:
    for i, item in enumerate(rs.entries(entry, "headers", path, rs.MAX_ITEMS, problems)):
        where = f"{path}.headers[{i}]"
        rs._string(item, "name", where, problems, required=True)
        rs._string(item, "value", where, problems, required=True)
        rs._enum(item, "type", where, rs.VALUE_TYPES, problems)
    method = entry.get("method")
    if method is None:
        return
    where = f"{path}.method"
    if not isinstance(method, Mapping):
        problems.append(must_be(where, method, "object"))
        return
    kind = rs._enum(method, "type", where, METHOD_TYPES, problems) or "Exact"
    service = rs._string(method, "service", where, problems)
    name = rs._string(method, "method", where, problems)
    if service is None and name is None:
        problems.append(rs._cel(where, "One or both of 'service' or 'method' must be specified"))
    for field, value, pattern in (("service", service, _SERVICE), ("method", name, _METHOD)):
        if value is None:
            continue
        if len(value) > _MAX_NAME:
            problems.append(f"{where}.{field}: Too long: may not be more than {_MAX_NAME} bytes")
        elif kind == "Exact" and not pattern.match(value):
            problems.append(
                rs._cel(where, f"{field} must only contain valid characters (matching {_SHOWN[field]})")
            )


def _filters(owner: Mapping[str, Any], path: str, problems: rs.Problems) -> None:
    filters = rs.entries(owner, "filters", path, rs.MAX_ITEMS, problems)
    kinds = [f.get("type") for f in filters]
    for kind in _UNIQUE_FILTERS:
        if kinds.count(kind) > 1:
            problems.append(rs._cel(f"{path}.filters", f"{kind} filter cannot be repeated"))
    for i, entry in enumerate(filters):
        where = f"{path}.filters[{i}]"
        kind = entry.get("type")
        if kind is not None and kind not in FILTER_TYPES:
            supported = ", ".join(f'"{t}"' for t in FILTER_TYPES)
            problems.append(f"{where}.type: Unsupported value: {shown(kind)}: supported values: {supported}")
            continue
        rs._filter(entry, where, problems)
