"""Match conditions: validation messages and merging along an include chain (cpx_httpproxy.conditions)."""

from __future__ import annotations

from typing import Any

import pytest
from cpx.dag import HeaderMatch, HeaderMatchKind, PathKind, PathMatch, QueryMatch, QueryMatchKind

from cpx_httpproxy import conditions as cond
from cpx_httpproxy.model import MatchCondition


def mc(*items: dict[str, Any]) -> tuple[MatchCondition, ...]:
    return tuple(MatchCondition.from_dict(item) for item in items)


def header(**fields: Any) -> dict[str, Any]:
    return {"header": {"name": "x-a", **fields}}


def query(**fields: Any) -> dict[str, Any]:
    return {"queryParameter": {"name": "q", **fields}}


# -- path validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ((), None),
        (({"prefix": "/a"},), None),
        (({"exact": "/a"},), None),
        (({"regex": "/a.*"},), None),
        (({"prefix": "a"},), "prefix conditions must start with /, a was supplied"),
        (({"exact": "a"},), "exact conditions must start with /, a was supplied"),
        (({"regex": ".*"},), "regex conditions must start with /, .* was supplied"),
        (
            ({"prefix": "/a"}, {"prefix": "/b"}),
            "more than one prefix, exact or regex is not allowed in a condition block",
        ),
        (
            ({"prefix": "/a"}, {"exact": "/b"}),
            "more than one prefix, exact or regex is not allowed in a condition block",
        ),
        (({"prefix": "/a"}, header(present=True)), None),
    ],
)
def test_path_conditions_error(items: tuple[dict[str, Any], ...], expected: str | None) -> None:
    assert cond.path_conditions_error(mc(*items)) == expected


def test_invalid_path_regex_is_reported_with_re2s_reason() -> None:
    message = cond.path_conditions_error(mc({"regex": "/a(b"}))
    assert message is not None and message.startswith("supplied regex: /a(b invalid. error: ")
    assert "missing )" in message


def test_re2_is_the_judge_not_pythons_re() -> None:
    # Lookahead is fine for Python's re but not RE2 (Envoy's engine).
    assert cond.path_conditions_error(mc({"regex": "/(?=a)"})) is not None


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (({"prefix": "/a"}, header(exact="1")), None),
        (({"exact": "/a"},), "exact conditions are not allowed in includes block"),
        (({"regex": "/a"},), "regex conditions are not allowed in includes block"),
        (({"prefix": "a"},), "prefix conditions must start with /, a was supplied"),
        (
            ({"prefix": "/a"}, {"prefix": "/b"}),
            "more than one prefix, exact or regex is not allowed in a condition block",
        ),
    ],
)
def test_include_conditions_error(items: tuple[dict[str, Any], ...], expected: str | None) -> None:
    assert cond.include_conditions_error(mc(*items)) == expected


# -- header validation -----------------------------------------------------------------------------

PRESENT = "cannot specify contradictory 'present' and 'notpresent' conditions for the same route and header"
EXACT = "cannot specify contradictory 'exact' and 'notexact' conditions for the same route and header"
CONTAINS = (
    "cannot specify contradictory 'contains' and 'notcontains' conditions for the same route and header"
)
DUP_EXACT = "cannot specify duplicate header 'exact match' conditions in the same route"
BAD_REGEX = "invalid regular expression specified for 'regex' condition"


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ((header(present=True), header(notpresent=True)), PRESENT),
        ((header(notpresent=True), header(present=True)), PRESENT),
        ((header(present=True), {"header": {"name": "X-A", "notpresent": True}}), PRESENT),
        ((header(present=True), {"header": {"name": "x-b", "notpresent": True}}), None),
        ((header(exact="1"), header(exact="2")), DUP_EXACT),
        ((header(exact="1"), {"header": {"name": "X-A", "exact": "1"}}), DUP_EXACT),
        ((header(exact="1"), header(notexact="1")), EXACT),
        ((header(notexact="1"), header(exact="1")), EXACT),
        ((header(exact="1"), header(notexact="2")), None),
        ((header(contains="1"), header(notcontains="1")), CONTAINS),
        ((header(notcontains="1"), header(contains="1")), CONTAINS),
        ((header(contains="1"), header(notcontains="2")), None),
        ((header(regex="a(b"),), BAD_REGEX),
        ((header(regex="a.*b"),), None),
        (({"prefix": "/"},), None),
    ],
)
def test_header_conditions_error(items: tuple[dict[str, Any], ...], expected: str | None) -> None:
    assert cond.header_conditions_error(mc(*items)) == expected


# -- query validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ((query(exact="1"),), None),
        ((query(present=True),), None),
        ((query(),), "must specify at least one query parameter condition"),
        ((query(ignoreCase=True),), "must specify at least one query parameter condition"),
        (
            (query(exact="1", prefix="2"),),
            "cannot specify more than one condition in the same match condition branch",
        ),
        (
            (query(exact="1", present=True),),
            "cannot specify more than one condition in the same match condition branch",
        ),
        (
            (query(exact="1"), {"queryParameter": {"name": "Q", "exact": "2"}}),
            "cannot specify duplicate query parameter 'exact match' conditions in the same route",
        ),
        ((query(exact="1"), query(prefix="1")), None),
        ((query(regex="a(b"),), BAD_REGEX),
    ],
)
def test_query_conditions_error(items: tuple[dict[str, Any], ...], expected: str | None) -> None:
    assert cond.query_conditions_error(mc(*items)) == expected


