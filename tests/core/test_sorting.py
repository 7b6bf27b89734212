"""Contour's route order (contour.md 6.7), checked rule by rule and against a port of its comparator."""

from __future__ import annotations

import functools
import random

import pytest

from cpx.dag.nodes import (
    Cluster,
    HeaderMatch,
    HeaderMatchKind,
    PathKind,
    PathMatch,
    QueryMatch,
    QueryMatchKind,
    Route,
    ServicePort,
)
from cpx.dag.sorting import sort_routes, sorted_headers, sorted_query

H = HeaderMatchKind
Q = QueryMatchKind
BACKEND = (Cluster(upstream=ServicePort(namespace="ns", name="svc", port=80)),)


def route(
    kind: PathKind = PathKind.PREFIX,
    value: str = "/",
    headers: tuple[HeaderMatch, ...] = (),
    query: tuple[QueryMatch, ...] = (),
) -> Route:
    return Route(
        path=PathMatch(kind=kind, value=value),
        headers=headers,
        query=query,
        clusters=BACKEND,
    )


def header(name: str, kind: HeaderMatchKind = H.EXACT, value: str = "", invert: bool = False) -> HeaderMatch:
    return HeaderMatch(name=name, kind=kind, value=value, invert=invert)


def query(
    name: str, kind: QueryMatchKind = Q.EXACT, value: str = "", ignore_case: bool = False
) -> QueryMatch:
    return QueryMatch(name=name, kind=kind, value=value, ignore_case=ignore_case)


def order(*routes: Route) -> list[Route]:
    """Sort a shuffled copy, so that the result never depends on the input order."""
    shuffled = list(routes)
    random.Random(42).shuffle(shuffled)
    return sort_routes(shuffled)


def test_exact_then_regex_then_prefix() -> None:
    exact = route(PathKind.EXACT, "/a")
    regex = route(PathKind.REGEX, "/a.*")
    prefix = route(PathKind.PREFIX, "/aaaaaaaaaaaaaa")
    segment = route(PathKind.SEGMENT_PREFIX, "/bbbbbbbbbbbbbbbbbb")
    assert order(segment, prefix, regex, exact) == [exact, regex, segment, prefix]


def test_exact_paths_reverse_lexicographic() -> None:
    a, ab, b = route(PathKind.EXACT, "/a"), route(PathKind.EXACT, "/ab"), route(PathKind.EXACT, "/b")
    # Go's strings.Compare: "/b" > "/ab" > "/a", and the greater sorts first.
    assert order(a, ab, b) == [b, ab, a]


def test_regexes_longer_first_then_reverse_lexicographic() -> None:
    short, long_a, long_b = (route(PathKind.REGEX, v) for v in ("/z.*", "/a/.*", "/b/.*"))
    assert order(short, long_a, long_b) == [long_b, long_a, short]


def test_prefixes_longer_first_then_reverse_lexicographic() -> None:
    root, foo, bar, foobar = (route(PathKind.PREFIX, v) for v in ("/", "/foo", "/bar", "/foobar"))
    assert order(root, foo, bar, foobar) == [foobar, foo, bar, root]


def test_identical_prefix_segment_before_string() -> None:
    string = route(PathKind.PREFIX, "/api")
    segment = route(PathKind.SEGMENT_PREFIX, "/api")
    assert order(string, segment) == [segment, string]
    # Length still decides first: a longer string prefix beats a shorter segment prefix.
    longer = route(PathKind.PREFIX, "/api/v1")
    assert order(segment, longer) == [longer, segment]


def test_method_match_first_then_more_headers() -> None:
    method = route(headers=(header(":method", value="GET"),))
    two = route(headers=(header("a"), header("b")))
    one = route(headers=(header("a"),))
    none = route()
    # The :method match wins even against more header conditions; it does not count as one.
    assert order(none, one, two, method) == [method, two, one, none]
    method_and_one = route(headers=(header(":method", value="GET"), header("a")))
    assert order(method, method_and_one) == [method_and_one, method]


def test_more_headers_before_more_query() -> None:
    headers = route(headers=(header("a"),))
    queries = route(query=(query("q"), query("r")))
    plain = route()
    assert order(plain, queries, headers) == [headers, queries, plain]


