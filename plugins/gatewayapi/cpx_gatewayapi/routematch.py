"""HTTPRoute ``matches[]`` entries as DAG match conditions.

PathPrefix is segment-aware (``/v2`` matches ``/v2`` and ``/v2/x``, never ``/v2example``); header
names are case-insensitive and, like query parameter names, only their first entry counts; a method
is a ``:method`` header.  Regexes are RE2 (Envoy's engine): one RE2 refuses is an UnsupportedValue
for its rule, never something Envoy sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import re2
from cpx.dag import HeaderMatch, HeaderMatchKind, PathKind, PathMatch, QueryMatch, QueryMatchKind

from cpx_gatewayapi.filters import FilterProblem

METHOD_HEADER = ":method"
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a user's bad regex goes to status, not to stderr
_PATH_KINDS = {
    "Exact": PathKind.EXACT,
    "PathPrefix": PathKind.SEGMENT_PREFIX,
    "RegularExpression": PathKind.REGEX,
}
_HEADER_KINDS = {"Exact": HeaderMatchKind.EXACT, "RegularExpression": HeaderMatchKind.REGEX}
_QUERY_KINDS = {"Exact": QueryMatchKind.EXACT, "RegularExpression": QueryMatchKind.REGEX}
ROOT = PathMatch(kind=PathKind.PREFIX, value="/")


@attrs.frozen(kw_only=True)
class Match:
    path: PathMatch
    headers: tuple[HeaderMatch, ...]
    query: tuple[QueryMatch, ...]


DEFAULT_MATCH = Match(path=ROOT, headers=(), query=())


def matches(rule: Mapping[str, Any]) -> list[Match]:
    """The rule's matches (one PathPrefix ``/`` when it has none); FilterProblem when one cannot be
    served."""
    entries = [m for m in rule.get("matches") or () if isinstance(m, Mapping)]
    return [match(m) for m in entries] or [DEFAULT_MATCH]


def match(entry: Mapping[str, Any]) -> Match:
    headers: dict[str, HeaderMatch] = {}
    for header in entry.get("headers") or ():
        name = str(header.get("name") or "").lower()
        kind = _kind(_HEADER_KINDS, header.get("type", "Exact"), "header match")
        value = _checked(kind is HeaderMatchKind.REGEX, str(header.get("value") or ""))
        headers.setdefault(name, HeaderMatch(name=name, kind=kind, value=value))
    method = entry.get("method")
    if method:
        headers[METHOD_HEADER] = HeaderMatch(
            name=METHOD_HEADER, kind=HeaderMatchKind.EXACT, value=str(method)
        )
    query: dict[str, QueryMatch] = {}
    for param in entry.get("queryParams") or ():
        name = str(param.get("name") or "")
        kind = _kind(_QUERY_KINDS, param.get("type", "Exact"), "query parameter match")
        value = _checked(kind is QueryMatchKind.REGEX, str(param.get("value") or ""))
        query.setdefault(name, QueryMatch(name=name, kind=kind, value=value))
    return Match(path=_path(entry.get("path")), headers=tuple(headers.values()), query=tuple(query.values()))


def _path(spec: object) -> PathMatch:
    if not isinstance(spec, Mapping):
        return ROOT
    kind = _kind(_PATH_KINDS, spec.get("type", "PathPrefix"), "path match")
    value = str(spec.get("value") or "/")
    if kind is PathKind.SEGMENT_PREFIX and value.rstrip("/") == "":
        return ROOT
    return PathMatch(kind=kind, value=_checked(kind is PathKind.REGEX, value))


def _kind(kinds: Mapping[str, Any], name: object, what: str) -> Any:
    kind = kinds.get(str(name))
    if kind is None:
        raise FilterProblem(f"{what} type {name!r} is not supported")
    return kind


def _checked(is_regex: bool, value: str) -> str:
    if is_regex:
        try:
            re2.compile(value, _RE2_OPTIONS)
        except re2.error as err:
            raise FilterProblem(f"invalid regular expression {value!r}: {err}") from None
    return value
