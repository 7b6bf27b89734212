"""The RDS cache: RouteConfiguration names, virtual hosts, matches, actions and memoisation."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2 as core_base
from envoy.config.rbac.v3 import rbac_pb2 as rbac_config_v3
from envoy.config.route.v3 import route_components_pb2 as route_components
from envoy.config.route.v3 import route_pb2 as route_v3
from envoy.extensions.filters.http.cors.v3 import cors_pb2 as cors_v3
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2 as local_ratelimit_v3
from envoy.extensions.filters.http.lua.v3 import lua_pb2 as lua_v3
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2 as rbac_v3
from envoy.extensions.internal_redirect.previous_routes.v3 import (
    previous_routes_config_pb2 as previous_routes_v3,
)
from envoy.extensions.internal_redirect.safe_cross_scheme.v3 import (
    safe_cross_scheme_config_pb2 as safe_cross_scheme_v3,
)
from envoy.type.v3 import percent_pb2 as percent
from google.protobuf import json_format

import cpx.xds.caches.routes as routes_module
from cpx.builtin.filters import with_builtin_filters
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import (
    Cluster,
    CookieRewrite,
    CORSPolicy,
    DirectResponse,
    Duration,
    FailedShare,
    HashPolicy,
    HeaderMatch,
    HeaderMatchKind,
    HeadersPolicy,
    HeaderValue,
    InternalRedirectPolicy,
    IPFilter,
    IPRule,
    LocalRateLimit,
    MirrorPolicy,
    PathKind,
    PathMatch,
    QueryMatch,
    QueryMatchKind,
    Redirect,
    RetryPolicy,
    Route,
    Secret,
    ServicePort,
    TCPProxy,
    TimeoutPolicy,
)
from cpx.xds import resource
from cpx.xds.caches.routes import RouteCache
from cpx.xds.envoy.filters import COOKIE_REWRITE_LUA
from cpx.xds.envoy.route import build_route
from cpx.xds.naming import FAILED_SHARE_CLUSTER, cluster_name

# Contour's single-RouteConfiguration shape: what these tests inspect (the scoped shape's split of
# it is tested in test_scoped_routes.py).
SINGLE = Config(route_shape="single")

HTTP, HTTPS = "ingress_http", "ingress_https"
SECRET = Secret(namespace="default", name="tls", cert_pem=b"cert", key_pem=b"key")
RC = route_components.RedirectAction


def backend(name: str = "svc", weight: int = 1, **kwargs: Any) -> Cluster:
    return Cluster(upstream=ServicePort(namespace="default", name=name, port=80), weight=weight, **kwargs)


def prefix(value: str = "/", **kwargs: Any) -> Route:
    kwargs.setdefault("clusters", (backend(),))
    return Route(path=PathMatch(kind=PathKind.PREFIX, value=value), **kwargs)


def new_dag() -> DAG:
    dag = DAG()
    dag.ensure_listener(HTTP, Protocol.HTTP, "0.0.0.0", 8080)
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "0.0.0.0", 8443)
    return dag


def translate(dag: DAG, cache: RouteCache | None = None) -> dict[str, route_v3.RouteConfiguration]:
    cache = cache or with_builtin_filters(RouteCache(SINGLE))
    cache.on_change(dag)
    out = {}
    for name, res in cache.contents().items():
        assert res.name == name and res.type_url == resource.ROUTE
        msg = route_v3.RouteConfiguration()
        msg.ParseFromString(res.body)
        out[name] = msg
    return out


def one_route(route: Route, fqdn: str = "example.com") -> route_components.Route:
    dag = new_dag()
    dag.ensure_virtual_host(HTTP, fqdn).add_route(route)
    (vhost,) = translate(dag)["ingress_http"].virtual_hosts
    (envoy_route,) = vhost.routes
    return envoy_route


# -- names and virtual hosts -----------------------------------------------------------------------


def test_ingress_http_always_emitted() -> None:
    configs = translate(DAG())
    assert list(configs) == ["ingress_http"]
    assert not configs["ingress_http"].virtual_hosts
    # Contour stamps requests with their start time.
    (header,) = configs["ingress_http"].request_headers_to_add
    assert header.header.key == "x-request-start"
    assert header.append_action == core_base.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD


def test_virtual_hosts_sorted_with_domains() -> None:
    dag = new_dag()
    for fqdn in ("b.example.com", "*", "a.example.com"):
        dag.ensure_virtual_host(HTTP, fqdn).add_route(prefix())
    vhosts = translate(dag)["ingress_http"].virtual_hosts
    assert [v.name for v in vhosts] == ["*", "a.example.com", "b.example.com"]
    assert [list(v.domains) for v in vhosts] == [["*"], ["a.example.com"], ["b.example.com"]]


def test_long_vhost_name_is_hashed_domain_is_not() -> None:
    fqdn = "a-very-long-host-name-that-goes-on-and-on." * 2 + "example.com"
    dag = new_dag()
    dag.ensure_virtual_host(HTTP, fqdn).add_route(prefix())
    (vhost,) = translate(dag)["ingress_http"].virtual_hosts
    assert len(vhost.name) <= 60 and vhost.name != fqdn
    assert list(vhost.domains) == [fqdn]


def test_wildcard_vhost_restricts_to_one_label() -> None:
    dag = new_dag()
    vhost = dag.ensure_virtual_host(HTTP, "*.foo.com")
    vhost.add_route(prefix("/", headers=(HeaderMatch(name="x-a", kind=HeaderMatchKind.PRESENT),)))
    vhost.add_route(prefix("/api"))
    (envoy_vhost,) = translate(dag)["ingress_http"].virtual_hosts
    assert list(envoy_vhost.domains) == ["*.foo.com"]
    assert [r.match.prefix for r in envoy_vhost.routes] == ["/api", "/"]
    for envoy_route in envoy_vhost.routes:
        authority = envoy_route.match.headers[0]  # ":authority" sorts before other names
        assert authority.name == ":authority"
        assert authority.string_match.safe_regex.regex == r"(?i)^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.foo\.com"
    assert [h.name for h in envoy_vhost.routes[1].match.headers] == [":authority", "x-a"]


def test_secure_vhosts_get_their_own_configs() -> None:
    dag = new_dag()
    dag.ensure_virtual_host(HTTP, "example.com").add_route(prefix())
    for fqdn in ("example.com", "other.com"):
        svh = dag.ensure_secure_virtual_host(HTTPS, fqdn)
        svh.secret = SECRET
        svh.add_route(prefix("/secure"))
    tcp = dag.ensure_secure_virtual_host(HTTPS, "tcp.com")
    tcp.passthrough, tcp.tcp_proxy = True, TCPProxy(clusters=(backend(),))
    configs = translate(dag)
    assert sorted(configs) == ["https/example.com", "https/other.com", "ingress_http"]
    (vhost,) = configs["https/other.com"].virtual_hosts
    assert vhost.name == "other.com" and vhost.routes[0].match.prefix == "/secure"


def test_secure_vhost_kept_without_routes_has_an_empty_config() -> None:
    dag = new_dag()
    svh = dag.ensure_secure_virtual_host(HTTPS, "*")
    svh.secret, svh.serve_without_routes = SECRET, True
    (vhost,) = translate(dag)["https/*"].virtual_hosts
    assert list(vhost.domains) == ["*"] and not vhost.routes  # Envoy answers every request 404


def test_secure_vhost_config_serves_the_hosts_it_names_too() -> None:
    dag = new_dag()
    for fqdn in ("a.com", "b.com"):
        svh = dag.ensure_secure_virtual_host(HTTPS, fqdn)
        svh.secret = SECRET
        svh.add_route(prefix())
    catch_all = dag.ensure_secure_virtual_host(HTTPS, "*")
    catch_all.secret, catch_all.serve_without_routes = SECRET, True
    catch_all.serves_hosts_of = ("b.com", "gone.com")  # a name no host has is left out
    configs = translate(dag)
    assert [v.name for v in configs["https/*"].virtual_hosts] == ["*", "b.com"]
    assert [v.name for v in configs["https/b.com"].virtual_hosts] == ["b.com"]


def test_fallback_config_holds_vhosts_with_fallback_certificate() -> None:
    dag = new_dag()
    for fqdn, fallback in (("b.com", True), ("a.com", True), ("c.com", False)):
        svh = dag.ensure_secure_virtual_host(HTTPS, fqdn)
        svh.secret = SECRET
        svh.fallback_certificate = SECRET if fallback else None
        svh.add_route(prefix())
    configs = translate(dag)
    assert [v.name for v in configs["ingress_fallbackcert"].virtual_hosts] == ["a.com", "b.com"]


def test_plugin_listener_names() -> None:
    dag = DAG()
    dag.ensure_listener("plugin-http", Protocol.HTTP, "0.0.0.0", 80)
    dag.ensure_virtual_host("plugin-http", "example.com").add_route(prefix())
    dag.ensure_listener("plugin-https", Protocol.HTTPS, "0.0.0.0", 443)
    svh = dag.ensure_secure_virtual_host("plugin-https", "example.com")
    svh.secret = SECRET
    svh.add_route(prefix())
    # The static ingress_http is always served (Envoy's static listener waits for it); a plugin
    # listener's secure RouteConfigurations carry its name, so that two listeners never share one.
    assert sorted(translate(dag)) == ["ingress_http", "plugin-http", "plugin-https/https/example.com"]


# -- matches ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "field", "expected"),
    [
        (PathKind.PREFIX, "/foo/", "prefix", "/foo/"),
        (PathKind.SEGMENT_PREFIX, "/foo/", "path_separated_prefix", "/foo"),
        (PathKind.SEGMENT_PREFIX, "/foo", "path_separated_prefix", "/foo"),
        (PathKind.SEGMENT_PREFIX, "/", "prefix", "/"),
        (PathKind.EXACT, "/foo", "path", "/foo"),
    ],
)
def test_path_matches(kind: PathKind, value: str, field: str, expected: str) -> None:
    match = one_route(Route(path=PathMatch(kind=kind, value=value), clusters=(backend(),))).match
    assert match.WhichOneof("path_specifier") == field
    assert getattr(match, field) == expected


def test_regex_path_is_anchored_re2() -> None:
    match = one_route(
        Route(path=PathMatch(kind=PathKind.REGEX, value="/v[0-9]+/.*"), clusters=(backend(),))
    ).match
    assert match.safe_regex.regex == "^/v[0-9]+/.*"
    assert not match.safe_regex.HasField("google_re2")  # deprecated; RE2 is the default engine


def test_header_matchers() -> None:
    headers = (
        HeaderMatch(name="a-exact", kind=HeaderMatchKind.EXACT, value="v", ignore_case=True),
        HeaderMatch(name="b-regex", kind=HeaderMatchKind.REGEX, value="v.*"),
        HeaderMatch(name="c-contains", kind=HeaderMatchKind.CONTAINS, value="v", invert=True),
        HeaderMatch(name="d-exact", kind=HeaderMatchKind.EXACT, value="s", treat_missing_as_empty=True),
        HeaderMatch(name="f-present", kind=HeaderMatchKind.PRESENT, invert=True),
    )
    matchers = one_route(prefix("/", headers=tuple(reversed(headers)))).match.headers
    assert [m.name for m in matchers] == [h.name for h in headers]
    exact, regex, contains, missing, present = matchers
    assert exact.string_match.exact == "v" and exact.string_match.ignore_case
    assert regex.string_match.safe_regex.regex == "v.*"
    assert contains.string_match.contains == "v" and contains.invert_match
    assert missing.string_match.exact == "s" and missing.treat_missing_header_as_empty
    assert present.present_match and present.invert_match


def test_query_matchers() -> None:
    query = (
        QueryMatch(name="a", kind=QueryMatchKind.EXACT, value="1", ignore_case=True),
        QueryMatch(name="b", kind=QueryMatchKind.REGEX, value="[0-9]"),
        QueryMatch(name="c", kind=QueryMatchKind.PREFIX, value="p"),
        QueryMatch(name="d", kind=QueryMatchKind.SUFFIX, value="s"),
        QueryMatch(name="e", kind=QueryMatchKind.CONTAINS, value="c"),
        QueryMatch(name="f", kind=QueryMatchKind.PRESENT),
    )
    matchers = one_route(prefix("/", query=tuple(reversed(query)))).match.query_parameters
    assert [m.name for m in matchers] == ["a", "b", "c", "d", "e", "f"]
    a, b, c, d, e, f = matchers
    assert a.string_match.exact == "1" and a.string_match.ignore_case
    assert b.string_match.safe_regex.regex == "[0-9]"
    assert c.string_match.prefix == "p" and d.string_match.suffix == "s" and e.string_match.contains == "c"
    assert f.present_match


def test_routes_sorted_per_contour() -> None:
    dag = new_dag()
    vhost = dag.ensure_virtual_host(HTTP, "example.com")
    vhost.add_route(prefix("/"))
    vhost.add_route(Route(path=PathMatch(kind=PathKind.EXACT, value="/exact"), clusters=(backend(),)))
    vhost.add_route(prefix("/api"))
    vhost.add_route(Route(path=PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/api"), clusters=(backend(),)))
    vhost.add_route(
        prefix("/api", headers=(HeaderMatch(name=":method", kind=HeaderMatchKind.EXACT, value="GET"),))
    )
    (envoy_vhost,) = translate(dag)["ingress_http"].virtual_hosts
    summary = [(r.match.WhichOneof("path_specifier"), len(r.match.headers)) for r in envoy_vhost.routes]
    assert summary == [
        ("path", 0),
        ("path_separated_prefix", 0),
        ("prefix", 1),  # same string prefix: the :method match first
        ("prefix", 0),
        ("prefix", 0),
    ]
    assert envoy_vhost.routes[-1].match.prefix == "/"


# -- actions ---------------------------------------------------------------------------------------


def test_single_cluster() -> None:
    action = one_route(prefix()).route
    assert action.cluster == cluster_name(backend())
    assert not action.HasField("timeout") and not action.HasField("retry_policy")


def test_weighted_clusters_sorted_by_name_then_weight() -> None:
    clusters = (backend("c", 10), backend("a", 30), backend("b", 60))
    entries = one_route(prefix(clusters=clusters)).route.weighted_clusters.clusters
    assert [(e.name, e.weight.value) for e in entries] == [
        (cluster_name(backend("a")), 30),
        (cluster_name(backend("b")), 60),
        (cluster_name(backend("c")), 10),
    ]


def test_all_zero_weights_split_evenly() -> None:
    entries = one_route(prefix(clusters=(backend("a", 0), backend("b", 0)))).route.weighted_clusters.clusters
    assert [e.weight.value for e in entries] == [1, 1]
    # Some zero weights are kept as they are (that backend gets no traffic).
    entries = one_route(prefix(clusters=(backend("a", 0), backend("b", 5)))).route.weighted_clusters.clusters
    assert [e.weight.value for e in entries] == [0, 5]


def test_per_cluster_headers_on_weighted_entries() -> None:
    policy = HeadersPolicy(
        set=(HeaderValue(name="x-set", value="1"),), remove=("x-gone",), host_rewrite="up.local"
    )
    response = HeadersPolicy(set=(HeaderValue(name="x-resp", value="2"),))
    # One cluster with its own header policy still needs the weighted form (Contour's rule).
    action = one_route(prefix(clusters=(backend(request_headers=policy, response_headers=response),))).route
    (entry,) = action.weighted_clusters.clusters
    assert entry.request_headers_to_add[0].header.key == "x-set"
    assert list(entry.request_headers_to_remove) == ["x-gone"]
    assert entry.host_rewrite_literal == "up.local"
    assert entry.response_headers_to_add[0].header.key == "x-resp"


def test_no_clusters_answers_503() -> None:
    envoy_route = one_route(prefix(clusters=()))
    assert envoy_route.WhichOneof("action") == "direct_response"
    assert envoy_route.direct_response.status == 503


def test_failed_share_is_a_weighted_entry_envoy_answers() -> None:
    # One cluster plus the failed share: the weighted form, the failed entry naming no real cluster.
    failed = FailedShare(weight=3)
    action = one_route(prefix(clusters=(backend("a", 1),), failed_share=failed)).route
    assert [(e.name, e.weight.value) for e in action.weighted_clusters.clusters] == [
        (FAILED_SHARE_CLUSTER, 3),
        (cluster_name(backend("a")), 1),
    ]
    assert action.cluster_not_found_response_code == route_components.RouteAction.INTERNAL_SERVER_ERROR
    gone = FailedShare(weight=1, status_code=503)
    action = one_route(prefix(clusters=(backend("a"),), failed_share=gone)).route
    assert action.cluster_not_found_response_code == route_components.RouteAction.SERVICE_UNAVAILABLE
    # Without one the default (503) stays implicit.
    assert not one_route(prefix(clusters=(backend("a"), backend("b")))).route.cluster_not_found_response_code


def test_failed_share_alone_is_a_direct_response() -> None:
    envoy_route = one_route(prefix(clusters=(), failed_share=FailedShare(weight=2)))
    assert envoy_route.WhichOneof("action") == "direct_response"
    assert envoy_route.direct_response.status == 500


@pytest.mark.parametrize("bad", [{"weight": 0}, {"weight": 1, "status_code": 502}])
def test_failed_share_takes_what_envoy_can_answer(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        FailedShare(**bad)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (301, RC.MOVED_PERMANENTLY),
        (302, RC.FOUND),
        (303, RC.SEE_OTHER),
        (307, RC.TEMPORARY_REDIRECT),
        (308, RC.PERMANENT_REDIRECT),
    ],
)
def test_redirect_codes(code: int, expected: int) -> None:
    assert one_route(prefix(redirect=Redirect(status_code=code))).redirect.response_code == expected


def test_redirect_fields() -> None:
    full = Redirect(scheme="https", hostname="new.com", port=8443, path="/new", status_code=301)
    redirect = one_route(prefix(redirect=full)).redirect
    assert (redirect.scheme_redirect, redirect.host_redirect, redirect.port_redirect) == (
        "https",
        "new.com",
        8443,
    )
    assert redirect.path_redirect == "/new"
    assert one_route(prefix(redirect=Redirect(prefix="/p"))).redirect.prefix_rewrite == "/p"


def test_direct_response() -> None:
    envoy_route = one_route(prefix(direct_response=DirectResponse(status_code=418, body="teapot")))
    assert envoy_route.direct_response.status == 418
    assert envoy_route.direct_response.body.inline_string == "teapot"
    assert not one_route(prefix(direct_response=DirectResponse(status_code=204))).direct_response.HasField(
        "body"
    )


def test_https_redirect_only_on_insecure_vhost() -> None:
    dag = new_dag()
    route = prefix(https_redirect=True)
    dag.ensure_virtual_host(HTTP, "example.com").add_route(route)
    svh = dag.ensure_secure_virtual_host(HTTPS, "example.com")
    svh.secret = SECRET
    svh.add_route(route)
    configs = translate(dag)
    insecure = configs["ingress_http"].virtual_hosts[0].routes[0]
    assert insecure.redirect.https_redirect and insecure.redirect.response_code == RC.MOVED_PERMANENTLY
    secure = configs["https/example.com"].virtual_hosts[0].routes[0]
    assert secure.route.cluster == cluster_name(backend())


def test_timeouts() -> None:
    infinite = one_route(prefix(timeout_policy=TimeoutPolicy(response=Duration(seconds=None)))).route
    assert infinite.HasField("timeout") and infinite.timeout.ToTimedelta().total_seconds() == 0
    timed = one_route(
        prefix(timeout_policy=TimeoutPolicy(response=Duration(seconds=2.5), idle=Duration(seconds=60)))
    )
    assert timed.route.timeout.ToMilliseconds() == 2500
    assert timed.route.idle_timeout.seconds == 60


def test_retry_policy() -> None:
    policy = RetryPolicy(
        retry_on="5xx,gateway-error",
        num_retries=3,
        per_try_timeout=Duration(seconds=1),
        retriable_status_codes=(502, 503),
    )
    retry = one_route(prefix(retry_policy=policy)).route.retry_policy
    assert retry.retry_on == "5xx,gateway-error" and retry.num_retries.value == 3
    assert retry.per_try_timeout.seconds == 1 and list(retry.retriable_status_codes) == [502, 503]
    # No retry_on: no policy at all (Contour's rule); zero retries are sent explicitly (disabled).
    assert not one_route(prefix(retry_policy=RetryPolicy(retry_on=""))).route.HasField("retry_policy")
    zero = one_route(prefix(retry_policy=RetryPolicy(num_retries=0))).route.retry_policy
    assert zero.HasField("num_retries") and zero.num_retries.value == 0
    assert not zero.HasField("retry_back_off")  # Envoy's default backoff
    backoff = one_route(prefix(retry_policy=RetryPolicy(backoff=0.1))).route.retry_policy.retry_back_off
    assert backoff.base_interval.nanos == 100_000_000 and not backoff.HasField("max_interval")
    with pytest.raises(ValueError):
        RetryPolicy(backoff=0.001)  # Envoy wants more than 1 ms


def test_websocket_and_prefix_rewrite() -> None:
    action = one_route(prefix(websocket=True, prefix_rewrite="/new")).route
    assert [u.upgrade_type for u in action.upgrade_configs] == ["websocket"]
    assert action.prefix_rewrite == "/new"
    assert not one_route(prefix()).route.upgrade_configs


def test_route_header_policies() -> None:
    request = HeadersPolicy(
        set=(HeaderValue(name="x-b", value="2"), HeaderValue(name="x-a", value="1")),
        remove=("x-drop",),
        host_rewrite="backend.local",
    )
    response = HeadersPolicy(set=(HeaderValue(name="x-r", value="r"),), remove=("server",))
    envoy_route = one_route(prefix(request_headers=request, response_headers=response))
    added = [(h.header.key, h.append_action) for h in envoy_route.request_headers_to_add]
    overwrite = core_base.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
    assert added == [("x-a", overwrite), ("x-b", overwrite)]
    assert list(envoy_route.request_headers_to_remove) == ["x-drop"]
    assert [h.header.key for h in envoy_route.response_headers_to_add] == ["x-r"]
    assert list(envoy_route.response_headers_to_remove) == ["server"]
    assert envoy_route.route.host_rewrite_literal == "backend.local"
    by_header = one_route(prefix(request_headers=HeadersPolicy(host_rewrite_header="x-host"))).route
    assert by_header.host_rewrite_header == "x-host"


def test_mirrors() -> None:
    mirrors = (MirrorPolicy(cluster=backend("m1")), MirrorPolicy(cluster=backend("m2"), percent=12.5))
    policies = one_route(prefix(mirrors=mirrors)).route.request_mirror_policies
    assert [p.cluster for p in policies] == [cluster_name(backend("m1")), cluster_name(backend("m2"))]
    full, partial = (p.runtime_fraction.default_value for p in policies)
    assert (full.numerator, full.denominator) == (100, percent.FractionalPercent.HUNDRED)
    assert (partial.numerator, partial.denominator) == (125_000, percent.FractionalPercent.MILLION)


# -- memoisation -----------------------------------------------------------------------------------


def big_dag(changed: str = "") -> DAG:
    dag = new_dag()
    for v in range(20):
        vhost = dag.ensure_virtual_host(HTTP, f"host{v}.example.com")
        for r in range(5):
            vhost.add_route(prefix(f"/p{r}", clusters=(backend(f"svc{r}"),)))
    svh = dag.ensure_secure_virtual_host(HTTPS, "secure.com")
    svh.secret = SECRET
    svh.add_route(prefix("/s" + changed))
    return dag


def test_body_is_canonical_serialisation() -> None:
    cache = with_builtin_filters(RouteCache(SINGLE))
    cache.on_change(big_dag())
    for res in cache.contents().values():
        assert res.message().SerializeToString(deterministic=True) == res.body


def test_unchanged_dag_keeps_resources_and_translates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Route] = []
    real = build_route

    def counting(route: Route, *args: Any) -> route_components.Route:
        calls.append(route)
        return real(route, *args)

    monkeypatch.setattr(routes_module, "build_route", counting)
    cache = with_builtin_filters(RouteCache(SINGLE))
    cache.on_change(big_dag())
    assert len(calls) == 101
    before = dict(cache.contents())
    calls.clear()
    cache.on_change(big_dag())  # equal values, new objects
    assert calls == []
    assert all(cache.contents()[name] is res for name, res in before.items())

    # One route changes in one virtual host: only that route is translated again.
    changed = big_dag()
    changed.ensure_virtual_host(HTTP, "host7.example.com").add_route(prefix("/new"))
    cache.on_change(changed)
    assert [r.path.value for r in calls] == ["/new"]
    after = cache.contents()
    assert after["https/secure.com"] is before["https/secure.com"]
    assert after["ingress_http"].version != before["ingress_http"].version
    vhosts = translate(changed)["ingress_http"].virtual_hosts
    assert route_v3.RouteConfiguration.FromString(after["ingress_http"].body).virtual_hosts == vhosts


def test_removed_resources_disappear() -> None:
    cache = with_builtin_filters(RouteCache(SINGLE))
    cache.on_change(big_dag())
    assert "https/secure.com" in cache.contents()
    dag = new_dag()
    dag.ensure_virtual_host(HTTP, "only.com").add_route(prefix())
    cache.on_change(dag)
    assert list(cache.contents()) == ["ingress_http"]


# -- HTTPProxy policies: virtual host level --------------------------------------------------------

CORS = "envoy.filters.http.cors"
RATELIMIT = "envoy.filters.http.local_ratelimit"
RBAC = "envoy.filters.http.rbac"
COOKIES = "envoy.filters.http.lua.cookie_rewrite"


def unpack(packed: Any, cls: type[Any]) -> Any:
    msg = cls()
    assert packed.Unpack(msg), f"{packed.type_url} is not {cls.DESCRIPTOR.full_name}"
    return msg


def vhost_with(**policies: Any) -> route_components.VirtualHost:
    dag = new_dag()
    vhost = dag.ensure_virtual_host(HTTP, "example.com")
    vhost.add_route(prefix())
    for name, value in policies.items():
        setattr(vhost, name, value)
    (envoy_vhost,) = translate(dag)["ingress_http"].virtual_hosts
    return envoy_vhost


def test_vhost_without_policies_has_no_per_filter_config() -> None:
    assert not vhost_with().typed_per_filter_config
    assert not one_route(prefix()).typed_per_filter_config


def test_vhost_cors_policy() -> None:
    policy = CORSPolicy(
        allow_origin=("*", "https://a.example.com", "regex:https://.*\\.b\\.com"),
        allow_methods=("GET", "POST", "OPTIONS"),
        allow_headers=("authorization", "x-custom"),
        expose_headers=("x-expose",),
        allow_credentials=True,
        max_age="600",
        allow_private_network=True,
    )
    vhost = vhost_with(cors=policy)
    assert list(vhost.typed_per_filter_config) == [CORS]
    cors = unpack(vhost.typed_per_filter_config[CORS], cors_v3.CorsPolicy)
    star, exact, regex = cors.allow_origin_string_match
    assert star.exact == "*" and star.ignore_case  # Envoy treats "*" as any origin
    assert exact.exact == "https://a.example.com" and exact.ignore_case
    assert regex.WhichOneof("match_pattern") == "safe_regex"
    assert regex.safe_regex.regex == "https://.*\\.b\\.com"
    assert cors.allow_methods == "GET,POST,OPTIONS"
    assert cors.allow_headers == "authorization,x-custom"
    assert cors.expose_headers == "x-expose"
    assert cors.max_age == "600"
    assert cors.allow_credentials.value is True
    assert cors.allow_private_network_access.value is True
    assert not cors.HasField("filter_enabled")  # enabled


def test_vhost_cors_defaults() -> None:
    cors = unpack(
        vhost_with(cors=CORSPolicy(allow_origin=("*",), allow_methods=("GET",))).typed_per_filter_config[
            CORS
        ],
        cors_v3.CorsPolicy,
    )
    assert cors.HasField("allow_credentials") and not cors.allow_credentials.value
    assert cors.HasField("allow_private_network_access") and not cors.allow_private_network_access.value
    assert cors.max_age == "" and cors.allow_headers == "" and cors.expose_headers == ""
    # maxAge 0 disables preflight caching and is sent as such.
    zero = CORSPolicy(allow_origin=("*",), allow_methods=("GET",), max_age="0")
    assert unpack(vhost_with(cors=zero).typed_per_filter_config[CORS], cors_v3.CorsPolicy).max_age == "0"


def test_vhost_local_rate_limit() -> None:
    limit = LocalRateLimit(
        requests=10,
        unit_seconds=60,
        burst=5,
        status_code=503,
        response_headers=(HeaderValue(name="x-b", value="2"), HeaderValue(name="x-a", value="1")),
    )
    vhost = vhost_with(local_rate_limit=limit)
    assert list(vhost.typed_per_filter_config) == [RATELIMIT]
    config = unpack(vhost.typed_per_filter_config[RATELIMIT], local_ratelimit_v3.LocalRateLimit)
    assert config.stat_prefix == "vhost.example.com"
    assert config.token_bucket.max_tokens == 15  # requests + burst
    assert config.token_bucket.tokens_per_fill.value == 10
    assert config.token_bucket.fill_interval.seconds == 60
    for fraction in (config.filter_enabled, config.filter_enforced):
        assert fraction.default_value.numerator == 100
        assert fraction.default_value.denominator == percent.FractionalPercent.HUNDRED
    assert config.status.code == 503
    headers = [(h.header.key, h.header.value, h.append_action) for h in config.response_headers_to_add]
    overwrite = core_base.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
    assert headers == [("x-a", "1", overwrite), ("x-b", "2", overwrite)]


def test_local_rate_limit_defaults_and_unnamed_status() -> None:
    config = unpack(
        vhost_with(local_rate_limit=LocalRateLimit(requests=1, unit_seconds=1)).typed_per_filter_config[
            RATELIMIT
        ],
        local_ratelimit_v3.LocalRateLimit,
    )
    assert config.token_bucket.max_tokens == 1 and config.status.code == 429
    assert not config.response_headers_to_add
    # A code Envoy's StatusCode enum does not name would NACK the whole table: Envoy's 429 instead.
    odd = LocalRateLimit(requests=1, unit_seconds=3600, status_code=420)
    config = unpack(
        vhost_with(local_rate_limit=odd).typed_per_filter_config[RATELIMIT], local_ratelimit_v3.LocalRateLimit
    )
    assert not config.HasField("status")
    assert config.token_bucket.fill_interval.seconds == 3600


def rbac_rules(packed: Any) -> rbac_config_v3.RBAC:
    per_route = unpack(packed, rbac_v3.RBACPerRoute)
    assert per_route.HasField("rbac")  # an empty RBACPerRoute would switch RBAC off
    rules: rbac_config_v3.RBAC = per_route.rbac.rules
    return rules


def test_vhost_ip_allow_filter() -> None:
    ip_filter = IPFilter(
        allow=True,
        rules=(
            IPRule(cidr="10.1.2.3/8"),
            IPRule(cidr="192.168.0.1", remote=True),
            IPRule(cidr="2001:db8::/32"),
        ),
    )
    vhost = vhost_with(ip_filter=ip_filter)
    assert list(vhost.typed_per_filter_config) == [RBAC]
    rules = rbac_rules(vhost.typed_per_filter_config[RBAC])
    assert rules.action == rbac_config_v3.RBAC.ALLOW
    assert list(rules.policies) == ["ip-rules"]
    policy = rules.policies["ip-rules"]
    (permission,) = policy.permissions
    assert permission.any
    peer, remote, v6 = policy.principals
    assert peer.WhichOneof("identifier") == "direct_remote_ip"  # Peer: the socket address
    assert (peer.direct_remote_ip.address_prefix, peer.direct_remote_ip.prefix_len.value) == ("10.0.0.0", 8)
    assert remote.WhichOneof("identifier") == "remote_ip"  # Remote: XFF / PROXY protocol
    assert (remote.remote_ip.address_prefix, remote.remote_ip.prefix_len.value) == ("192.168.0.1", 32)
    assert (v6.direct_remote_ip.address_prefix, v6.direct_remote_ip.prefix_len.value) == ("2001:db8::", 32)


def test_vhost_ip_deny_filter() -> None:
    ip_filter = IPFilter(allow=False, rules=(IPRule(cidr="::1/128", remote=True),))
    rules = rbac_rules(vhost_with(ip_filter=ip_filter).typed_per_filter_config[RBAC])
    assert rules.action == rbac_config_v3.RBAC.DENY
    (principal,) = rules.policies["ip-rules"].principals
    assert (principal.remote_ip.address_prefix, principal.remote_ip.prefix_len.value) == ("::1", 128)


def test_ip_filter_with_no_valid_rule() -> None:
    """No usable range: an allow list allows nobody, a deny list denies nobody (no empty policy)."""
    bad = (IPRule(cidr="not-an-ip"),)
    allow = rbac_rules(vhost_with(ip_filter=IPFilter(allow=True, rules=bad)).typed_per_filter_config[RBAC])
    assert allow.action == rbac_config_v3.RBAC.ALLOW and not allow.policies
    deny = rbac_rules(vhost_with(ip_filter=IPFilter(allow=False, rules=bad)).typed_per_filter_config[RBAC])
    assert deny.action == rbac_config_v3.RBAC.DENY and not deny.policies


def test_vhost_policies_together_on_secure_vhost() -> None:
    dag = new_dag()
    svh = dag.ensure_secure_virtual_host(HTTPS, "secure.com")
    svh.secret = SECRET
    svh.add_route(prefix())
    svh.cors = CORSPolicy(allow_origin=("*",), allow_methods=("GET",))
    svh.local_rate_limit = LocalRateLimit(requests=1, unit_seconds=1)
    svh.ip_filter = IPFilter(allow=True, rules=(IPRule(cidr="10.0.0.0/8"),))
    (vhost,) = translate(dag)["https/secure.com"].virtual_hosts
    assert sorted(vhost.typed_per_filter_config) == [CORS, RATELIMIT, RBAC]
    assert len(vhost.routes) == 1


# -- HTTPProxy policies: route level ---------------------------------------------------------------


def test_route_rate_limit_and_ip_filter_override_the_vhost() -> None:
    dag = new_dag()
    vhost = dag.ensure_virtual_host(HTTP, "example.com")
    vhost.local_rate_limit = LocalRateLimit(requests=100, unit_seconds=1)
    vhost.ip_filter = IPFilter(allow=True, rules=(IPRule(cidr="10.0.0.0/8"),))
    vhost.add_route(prefix("/"))
    vhost.add_route(
        prefix(
            "/own",
            local_rate_limit=LocalRateLimit(requests=2, unit_seconds=3600),
            ip_filter=IPFilter(allow=False, rules=(IPRule(cidr="1.2.3.4"),)),
        )
    )
    (envoy_vhost,) = translate(dag)["ingress_http"].virtual_hosts
    own, plain = envoy_vhost.routes
    assert own.match.prefix == "/own"
    assert not plain.typed_per_filter_config  # inherits the virtual host's
    assert sorted(own.typed_per_filter_config) == [RATELIMIT, RBAC]
    config = unpack(own.typed_per_filter_config[RATELIMIT], local_ratelimit_v3.LocalRateLimit)
    assert config.stat_prefix == "vhost.example.com"
    assert config.token_bucket.max_tokens == 2 and config.token_bucket.fill_interval.seconds == 3600
    rules = rbac_rules(own.typed_per_filter_config[RBAC])
    assert rules.action == rbac_config_v3.RBAC.DENY
    (principal,) = rules.policies["ip-rules"].principals
    assert principal.direct_remote_ip.address_prefix == "1.2.3.4"
    assert principal.direct_remote_ip.prefix_len.value == 32


def test_route_ip_filter_applies_to_any_action() -> None:
    ip_filter = IPFilter(allow=True, rules=(IPRule(cidr="10.0.0.0/8"),))
    direct = one_route(
        prefix(clusters=(), direct_response=DirectResponse(status_code=200), ip_filter=ip_filter)
    )
    assert direct.HasField("direct_response") and list(direct.typed_per_filter_config) == [RBAC]
    redirect = one_route(prefix(clusters=(), redirect=Redirect(hostname="x.com"), ip_filter=ip_filter))
    assert redirect.HasField("redirect") and list(redirect.typed_per_filter_config) == [RBAC]


def test_hash_policies() -> None:
    route = one_route(
        prefix(
            hash_policies=(
                HashPolicy(header="x-user", terminal=True),
                HashPolicy(query_parameter="session"),
                HashPolicy(source_ip=True),
                HashPolicy(cookie="X-Contour-Session-Affinity"),
                HashPolicy(cookie="other", cookie_ttl=3600.5, cookie_path="/app"),
                HashPolicy(),  # no input: dropped (Envoy requires one)
            )
        )
    )
    header, query, source, affinity, other = route.route.hash_policy
    assert header.header.header_name == "x-user" and header.terminal
    assert query.query_parameter.name == "session" and not query.terminal
    assert source.connection_properties.source_ip
    # Contour's Cookie strategy: a session cookie (TTL present and zero) on "/".
    assert affinity.cookie.name == "X-Contour-Session-Affinity"
    assert (
        affinity.cookie.HasField("ttl")
        and affinity.cookie.ttl.seconds == 0
        and affinity.cookie.ttl.nanos == 0
    )
    assert affinity.cookie.path == "/"
    assert other.cookie.ttl.seconds == 3600 and other.cookie.ttl.nanos == 500_000_000
    assert other.cookie.path == "/app"
    assert not one_route(prefix()).route.hash_policy


@pytest.mark.parametrize(
    ("scheme", "allow", "predicates"),
    [
        ("Never", False, []),
        ("Always", True, []),
        ("SafeOnly", True, ["envoy.internal_redirect_predicates.safe_cross_scheme"]),
    ],
)
def test_internal_redirect_policy(scheme: str, allow: bool, predicates: list[str]) -> None:
    policy = InternalRedirectPolicy(
        max_internal_redirects=3, redirect_response_codes=(301, 307), allow_cross_scheme_redirect=scheme
    )
    out = one_route(prefix(internal_redirect=policy)).route.internal_redirect_policy
    assert out.max_internal_redirects.value == 3
    assert list(out.redirect_response_codes) == [301, 307]
    assert out.allow_cross_scheme_redirect is allow
    assert [p.name for p in out.predicates] == predicates
    if predicates:
        unpack(out.predicates[0].typed_config, safe_cross_scheme_v3.SafeCrossSchemeConfig)


def test_internal_redirect_deny_repeated_route() -> None:
    policy = InternalRedirectPolicy(allow_cross_scheme_redirect="SafeOnly", deny_repeated_route_redirect=True)
    out = one_route(prefix(internal_redirect=policy)).route.internal_redirect_policy
    assert out.max_internal_redirects.value == 1
    assert not out.redirect_response_codes  # Envoy's default (302)
    safe, previous = out.predicates
    assert safe.name == "envoy.internal_redirect_predicates.safe_cross_scheme"
    assert previous.name == "envoy.internal_redirect_predicates.previous_routes"
    unpack(previous.typed_config, previous_routes_v3.PreviousRoutesConfig)
    assert not one_route(prefix()).route.HasField("internal_redirect_policy")


def cookie_rules(packed: Any) -> dict[str, Any]:
    per_route = unpack(packed, lua_v3.LuaPerRoute)
    # One constant script; the rules are data.
    assert per_route.source_code.inline_string == COOKIE_REWRITE_LUA
    rules: dict[str, Any] = json_format.MessageToDict(per_route.filter_context)["cookies"]
    return rules


def test_route_cookie_rewrites_keep_a_single_cluster() -> None:
    rewrites = (
        CookieRewrite(name="session", path="/app", domain="example.com", secure=True, same_site="Strict"),
        CookieRewrite(name="other", secure=False),
    )
    route = one_route(prefix(cookie_rewrites=rewrites))
    assert route.route.cluster == cluster_name(backend())
    assert list(route.typed_per_filter_config) == [COOKIES]
    assert cookie_rules(route.typed_per_filter_config[COOKIES]) == {
        "other": {"secure": False},
        "session": {"path": "/app", "domain": "example.com", "secure": True, "same_site": "Strict"},
    }


def test_cluster_cookie_rewrites_merge_over_the_route_on_weighted_entries() -> None:
    route_rules = (
        CookieRewrite(name="s", path="/route", same_site="Lax"),
        CookieRewrite(name="r", secure=True),
    )
    own = backend("own", cookie_rewrites=(CookieRewrite(name="s", path="/svc", domain="svc.com"),))
    route = one_route(prefix(clusters=(own, backend("plain")), cookie_rewrites=route_rules))
    by_name = {c.name: c for c in route.route.weighted_clusters.clusters}
    with_rules, without = by_name[cluster_name(own)], by_name[cluster_name(backend("plain"))]
    # The service's attributes win; the route's fill in the rest.
    assert cookie_rules(with_rules.typed_per_filter_config[COOKIES]) == {
        "r": {"secure": True},
        "s": {"path": "/svc", "domain": "svc.com", "same_site": "Lax"},
    }
    assert not without.typed_per_filter_config  # falls back to the route's own config
    assert cookie_rules(route.typed_per_filter_config[COOKIES]) == {
        "r": {"secure": True},
        "s": {"path": "/route", "same_site": "Lax"},
    }


def test_single_cluster_with_cookie_rewrites_is_weighted() -> None:
    own = backend(cookie_rewrites=(CookieRewrite(name="s", secure=True),))
    route = one_route(prefix(clusters=(own,)))
    (entry,) = route.route.weighted_clusters.clusters
    assert entry.name == cluster_name(own) and entry.weight.value == 1
    assert cookie_rules(entry.typed_per_filter_config[COOKIES]) == {"s": {"secure": True}}
    assert not route.typed_per_filter_config


def test_cookie_rewrites_only_where_an_upstream_answers() -> None:
    rules = (CookieRewrite(name="s", secure=True),)
    route = one_route(
        prefix(clusters=(), direct_response=DirectResponse(status_code=200), cookie_rewrites=rules)
    )
    assert not route.typed_per_filter_config


# -- memoisation with policies ---------------------------------------------------------------------


def policy_dag(cors_origin: str = "*", limit: int = 5) -> DAG:
    dag = new_dag()
    for i in range(3):
        vhost = dag.ensure_virtual_host(HTTP, f"h{i}.com")
        vhost.add_route(prefix("/a"))
        vhost.add_route(prefix("/b", ip_filter=IPFilter(allow=True, rules=(IPRule(cidr="10.0.0.0/8"),))))
    vhost = dag.ensure_virtual_host(HTTP, "h1.com")
    vhost.cors = CORSPolicy(allow_origin=(cors_origin,), allow_methods=("GET",))
    vhost.local_rate_limit = LocalRateLimit(requests=limit, unit_seconds=1)
    svh = dag.ensure_secure_virtual_host(HTTPS, "s.com")
    svh.secret = SECRET
    svh.add_route(prefix())
    svh.ip_filter = IPFilter(allow=False, rules=(IPRule(cidr="1.2.3.4/32"),))
    return dag


def test_vhost_policy_change_reuses_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Route] = []
    real = build_route

    def counting(route: Route, *args: Any) -> route_components.Route:
        calls.append(route)
        return real(route, *args)

    monkeypatch.setattr(routes_module, "build_route", counting)
    cache = with_builtin_filters(RouteCache(SINGLE))
    cache.on_change(policy_dag())
    before = dict(cache.contents())
    assert len(calls) == 7
    for res in before.values():
        assert res.message().SerializeToString(deterministic=True) == res.body  # canonical
    calls.clear()

    cache.on_change(policy_dag())  # equal policies, new objects: nothing changes
    assert calls == [] and all(cache.contents()[n] is r for n, r in before.items())

    cache.on_change(policy_dag(cors_origin="https://x.com", limit=9))  # only vhost policies change
    assert calls == []  # the routes' bytes are reused
    after = cache.contents()
    assert after["https/s.com"] is before["https/s.com"]
    assert after["ingress_http"].body != before["ingress_http"].body
    assert after["ingress_http"].message().SerializeToString(deterministic=True) == after["ingress_http"].body
    assert (
        after["ingress_http"].message()
        == translate(policy_dag(cors_origin="https://x.com", limit=9))["ingress_http"]
    )
    h1 = next(v for v in after["ingress_http"].message().virtual_hosts if v.name == "h1.com")
    cors = unpack(h1.typed_per_filter_config[CORS], cors_v3.CorsPolicy)
    assert cors.allow_origin_string_match[0].exact == "https://x.com"
    limit = unpack(h1.typed_per_filter_config[RATELIMIT], local_ratelimit_v3.LocalRateLimit)
    assert limit.token_bucket.max_tokens == 9

    # A policy removed: back to no per-filter config on that virtual host.
    calls.clear()
    plain = policy_dag()
    plain.ensure_virtual_host(HTTP, "h1.com").cors = None
    plain.ensure_virtual_host(HTTP, "h1.com").local_rate_limit = None
    cache.on_change(plain)
    h1 = next(v for v in cache.contents()["ingress_http"].message().virtual_hosts if v.name == "h1.com")
    assert not h1.typed_per_filter_config and calls == []
