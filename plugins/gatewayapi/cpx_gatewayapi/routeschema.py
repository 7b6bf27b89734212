"""What the API server's schema (CRD OpenAPI and CEL rules) refuses for HTTPRoutes.

The rules that matter to what cpx builds, in the API server's wording: types, required fields,
enums, item counts, port and weight ranges, path values, and the CEL rules across fields (one
filter of a kind, redirect without backendRefs, ReplacePrefixMatch with one PathPrefix match,
backendRequest not longer than request).  Regexes are not the schema's business: a bad one gets
the route a status (:mod:`cpx_gatewayapi.routematch`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from cpx import capped, json_type, metadata_problems, must_be, shown

from cpx_gatewayapi.durations import duration

MAX_PARENTS, MAX_HOSTNAMES, MAX_RULES, MAX_MATCHES, MAX_ITEMS = 32, 16, 16, 64, 16
MAX_TOTAL_MATCHES = 128
PATH_TYPES = ("Exact", "PathPrefix", "RegularExpression")
VALUE_TYPES = ("Exact", "RegularExpression")
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
FILTER_TYPES = (
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestMirror",
    "RequestRedirect",
    "URLRewrite",
    "ExtensionRef",
    "CORS",
    "ExternalAuth",
)
_FILTER_FIELDS = {t: t[0].lower() + t[1:] for t in FILTER_TYPES} | {
    "URLRewrite": "urlRewrite",
    "CORS": "cors",
}
_UNIQUE_FILTERS = ("CORS", "RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect", "URLRewrite")
MODIFIER_TYPES = ("ReplaceFullPath", "ReplacePrefixMatch")
STATUS_CODES = (301, 302, 303, 307, 308)
_PATH_CHARS = re.compile(r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$")
HOSTNAME_PATTERN = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH_RULES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda v: v.startswith("/"), "value must be an absolute path and start with '/'"),
    (lambda v: "//" not in v, "must not contain '//'"),
    (lambda v: "/./" not in v, "must not contain '/./'"),
    (lambda v: "/../" not in v, "must not contain '/../'"),
    (lambda v: "%2f" not in v.lower(), "must not contain '%2f'"),
    (lambda v: "#" not in v, "must not contain '#'"),
    (lambda v: not v.endswith(("/..", "/.")), "must not end with '/..' or '/.'"),
    (lambda v: bool(_PATH_CHARS.match(v)), "must only contain valid characters"),
)

Problems = list[str]


def validate_httproute(obj: Mapping[str, Any]) -> list[str]:
    problems = metadata_problems(obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        problems.append("spec: Required value" if spec is None else must_be("spec", spec, "object"))
        return capped(problems)
    for i, ref in enumerate(entries(spec, "parentRefs", "spec", MAX_PARENTS, problems)):
        parent_ref_problems(ref, f"spec.parentRefs[{i}]", problems)
    for i, hostname in enumerate(entries(spec, "hostnames", "spec", MAX_HOSTNAMES, problems, "string")):
        hostname_problem(hostname, f"spec.hostnames[{i}]", problems)
    rules = entries(spec, "rules", "spec", MAX_RULES, problems)
    total = sum(len(r.get("matches") or ()) for r in rules if isinstance(r.get("matches"), list))
    if total > MAX_TOTAL_MATCHES:
        problems.append(
            'spec.rules: Invalid value: "array": While 16 rules and 64 matches per rule are allowed, '
            "the total number of matches across all rules in a route must be less than 128"
        )
    for i, rule in enumerate(rules):
        _rule(rule, f"spec.rules[{i}]", problems)
    return capped(problems)


def hostname_problem(hostname: str, path: str, problems: Problems) -> None:
    if not HOSTNAME_PATTERN.match(hostname) or len(hostname) > 253:
        problems.append(f"{path}: Invalid value: {shown(hostname)}: must be a valid hostname")


def entries(
    parent: Mapping[str, Any], field: str, path: str, limit: int, problems: Problems, item: str = "object"
) -> list[Any]:
    """The list ``parent[field]``'s items of the right type, reporting the rest."""
    value = parent.get(field)
    where = f"{path}.{field}"
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(must_be(where, value, "array"))
        return []
    if len(value) > limit:
        problems.append(f"{where}: Too many: {len(value)}: must have at most {limit} items")
    good = []
    for i, entry in enumerate(value):
        if json_type(entry) != item:
            problems.append(must_be(f"{where}[{i}]", entry, item))
        else:
            good.append(entry)
    return good


