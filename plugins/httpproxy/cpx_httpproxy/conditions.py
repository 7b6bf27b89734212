"""HTTPProxy match conditions: validation and merging along an include chain (Contour's
``internal/dag/conditions.go``).

A route's effective match is the conditions of every include on the way from the root, then the
route's own, ANDed:

* path: the prefixes, exacts and regexes are concatenated in chain order and runs of ``/``
  collapsed; any regex in the chain makes the whole path a regex, otherwise the last path
  condition decides between prefix and exact; no path condition at all means prefix ``/``.
  HTTPProxy prefixes are plain string prefixes (``/foo`` matches ``/foobar``).
* headers and query parameters: every condition of the chain, in order.

The ``*_error`` functions answer None or the message Contour puts in status; the processor picks
the type and reason (and the ``include:`` / ``route:`` prefix of path messages).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs
import re2
from cpx.dag import HeaderMatch, HeaderMatchKind, PathKind, PathMatch, QueryMatch, QueryMatchKind

from cpx_httpproxy.model import MatchCondition

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a user's bad regex goes to status, not to stderr
_SLASHES = re2.compile("//+")
_ROOT = PathMatch(kind=PathKind.PREFIX, value="/")


def regex_error(pattern: str) -> str | None:
    """Why RE2 (Envoy's engine) refuses the pattern, or None when it compiles."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as err:
        detail = err.args[0] if err.args else str(err)
        return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
    return None


# -- validation ----------------------------------------------------------------------------------


def path_conditions_error(conditions: Iterable[MatchCondition]) -> str | None:
    """Contour's pathMatchConditionsValid: every path starts with ``/``, regexes compile, and one
    condition block holds at most one path condition."""
    count = 0
    for cond in conditions:
        for kind, value in (("prefix", cond.prefix), ("exact", cond.exact), ("regex", cond.regex)):
            if not value:
                continue
            count += 1
            if not value.startswith("/"):
                return f"{kind} conditions must start with /, {value} was supplied"
            if kind == "regex":
                problem = regex_error(value)
                if problem is not None:
                    return f"supplied regex: {value} invalid. error: {problem}"
    if count > 1:
        return "more than one prefix, exact or regex is not allowed in a condition block"
    return None


def include_conditions_error(conditions: Sequence[MatchCondition]) -> str | None:
    """Contour's includeMatchConditionsValid then pathMatchConditionsValid: includes take prefix,
    header and query parameter conditions only."""
    for cond in conditions:
        if cond.exact:
            return "exact conditions are not allowed in includes block"
        if cond.regex:
            return "regex conditions are not allowed in includes block"
    return path_conditions_error(conditions)


def header_conditions_error(conditions: Iterable[MatchCondition]) -> str | None:
    """Contour's headerMatchConditionsValid over a whole chain: no two ``exact`` on one header,
    and no ``present``/``notpresent``, ``exact``/``notexact`` or ``contains``/``notcontains`` pair
    on one header with the same value; header names compare case-insensitively.  A header regex
    must compile."""
    seen: set[tuple[str, str, str]] = set()  # (lower-cased name, operator, value)
    exact_headers: set[str] = set()
    for cond in conditions:
        header = cond.header
        if header is None:
            continue
        name = header.name.lower()
        op, value = _header_operator(cond)
        problem = _header_condition_error(name, op, value, seen, exact_headers)
        if problem is not None:
            return problem
        seen.add((name, op, value))
    return None


def _header_condition_error(
    name: str, op: str, value: str, seen: set[tuple[str, str, str]], exact_headers: set[str]
) -> str | None:
    """What is wrong with one header condition, given those before it in the chain."""
    if op == "exact":
        if name in exact_headers:
            return "cannot specify duplicate header 'exact match' conditions in the same route"
        exact_headers.add(name)
    opposite = _OPPOSITES.get(op)
    if opposite is not None and (name, opposite, value) in seen:
        return _CONTRADICTION.format(*sorted((op, opposite), key=len))
    if op == "regex" and regex_error(value) is not None:
        return "invalid regular expression specified for 'regex' condition"
    return None


_CONTRADICTION = "cannot specify contradictory '{}' and '{}' conditions for the same route and header"
# Header operators that contradict each other on one header and value (present's value is "").
_OPPOSITES = {
    "present": "notpresent",
    "notpresent": "present",
    "exact": "notexact",
    "notexact": "exact",
    "contains": "notcontains",
    "notcontains": "contains",
}


def _header_operator(cond: MatchCondition) -> tuple[str, str]:
    """The operator a header condition uses (Contour's precedence when several are set)."""
    h = cond.header
    assert h is not None
    if h.present:
        return "present", ""
    if h.not_present:
        return "notpresent", ""
    if h.exact:
        return "exact", h.exact
    if h.not_exact:
        return "notexact", h.not_exact
    if h.contains:
        return "contains", h.contains
    if h.not_contains:
        return "notcontains", h.not_contains
    if h.regex:
        return "regex", h.regex
    return "", ""


def query_conditions_error(conditions: Iterable[MatchCondition]) -> str | None:
    """Contour's queryParameterMatchConditionsValid over a whole chain: exactly one operator per
    condition, no two ``exact`` on one parameter (names compared case-insensitively), regexes
    compile."""
    exact_names: set[str] = set()
    for cond in conditions:
        q = cond.query_parameter
        if q is None:
            continue
        operators = [v for v in (q.exact, q.prefix, q.suffix, q.regex, q.contains) if v]
        if q.present:
            operators.append("true")
        if not operators:
            return "must specify at least one query parameter condition"
        if len(operators) > 1:
            return "cannot specify more than one condition in the same match condition branch"
        if q.exact:
            name = q.name.lower()
            if name in exact_names:
                return "cannot specify duplicate query parameter 'exact match' conditions in the same route"
            exact_names.add(name)
        if q.regex and regex_error(q.regex) is not None:
            return "invalid regular expression specified for 'regex' condition"
    return None


# -- merging -------------------------------------------------------------------------------------


def merge_path(conditions: Sequence[MatchCondition]) -> PathMatch:
    """The path match of a chain of conditions (Contour's mergePathMatchConditions).

    Contour takes the type from the chain's last condition of any kind, so an ``exact`` followed
    by a header condition would become a prefix; cpx takes it from the last *path* condition,
    which is what the documentation describes ("the leaf's type wins").
    """
    merged = ""
    is_regex = False
    last = ""
    for cond in conditions:
        if cond.prefix:
            merged, last = merged + cond.prefix, "prefix"
        elif cond.exact:
            merged, last = merged + cond.exact, "exact"
        elif cond.regex:
            merged, last, is_regex = merged + cond.regex, "regex", True
    if "//" in merged:  # re2 only when there is a run to collapse: most paths have none
        merged = _SLASHES.sub("/", merged)
    if not merged:
        return _ROOT
    if is_regex:
        return PathMatch(kind=PathKind.REGEX, value=merged)
    if last == "exact":
        return PathMatch(kind=PathKind.EXACT, value=merged)
    return PathMatch(kind=PathKind.PREFIX, value=merged)


def merge_headers(conditions: Iterable[MatchCondition]) -> tuple[HeaderMatch, ...]:
    """The header matches of a chain of conditions, in order (Contour's headerMatchConditions)."""
    out: list[HeaderMatch] = []
    for cond in conditions:
        h = cond.header
        if h is None:
            continue
        op, value = _header_operator(cond)
        match op:
            case "present":
                out.append(HeaderMatch(name=h.name, kind=HeaderMatchKind.PRESENT))
            case "notpresent":
                out.append(HeaderMatch(name=h.name, kind=HeaderMatchKind.PRESENT, invert=True))
            case "contains" | "exact":
                kind = HeaderMatchKind.CONTAINS if op == "contains" else HeaderMatchKind.EXACT
                out.append(HeaderMatch(name=h.name, kind=kind, value=value, ignore_case=h.ignore_case))
            case "notcontains" | "notexact":
                kind = HeaderMatchKind.CONTAINS if op == "notcontains" else HeaderMatchKind.EXACT
                out.append(
                    HeaderMatch(
                        name=h.name,
                        kind=kind,
                        value=value,
                        invert=True,
                        ignore_case=h.ignore_case,
                        treat_missing_as_empty=h.treat_missing_as_empty,
                    )
                )
            case "regex":
                out.append(HeaderMatch(name=h.name, kind=HeaderMatchKind.REGEX, value=value))
    return tuple(out)


def merge_query(conditions: Iterable[MatchCondition]) -> tuple[QueryMatch, ...]:
    """The query parameter matches of a chain of conditions, in order (Contour's
    queryParameterMatchConditions: regex and present ignore ``ignoreCase``)."""
    out: list[QueryMatch] = []
    for cond in conditions:
        q = cond.query_parameter
        if q is None:
            continue
        for kind, value in (
            (QueryMatchKind.EXACT, q.exact),
            (QueryMatchKind.PREFIX, q.prefix),
            (QueryMatchKind.SUFFIX, q.suffix),
            (QueryMatchKind.REGEX, q.regex),
            (QueryMatchKind.CONTAINS, q.contains),
        ):
            if value:
                ignore_case = q.ignore_case and kind is not QueryMatchKind.REGEX
                out.append(QueryMatch(name=q.name, kind=kind, value=value, ignore_case=ignore_case))
                break
        else:
            if q.present:
                out.append(QueryMatch(name=q.name, kind=QueryMatchKind.PRESENT))
    return tuple(out)


@attrs.define
class IncludeConditionsSeen:
    """Duplicate detection among one proxy's includes (Contour's includeMatchConditionsIdentical).

    Two includes conflict when their prefix and their header and query conditions (as sets) are
    the same.  As in Contour, includes with no conditions or only ``prefix: /`` never conflict
    (existing include trees rely on it).
    """

    _seen: set[tuple[str, frozenset[HeaderMatch], frozenset[QueryMatch]]] = attrs.field(factory=set)

    def duplicate(self, conditions: Sequence[MatchCondition]) -> bool:
        prefix = merge_path(conditions).value
        headers, query = merge_headers(conditions), merge_query(conditions)
        if prefix == "/" and not headers and not query:
            return False
        key = (prefix, frozenset(headers), frozenset(query))
        if key in self._seen:
            return True
        self._seen.add(key)
        return False
