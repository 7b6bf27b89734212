"""Route contract additions any plugin may use: appended headers, regex path rewrites, redirect
regex rewrites, precedence among equally specific routes, multi-label wildcard virtual hosts."""

from __future__ import annotations

import attrs
from envoy.config.core.v3 import base_pb2 as core_base
from envoy.extensions.filters.http.cors.v3 import cors_pb2 as cors_v3
from tests.core.test_routes import CORS, HTTP, SINGLE, backend, new_dag, one_route, prefix, translate, unpack

from cpx.builtin.filters import with_builtin_filters
from cpx.dag.nodes import (
    CORSPolicy,
    HeaderMatch,
    HeaderMatchKind,
    HeadersPolicy,
    HeaderValue,
    PathKind,
    PathMatch,
    Redirect,
    RegexRewrite,
)
from cpx.dag.sorting import sort_routes
from cpx.xds.caches.routes import RouteCache

APPEND = core_base.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD
OVERWRITE = core_base.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD


def test_added_headers_append_after_set_ones() -> None:
    policy = HeadersPolicy(
        set=(HeaderValue(name="x-s", value="1"),),
        add=(HeaderValue(name="x-b", value="2"), HeaderValue(name="x-a", value="3")),
    )
    envoy_route = one_route(prefix(request_headers=policy, response_headers=policy))
    expected = [("x-s", "1", OVERWRITE), ("x-b", "2", APPEND), ("x-a", "3", APPEND)]
    for options in (envoy_route.request_headers_to_add, envoy_route.response_headers_to_add):
        assert [(h.header.key, h.header.value, h.append_action) for h in options] == expected


def test_added_headers_per_weighted_cluster() -> None:
    policy = HeadersPolicy(add=(HeaderValue(name="x-a", value="1"),))
    route = prefix(clusters=(backend("a", request_headers=policy), backend("b")))
    entries = one_route(route).route.weighted_clusters.clusters
    [(entry,)] = [list(e.request_headers_to_add) for e in entries if e.request_headers_to_add]
    assert (entry.header.key, entry.append_action) == ("x-a", APPEND)


def test_a_policy_with_only_added_headers_is_not_empty() -> None:
    assert not HeadersPolicy(add=(HeaderValue(name="x", value="y"),)).is_empty()
    assert HeadersPolicy().is_empty()


def test_regex_rewrite_of_the_path() -> None:
    action = one_route(prefix(regex_rewrite=RegexRewrite(pattern="^/.*$", substitution="/full"))).route
    assert action.regex_rewrite.pattern.regex == "^/.*$"
    assert action.regex_rewrite.substitution == "/full"
    assert not action.prefix_rewrite
    assert not one_route(prefix()).route.HasField("regex_rewrite")


def test_redirect_regex_rewrite() -> None:
    rewrite = RegexRewrite(pattern="^/foo/*", substitution="/")
    redirect = one_route(prefix(clusters=(), redirect=Redirect(regex_rewrite=rewrite))).redirect
    assert (redirect.regex_rewrite.pattern.regex, redirect.regex_rewrite.substitution) == ("^/foo/*", "/")
    # path and prefix take precedence, as only one of them may be set
    redirect = one_route(prefix(clusters=(), redirect=Redirect(path="/p", regex_rewrite=rewrite))).redirect
    assert redirect.path_redirect == "/p" and not redirect.HasField("regex_rewrite")


def header(name: str, value: str) -> HeaderMatch:
    return HeaderMatch(name=name, kind=HeaderMatchKind.EXACT, value=value)


def test_precedence_orders_equally_specific_routes_before_their_values() -> None:
    # Without precedence the header names decide (x-a before x-b); with it, the plugin's rank does.
    first = prefix("/", headers=(header("x-b", "1"),), precedence=0)
    second = prefix("/", headers=(header("x-a", "1"),), precedence=1)
    assert sort_routes([first, second]) == [first, second]
    assert sort_routes([second, first]) == [first, second]
    plain = [prefix("/", headers=(header("x-b", "1"),)), prefix("/", headers=(header("x-a", "1"),))]
    assert [r.headers[0].name for r in sort_routes(plain)] == ["x-a", "x-b"]


def test_precedence_never_beats_a_more_specific_match() -> None:
    longer = prefix("/longer", precedence=5)
    exact = attrs.evolve(prefix(precedence=9), path=PathMatch(kind=PathKind.EXACT, value="/"))
    more_headers = prefix("/", headers=(header("x-a", "1"), header("x-b", "1")), precedence=7)
    ranked = prefix("/", headers=(header("x-c", "1"),), precedence=0)
    assert sort_routes([ranked, more_headers, longer, exact]) == [exact, longer, more_headers, ranked]


def test_multi_label_wildcard_host_has_no_authority_regex() -> None:
    dag = new_dag()
    vhost = dag.ensure_virtual_host(HTTP, "*.foo.com")
    vhost.single_label_wildcard = False
    vhost.add_route(prefix("/"))
    (envoy_vhost,) = translate(dag)["ingress_http"].virtual_hosts
    assert list(envoy_vhost.domains) == ["*.foo.com"]
    assert not envoy_vhost.routes[0].match.headers


def test_switching_the_wildcard_rule_retranslates_unchanged_routes() -> None:
    cache = with_builtin_filters(RouteCache(SINGLE))
    route = prefix("/")
    for single, expected in ((True, 1), (False, 0), (True, 1)):
        dag = new_dag()
        vhost = dag.ensure_virtual_host(HTTP, "*.foo.com")
        vhost.single_label_wildcard = single
        vhost.add_route(route)
        (envoy_vhost,) = translate(dag, cache)["ingress_http"].virtual_hosts
        assert len(envoy_vhost.routes[0].match.headers) == expected


def test_route_cors_policy() -> None:
    policy = CORSPolicy(allow_origin=("https://a.example",), allow_methods=("GET",), max_age="5")
    envoy_route = one_route(prefix(cors=policy))
    cors = unpack(envoy_route.typed_per_filter_config[CORS], cors_v3.CorsPolicy)
    assert [o.exact for o in cors.allow_origin_string_match] == ["https://a.example"]
    assert (cors.allow_methods, cors.max_age) == ("GET", "5")
    assert not cors.HasField("forward_not_matching_preflights")  # Envoy's default: forwarded
    assert CORS not in one_route(prefix()).typed_per_filter_config


def test_route_cors_policy_answering_unmatched_preflights() -> None:
    policy = CORSPolicy(allow_origin=("*",), allow_methods=("GET",), forward_unmatched_preflights=False)
    envoy_route = one_route(prefix(cors=policy))
    cors = unpack(envoy_route.typed_per_filter_config[CORS], cors_v3.CorsPolicy)
    assert cors.HasField("forward_not_matching_preflights") and not cors.forward_not_matching_preflights.value