# -- merging ---------------------------------------------------------------------------------------


def prefix(value: str) -> PathMatch:
    return PathMatch(kind=PathKind.PREFIX, value=value)


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ((), prefix("/")),
        ((header(present=True),), prefix("/")),
        (({"prefix": "/api"},), prefix("/api")),
        (({"prefix": "/api"}, {"prefix": "/v1"}), prefix("/api/v1")),
        (({"prefix": "/api/"}, {"prefix": "/v1"}), prefix("/api/v1")),
        (({"prefix": "/"}, {"prefix": "/"}), prefix("/")),
        (({"prefix": "/api/"}, {"prefix": "/"}), prefix("/api/")),
        (({"prefix": "/api"}, {"exact": "/x"}), PathMatch(kind=PathKind.EXACT, value="/api/x")),
        (({"exact": "/x"}, header(present=True)), PathMatch(kind=PathKind.EXACT, value="/x")),
        (({"prefix": "/api"}, {"regex": "/v[0-9]+"}), PathMatch(kind=PathKind.REGEX, value="/api/v[0-9]+")),
        (({"prefix": "//a//"}, {"prefix": "//b"}), prefix("/a/b")),
    ],
)
def test_merge_path(items: tuple[dict[str, Any], ...], expected: PathMatch) -> None:
    assert cond.merge_path(mc(*items)) == expected


def test_merge_headers_in_chain_order_with_contours_flags() -> None:
    items = mc(
        {"prefix": "/a"},
        header(present=True, ignoreCase=True),
        {"header": {"name": "x-b", "notpresent": True}},
        {"header": {"name": "x-c", "exact": "v", "ignoreCase": True, "treatMissingAsEmpty": True}},
        {"header": {"name": "x-d", "notexact": "v", "ignoreCase": True, "treatMissingAsEmpty": True}},
        {"header": {"name": "x-e", "contains": "v", "ignoreCase": True}},
        {"header": {"name": "x-f", "notcontains": "v", "treatMissingAsEmpty": True}},
        {"header": {"name": ":method", "regex": "GET|HEAD", "ignoreCase": True}},
    )
    assert cond.merge_headers(items) == (
        HeaderMatch(name="x-a", kind=HeaderMatchKind.PRESENT),
        HeaderMatch(name="x-b", kind=HeaderMatchKind.PRESENT, invert=True),
        HeaderMatch(name="x-c", kind=HeaderMatchKind.EXACT, value="v", ignore_case=True),
        HeaderMatch(
            name="x-d",
            kind=HeaderMatchKind.EXACT,
            value="v",
            invert=True,
            ignore_case=True,
            treat_missing_as_empty=True,
        ),
        HeaderMatch(name="x-e", kind=HeaderMatchKind.CONTAINS, value="v", ignore_case=True),
        HeaderMatch(
            name="x-f", kind=HeaderMatchKind.CONTAINS, value="v", invert=True, treat_missing_as_empty=True
        ),
        HeaderMatch(name=":method", kind=HeaderMatchKind.REGEX, value="GET|HEAD"),
    )


def test_merge_query() -> None:
    items = mc(
        {"queryParameter": {"name": "a", "exact": "1", "ignoreCase": True}},
        {"queryParameter": {"name": "b", "prefix": "2"}},
        {"queryParameter": {"name": "c", "suffix": "3", "ignoreCase": True}},
        {"queryParameter": {"name": "d", "regex": "4.*", "ignoreCase": True}},
        {"queryParameter": {"name": "e", "contains": "5"}},
        {"queryParameter": {"name": "f", "present": True, "ignoreCase": True}},
    )
    assert cond.merge_query(items) == (
        QueryMatch(name="a", kind=QueryMatchKind.EXACT, value="1", ignore_case=True),
        QueryMatch(name="b", kind=QueryMatchKind.PREFIX, value="2"),
        QueryMatch(name="c", kind=QueryMatchKind.SUFFIX, value="3", ignore_case=True),
        QueryMatch(name="d", kind=QueryMatchKind.REGEX, value="4.*"),
        QueryMatch(name="e", kind=QueryMatchKind.CONTAINS, value="5"),
        QueryMatch(name="f", kind=QueryMatchKind.PRESENT),
    )


# -- duplicate include conditions -------------------------------------------------------------------


def test_duplicate_include_conditions() -> None:
    seen = cond.IncludeConditionsSeen()
    assert not seen.duplicate(mc({"prefix": "/a"}, header(exact="1"), header(present=True)))
    assert not seen.duplicate(mc({"prefix": "/a"}))
    assert not seen.duplicate(mc({"prefix": "/a"}, header(exact="2")))
    # The same set in another order, and the prefix written with extra slashes.
    assert seen.duplicate(mc(header(present=True), {"prefix": "//a"}, header(exact="1")))
    assert seen.duplicate(mc({"prefix": "/a"}))


def test_empty_and_root_include_conditions_never_conflict() -> None:
    seen = cond.IncludeConditionsSeen()
    for _ in range(2):
        assert not seen.duplicate(())
        assert not seen.duplicate(mc({"prefix": "/"}))
    assert not seen.duplicate(mc({"prefix": "/"}, query(exact="1")))
    assert seen.duplicate(mc(query(exact="1")))