def test_query_count_first() -> None:
    more = route(query=(query("q"),))
    less = route()
    assert order(less, more) == [more, less]


def test_header_item_comparison() -> None:
    by_name = [route(headers=(header(n),)) for n in ("b", "a", "c")]
    assert [r.headers[0].name for r in order(*by_name)] == ["a", "b", "c"]
    kinds = [H.PRESENT, H.CONTAINS, H.REGEX, H.EXACT]
    by_kind = [route(headers=(header("x", k, "" if k is H.PRESENT else "v"),)) for k in kinds]
    assert [r.headers[0].kind for r in order(*by_kind)] == [H.EXACT, H.REGEX, H.CONTAINS, H.PRESENT]
    by_value = [route(headers=(header("x", H.EXACT, v),)) for v in ("b", "a")]
    assert [r.headers[0].value for r in order(*by_value)] == ["a", "b"]
    inverted = route(headers=(header("x", H.EXACT, "v", invert=True),))
    plain = route(headers=(header("x", H.EXACT, "v"),))
    assert order(inverted, plain) == [plain, inverted]
    present_inv = route(headers=(header("x", H.PRESENT, invert=True),))
    present = route(headers=(header("x", H.PRESENT),))
    assert order(present_inv, present) == [present, present_inv]


def test_query_item_comparison() -> None:
    kinds = [Q.PRESENT, Q.CONTAINS, Q.SUFFIX, Q.PREFIX, Q.REGEX, Q.EXACT]
    by_kind = [route(query=(query("q", k, "" if k is Q.PRESENT else "v"),)) for k in kinds]
    expected = [Q.EXACT, Q.REGEX, Q.PREFIX, Q.SUFFIX, Q.CONTAINS, Q.PRESENT]
    assert [r.query[0].kind for r in order(*by_kind)] == expected
    insensitive = route(query=(query("q", Q.EXACT, "v", ignore_case=True),))
    sensitive = route(query=(query("q", Q.EXACT, "v"),))
    assert order(insensitive, sensitive) == [sensitive, insensitive]


def test_conditions_inside_a_route_are_sorted() -> None:
    headers = (header("b"), header("a", H.PRESENT), header("a", H.EXACT, "z"), header("a", H.EXACT, "y"))
    assert [(h.name, h.kind, h.value) for h in sorted_headers(headers)] == [
        ("a", H.EXACT, "y"),
        ("a", H.EXACT, "z"),
        ("a", H.PRESENT, ""),
        ("b", H.EXACT, ""),
    ]
    queries = (query("b"), query("a", Q.PRESENT), query("a", Q.PREFIX, "p"))
    assert [(q.name, q.kind) for q in sorted_query(queries)] == [
        ("a", Q.PREFIX),
        ("a", Q.PRESENT),
        ("b", Q.EXACT),
    ]


def test_sorting_uses_sorted_conditions() -> None:
    # Item-wise comparison looks at each route's conditions in sorted order, whatever their order.
    first = route(headers=(header("z"), header("a", H.EXACT, "1")))
    second = route(headers=(header("a", H.EXACT, "2"), header("z")))
    assert order(second, first) == [first, second]


# -- a port of Contour's comparator (internal/sorter/sorter.go) ------------------------------------

_CONTOUR_HEADER_RANK = {H.EXACT: 0, H.REGEX: 1, H.CONTAINS: 2, H.PRESENT: 3}
_CONTOUR_QUERY_RANK = {Q.EXACT: 0, Q.REGEX: 1, Q.PREFIX: 2, Q.SUFFIX: 3, Q.CONTAINS: 4, Q.PRESENT: 5}


def _cmp(a: str, b: str) -> int:
    return (a > b) - (a < b)


def _header_less(a: HeaderMatch, b: HeaderMatch) -> bool:
    if a.name != b.name:
        return a.name < b.name
    ra, rb = _CONTOUR_HEADER_RANK[a.kind], _CONTOUR_HEADER_RANK[b.kind]
    if ra != rb:
        return ra < rb
    if a.kind is H.PRESENT:
        return a.invert != b.invert and not a.invert
    if a.value != b.value:
        return a.value < b.value
    return a.invert != b.invert and not a.invert