def _string(
    obj: Mapping[str, Any], field: str, path: str, problems: Problems, required: bool = False
) -> str | None:
    value = obj.get(field)
    if value is None:
        if required:
            problems.append(f"{path}.{field}: Required value")
        return None
    if not isinstance(value, str):
        problems.append(must_be(f"{path}.{field}", value, "string"))
        return None
    return value


def _enum(obj: Mapping[str, Any], field: str, path: str, allowed: tuple[Any, ...], problems: Problems) -> Any:
    value = obj.get(field)
    if value is not None and value not in allowed:
        supported = ", ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in allowed)
        problems.append(f"{path}.{field}: Unsupported value: {shown(value)}: supported values: {supported}")
        return None
    return value


def _integer(obj: Mapping[str, Any], field: str, path: str, low: int, high: int, problems: Problems) -> None:
    value = obj.get(field)
    if value is None:
        return
    where = f"{path}.{field}"
    if json_type(value) != "integer":
        problems.append(must_be(where, value, "integer"))
    elif value < low:
        problems.append(
            f"{where}: Invalid value: {value}: {where} in body should be greater than or equal to {low}"
        )
    elif value > high:
        problems.append(
            f"{where}: Invalid value: {value}: {where} in body should be less than or equal to {high}"
        )


def _cel(path: str, message: str) -> str:
    return f'{path}: Invalid value: "object": {message}'


def parent_ref_problems(ref: Mapping[str, Any], path: str, problems: Problems) -> None:
    _string(ref, "name", path, problems, required=True)
    for field in ("group", "kind", "namespace", "sectionName"):
        _string(ref, field, path, problems)
    _integer(ref, "port", path, 1, 65535, problems)


def _rule(rule: Mapping[str, Any], path: str, problems: Problems) -> None:
    matches = entries(rule, "matches", path, MAX_MATCHES, problems)
    for i, entry in enumerate(matches):
        _match(entry, f"{path}.matches[{i}]", problems)
    filters = _filters(rule, path, problems)
    backends = entries(rule, "backendRefs", path, MAX_ITEMS, problems)
    for i, ref in enumerate(backends):
        backend_ref_problems(ref, f"{path}.backendRefs[{i}]", problems)
    if backends and any("requestRedirect" in f for f in filters):
        problems.append(_cel(path, "RequestRedirect filter must not be used together with backendRefs"))
    for kind, field in (("RequestRedirect", "requestRedirect"), ("URLRewrite", "urlRewrite")):
        modifier = [
            f for f in filters if ((f.get(field) or {}).get("path") or {}).get("type") == "ReplacePrefixMatch"
        ]
        single_prefix = (
            len(matches) == 1 and (matches[0].get("path") or {}).get("type", "PathPrefix") == "PathPrefix"
        )
        if modifier and not single_prefix:
            problems.append(
                _cel(
                    path,
                    f"When using {kind} filter with path.replacePrefixMatch, "
                    "exactly one PathPrefix match must be specified",
                )
            )
    timeouts = rule.get("timeouts")
    if isinstance(timeouts, Mapping):
        _timeouts(timeouts, f"{path}.timeouts", problems)


def _match(entry: Mapping[str, Any], path: str, problems: Problems) -> None:
    spec = entry.get("path")
    if isinstance(spec, Mapping):
        kind = _enum(spec, "type", f"{path}.path", PATH_TYPES, problems) or "PathPrefix"
        value = _string(spec, "value", f"{path}.path", problems)
        if value is not None and kind != "RegularExpression":
            problems += [
                _cel(f"{path}.path", f"{msg} when type one of ['Exact', 'PathPrefix']")
                for check, msg in _PATH_RULES
                if not check(value)
            ][:1]
    for field in ("headers", "queryParams"):
        for i, item in enumerate(entries(entry, field, path, MAX_ITEMS, problems)):
            where = f"{path}.{field}[{i}]"
            _string(item, "name", where, problems, required=True)
            _string(item, "value", where, problems, required=True)
            _enum(item, "type", where, VALUE_TYPES, problems)
    _enum(entry, "method", path, METHODS, problems)


