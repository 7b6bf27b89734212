"""build_route's directly encoded plain forwards are exactly what building them field by field gives."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpx.builtin.filters import builtin_contributions
from cpx.dag.nodes import (
    Cluster,
    CookieRewrite,
    CORSPolicy,
    HeaderMatch,
    HeaderMatchKind,
    HeadersPolicy,
    HeaderValue,
    PathKind,
    PathMatch,
    Route,
    ServicePort,
    TimeoutPolicy,
)
from cpx.xds.constraints.validate import parts_pass_check, violations
from cpx.xds.envoy import route as route_module
from cpx.xds.envoy.route import PLAIN_FORWARD_FIELDS, PLAIN_FORWARD_READS, build_route
from cpx.xds.httpfilters import route_calls

FILTERS = builtin_contributions().http_filters


def _built(route: Route, secure: bool = False, extra: HeaderMatch | None = None) -> bytes:
    calls = route_calls(FILTERS, route)
    message = route_module._built(route, secure, extra, "example.com", calls, True)
    data: bytes = message.SerializeToString(deterministic=True)
    return data


def _fast(route: Route, secure: bool = False, extra: HeaderMatch | None = None) -> bytes:
    message, data, _ = build_route(route, secure, extra, "example.com", FILTERS, True, True)
    assert message.SerializeToString(deterministic=True) == data
    return data


def test_every_route_field_is_placed() -> None:
    assert set(PLAIN_FORWARD_READS) == {field.name for field in attrs.fields(Route)}


names = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(list(PathKind)),
    value=names,
    service=st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=120),
    secure=st.booleans(),
    https_redirect=st.booleans(),
)
def test_plain_forwards_encode_as_built(
    kind: PathKind, value: str, service: str, secure: bool, https_redirect: bool
) -> None:
    route = Route(
        path=PathMatch(kind=kind, value=value),
        clusters=(Cluster(upstream=ServicePort(namespace="ns", name=service, port=80)),),
        https_redirect=https_redirect,
    )
    assert _fast(route, secure) == _built(route, secure)


WEB = Cluster(upstream=ServicePort(namespace="ns", name="web", port=80))


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"clusters": ()},
        {"clusters": (WEB, attrs.evolve(WEB, weight=3))},
        {"clusters": (attrs.evolve(WEB, request_headers=HeadersPolicy(remove=("x-a",))),)},
        {"clusters": (attrs.evolve(WEB, cookie_rewrites=(CookieRewrite(name="c", secure=True),)),)},
        {"headers": (HeaderMatch(name="x-a", kind=HeaderMatchKind.EXACT, value="1"),)},
        {"websocket": True},
        {"prefix_rewrite": "/x"},
        {"timeout_policy": TimeoutPolicy(response=None, idle=None, idle_connection=None)},
        {"request_headers": HeadersPolicy(set=(HeaderValue(name="x-a", value="1"),))},
        {"response_headers": HeadersPolicy(remove=("x-b",))},
        {"cors": CORSPolicy(allow_origin=("*",), allow_methods=("GET",))},
        {"cookie_rewrites": (CookieRewrite(name="c", secure=True),)},
        {"path": PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/")},
        {"path": PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/a//")},
        {"path": PathMatch(kind=PathKind.REGEX, value="/a.*")},
        {"path": PathMatch(kind=PathKind.PREFIX, value="")},
    ],
)
@pytest.mark.parametrize("secure", [False, True])
def test_routes_with_more_are_built_as_before(changes: dict[str, Any], secure: bool) -> None:
    route = attrs.evolve(Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), clusters=(WEB,)), **changes)
    assert _fast(route, secure) == _built(route, secure)
    extra = HeaderMatch(name=":authority", kind=HeaderMatchKind.REGEX, value="^[a-z]+\\.example\\.com$")
    assert _fast(route, secure, extra) == _built(route, secure, extra)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from([PathKind.PREFIX, PathKind.EXACT, PathKind.SEGMENT_PREFIX]),
    value=st.one_of(names, st.sampled_from(["/", "/a", "/a?b", "/a#", "a/", "/a b", "/\x00", "/" * 200])),
    service=st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=120),
)
def test_plain_forwards_pass_their_parts_check_exactly_when_violations_finds_nothing(
    kind: PathKind, value: str, service: str
) -> None:
    route = Route(
        path=PathMatch(kind=kind, value=value),
        clusters=(Cluster(upstream=ServicePort(namespace="ns", name=service, port=80)),),
    )
    message, _, plain = build_route(route, False, None, "example.com", FILTERS, True, True)
    assert plain is not None
    passes = parts_pass_check(message.DESCRIPTOR, PLAIN_FORWARD_FIELDS)
    assert passes(message, plain) == (not violations(message))
    assert passes(message, plain) == (not violations(message))  # the second time from the memo