def _query_less(a: QueryMatch, b: QueryMatch) -> bool:
    if a.name != b.name:
        return a.name < b.name
    ra, rb = _CONTOUR_QUERY_RANK[a.kind], _CONTOUR_QUERY_RANK[b.kind]
    if ra != rb:
        return ra < rb
    if a.kind is Q.PRESENT:
        return False
    if a.value != b.value:
        return a.value < b.value
    return a.ignore_case != b.ignore_case and not a.ignore_case


def _conditions_less(lhs: Route, rhs: Route) -> bool:
    lm = any(h.name == ":method" for h in lhs.headers)
    rm = any(h.name == ":method" for h in rhs.headers)
    if lm != rm:
        return lm
    lh = sorted_headers(h for h in lhs.headers if h.name != ":method")
    rh = sorted_headers(h for h in rhs.headers if h.name != ":method")
    if len(lh) != len(rh):
        return len(lh) > len(rh)
    if len(lhs.query) != len(rhs.query):
        return len(lhs.query) > len(rhs.query)
    if any(_header_less(a, b) for a, b in zip(lh, rh, strict=True)):
        return True
    return any(
        _query_less(a, b) for a, b in zip(sorted_query(lhs.query), sorted_query(rhs.query), strict=True)
    )


def contour_compare(a: Route, b: Route) -> int:
    return -1 if contour_less(a, b) else 0


def contour_less(a: Route, b: Route) -> bool:  # noqa: PLR0911  (why: a transcription of Contour's comparison)
    ka, kb = a.path.kind, b.path.kind
    va, vb = a.path.value, b.path.value
    prefixes = (PathKind.PREFIX, PathKind.SEGMENT_PREFIX)
    if ka in prefixes and kb in prefixes:
        if len(va) != len(vb):
            return len(va) > len(vb)
        if va != vb:
            return _cmp(va, vb) == 1
        if ka == kb:
            return _conditions_less(a, b)
        return ka is PathKind.SEGMENT_PREFIX
    if ka is PathKind.REGEX:
        if kb is PathKind.REGEX:
            if len(va) != len(vb):
                return len(va) > len(vb)
            return _cmp(va, vb) == 1 if va != vb else _conditions_less(a, b)
        return kb in prefixes
    if ka is PathKind.EXACT:
        if kb is PathKind.EXACT:
            return _cmp(va, vb) == 1 if va != vb else _conditions_less(a, b)
        return True
    return False


def _random_route(rng: random.Random) -> Route:
    kind = rng.choice(list(PathKind))
    value = "/" + "".join(rng.choice("ab/") for _ in range(rng.randint(0, 3)))
    headers = tuple(
        header(
            rng.choice([":method", "x", "y"]),
            hk := rng.choice(list(_CONTOUR_HEADER_RANK)),
            "" if hk is H.PRESENT else rng.choice("ab"),
            rng.random() < 0.3,
        )
        for _ in range(rng.randint(0, 2))
    )
    queries = tuple(
        query(rng.choice("pq"), qk := rng.choice(list(Q)), "" if qk is Q.PRESENT else rng.choice("ab"))
        for _ in range(rng.randint(0, 2))
    )
    return route(kind, value, headers, queries)


@pytest.mark.parametrize("seed", range(5))
def test_agrees_with_contour_comparator(seed: int) -> None:
    """Nowhere does Contour's Less put a later route strictly before an earlier one.

    Contour's item-wise header comparison is not a strict weak order, so only pairs it orders one
    way (less(b, a) and not less(a, b)) can be held against cpx's total order.
    """
    rng = random.Random(seed)
    routes = list({r.match_key(): r for r in (_random_route(rng) for _ in range(60))}.values())
    ordered = sort_routes(routes)
    for i, earlier in enumerate(ordered):
        for later in ordered[i + 1 :]:
            assert not (contour_less(later, earlier) and not contour_less(earlier, later)), (earlier, later)
    # And a reference sort with Contour's comparator (where consistent) gives the same path order.
    reference = sorted(routes, key=functools.cmp_to_key(contour_compare))
    assert [r.path for r in reference] == [r.path for r in ordered]