def _filters(rule: Mapping[str, Any], path: str, problems: Problems) -> list[Mapping[str, Any]]:
    filters = entries(rule, "filters", path, MAX_ITEMS, problems)
    kinds = [f.get("type") for f in filters]
    if "RequestRedirect" in kinds and "URLRewrite" in kinds:
        problems.append(
            _cel(
                f"{path}.filters",
                "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, "
                "but not both",
            )
        )
    for kind in _UNIQUE_FILTERS:
        if kinds.count(kind) > 1:
            problems.append(_cel(f"{path}.filters", f"{kind} filter cannot be repeated"))
    for i, entry in enumerate(filters):
        _filter(entry, f"{path}.filters[{i}]", problems)
    return filters


def _filter(entry: Mapping[str, Any], path: str, problems: Problems) -> None:
    if entry.get("type") is None:
        problems.append(f"{path}.type: Required value")
        return
    kind = _enum(entry, "type", path, FILTER_TYPES, problems)
    for other, field in _FILTER_FIELDS.items():
        if field in entry and other != kind and kind is not None:
            problems.append(_cel(path, f"filter.{field} must be nil if the filter.type is not {other}"))
    if kind is not None and entry.get(_FILTER_FIELDS[kind]) is None:
        problems.append(_cel(path, f"filter.{_FILTER_FIELDS[kind]} must be specified for {kind} filter.type"))
    redirect = entry.get("requestRedirect")
    if isinstance(redirect, Mapping):
        where = f"{path}.requestRedirect"
        _enum(redirect, "scheme", where, ("http", "https"), problems)
        _enum(redirect, "statusCode", where, STATUS_CODES, problems)
        _integer(redirect, "port", where, 1, 65535, problems)
        _modifier(redirect.get("path"), f"{where}.path", problems)
    rewrite = entry.get("urlRewrite")
    if isinstance(rewrite, Mapping):
        _modifier(rewrite.get("path"), f"{path}.urlRewrite.path", problems)
    mirror = entry.get("requestMirror")
    if isinstance(mirror, Mapping):
        if "percent" in mirror and "fraction" in mirror:
            problems.append(
                _cel(
                    f"{path}.requestMirror",
                    "Only one of percent or fraction may be specified in HTTPRequestMirrorFilter",
                )
            )
        _integer(mirror, "percent", f"{path}.requestMirror", 0, 100, problems)
        ref = mirror.get("backendRef")
        if not isinstance(ref, Mapping):
            problems.append(f"{path}.requestMirror.backendRef: Required value")
        else:
            backend_ref_problems(ref, f"{path}.requestMirror.backendRef", problems)


def _modifier(spec: object, path: str, problems: Problems) -> None:
    if not isinstance(spec, Mapping):
        return
    kind = _enum(spec, "type", path, MODIFIER_TYPES, problems)
    for other in MODIFIER_TYPES:
        field = other[0].lower() + other[1:]
        if kind == other and field not in spec:
            problems.append(_cel(path, f"{field} must be specified when type is set to '{other}'"))
        if field in spec and kind != other:
            problems.append(_cel(path, f"type must be '{other}' when {field} is set"))


def backend_ref_problems(ref: Mapping[str, Any], path: str, problems: Problems) -> None:
    _string(ref, "name", path, problems, required=True)
    _integer(ref, "port", path, 1, 65535, problems)
    _integer(ref, "weight", path, 0, 1_000_000, problems)
    if (ref.get("group") or "") == "" and (ref.get("kind") or "Service") == "Service" and "port" not in ref:
        problems.append(_cel(path, "Must have port for Service reference"))
    for i, entry in enumerate(entries(ref, "filters", path, MAX_ITEMS, problems)):
        _filter(entry, f"{path}.filters[{i}]", problems)


def _timeouts(timeouts: Mapping[str, Any], path: str, problems: Problems) -> None:
    parsed = {}
    for field in ("request", "backendRequest"):
        value = timeouts.get(field)
        if value is None:
            continue
        parsed[field] = duration(value)
        if parsed[field] is None:
            problems.append(
                f"{path}.{field}: Invalid value: {shown(value)}: {path}.{field} in body should match "
                "'^([0-9]{1,5}(h|m|s|ms)){1,4}$'"
            )
    request, backend = parsed.get("request"), parsed.get("backendRequest")
    limit = request.seconds if request is not None else None
    if limit is not None and backend is not None and backend.seconds is not None and backend.seconds > limit:
        problems.append(_cel(path, "backendRequest timeout cannot be longer than request timeout"))
