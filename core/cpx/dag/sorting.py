"""Contour's route order within a virtual host (``internal/sorter/sorter.go``), on cpx's own types.

Envoy takes the first route that matches, so the order decides which route wins.  Sorting the DAG's
routes (not the Envoy messages) keeps the order independent of how a match kind happens to be
expressed in Envoy, as Contour does since it moved sorting before translation.

Contour sorts with ``Less`` functions; here every rule is folded into one ascending key per route,
which is both faster (no Python-level comparisons) and a strict total order where Contour's
item-wise header comparison is not:

1. exact paths, then regexes, then prefixes;
2. exact vs exact: reverse-lexicographic; regex vs regex and prefix vs prefix: longer first, then
   reverse-lexicographic; for an identical prefix a segment prefix comes before a string prefix;
3. identical paths: a ``:method`` match first, then more header matches, then more query matches,
   then ``Route.precedence`` (0 unless a plugin ranks such routes), then the header and the query
   conditions item by item.

Header and query conditions inside a route sort by the same comparators (name, match kind, value,
non-inverted / case-sensitive first).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable

from cpx.dag.nodes import HeaderMatch, HeaderMatchKind, PathKind, PathMatch, QueryMatch, QueryMatchKind, Route

METHOD_HEADER = ":method"

# Most specific first: Contour's Exact > Regex > Contains > Present for headers.
_HEADER_RANK = {
    HeaderMatchKind.EXACT: 0,
    HeaderMatchKind.REGEX: 1,
    HeaderMatchKind.CONTAINS: 2,
    HeaderMatchKind.PRESENT: 3,
}
_QUERY_RANK = {
    QueryMatchKind.EXACT: 0,
    QueryMatchKind.REGEX: 1,
    QueryMatchKind.PREFIX: 2,
    QueryMatchKind.SUFFIX: 3,
    QueryMatchKind.CONTAINS: 4,
    QueryMatchKind.PRESENT: 5,
}
_PATH_RANK = {PathKind.EXACT: 0, PathKind.REGEX: 1, PathKind.SEGMENT_PREFIX: 2, PathKind.PREFIX: 2}

HeaderKey = tuple[str, int, str, bool, bool, bool]
QueryKey = tuple[str, int, str, bool]


# Memoised: virtual hosts tend to repeat the same paths ("/", "/api", ...).
@functools.lru_cache(maxsize=1 << 14)
def _descending(text: str) -> tuple[int, ...]:
    """A key that sorts strings in reverse lexicographic order (Go's ``strings.Compare(a, b) == 1``).

    Negated code points reverse the order of differing characters; the trailing 1 (greater than
    any negated code point) puts a string after its own extensions, so "/ab" sorts before "/a".
    """
    return (*map(operator.neg, map(ord, text)), 1)


def header_key(header: HeaderMatch) -> HeaderKey:
    # Present matches carry no value, so for them only inversion decides (as in Contour).
    return (
        header.name,
        _HEADER_RANK[header.kind],
        header.value,
        header.invert,
        header.ignore_case,
        header.treat_missing_as_empty,
    )


def query_key(query: QueryMatch) -> QueryKey:
    return (query.name, _QUERY_RANK[query.kind], query.value, query.ignore_case)


def sorted_headers(headers: Iterable[HeaderMatch]) -> tuple[HeaderMatch, ...]:
    return tuple(sorted(headers, key=header_key))


def sorted_query(query: Iterable[QueryMatch]) -> tuple[QueryMatch, ...]:
    return tuple(sorted(query, key=query_key))


def _conditions_key(route: Route) -> tuple[object, ...]:
    """Contour's ``compareRoutesByMethodHeaderQueryParams`` as an ascending key."""
    has_method = False
    others: list[HeaderKey] = []
    for header in route.headers:
        if header.name == METHOD_HEADER:
            has_method = True
        else:
            others.append(header_key(header))
    others.sort()
    queries = sorted(query_key(q) for q in route.query)
    return (not has_method, -len(others), -len(queries), route.precedence, tuple(others), tuple(queries))


def _path_key(path: PathMatch) -> tuple[object, ...]:
    rank = _PATH_RANK[path.kind]
    if path.kind is PathKind.EXACT:
        return (rank, _descending(path.value))
    # Lengths are compared first, so the descending key only ever compares equal lengths.
    if rank == 2:
        return (
            rank,
            -len(path.value),
            _descending(path.value),
            0 if path.kind is PathKind.SEGMENT_PREFIX else 1,
        )
    return (rank, -len(path.value), _descending(path.value))


# Most routes have neither header nor query conditions: their key depends on the path and the
# precedence only, and routes repeat paths ("/", "/api", ...), so it is memoised whole.
@functools.lru_cache(maxsize=1 << 14)
def _plain_key(path: PathMatch, precedence: int) -> tuple[object, ...]:
    return (*_path_key(path), True, 0, 0, precedence, (), ())


def route_key(route: Route) -> tuple[object, ...]:
    """Ascending sort key of a route: routes Envoy should try first have the smallest keys."""
    if not route.headers and not route.query:
        return _plain_key(route.path, route.precedence)
    return (*_path_key(route.path), *_conditions_key(route))


def sort_routes(routes: Iterable[Route]) -> list[Route]:
    """Routes in the order Envoy should try them (stable for routes with identical conditions)."""
    return sorted(routes, key=route_key)
