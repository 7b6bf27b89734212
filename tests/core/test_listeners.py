"""The LDS cache: listeners, filter chains, connection managers, TLS, plus Envoy's own verdict."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from envoy.config.listener.v3 import listener_components_pb2 as listener_components
from envoy.config.listener.v3 import listener_pb2 as listener_v3
from envoy.extensions.filters.http.cors.v3 import cors_pb2 as cors
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2 as local_ratelimit
from envoy.extensions.filters.http.lua.v3 import lua_pb2 as lua
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2 as rbac
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2 as tls_inspector
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2 as tcp_proxy
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2 as tls
from google.protobuf import json_format

from cpx.builtin.filters import with_builtin_filters
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol, VirtualHost
from cpx.dag.dot import to_dot
from cpx.dag.nodes import (
    AuthorityCheck,
    Cluster,
    CookieRewrite,
    CORSPolicy,
    DirectResponse,
    HashPolicy,
    HeaderMatch,
    HeaderMatchKind,
    HeaderValue,
    InternalRedirectPolicy,
    IPFilter,
    IPRule,
    LocalRateLimit,
    PathKind,
    PathMatch,
    Route,
    Secret,
    ServicePort,
    TCPProxy,
    TLSParams,
)
from cpx.ops import certgen
from cpx.xds import resource
from cpx.xds.caches.listeners import ListenerCache
from cpx.xds.caches.routes import RouteCache
from cpx.xds.caches.secrets import SecretCache
from cpx.xds.naming import cluster_name, secret_name

# Contour's single-RouteConfiguration shape: what these tests inspect (the scoped shape's split of
# it is tested in test_scoped_routes.py).
SINGLE = Config(route_shape="single")

HTTP, HTTPS = "ingress_http", "ingress_https"
SECRET = Secret(namespace="default", name="tls", cert_pem=b"cert", key_pem=b"key")
# Every connection manager's filters after the (HTTPS-only) 421 check, in Contour's order.
POLICY_FILTERS = [
    "envoy.filters.http.compressor",
    "envoy.filters.http.grpc_web",
    "envoy.filters.http.grpc_stats",
    "envoy.filters.http.cors",
    "envoy.filters.http.local_ratelimit",
    "envoy.filters.http.lua.cookie_rewrite",
    "envoy.filters.http.rbac",
    "router",
]
FALLBACK = Secret(namespace="projectcontour", name="fallback", cert_pem=b"fb-cert", key_pem=b"fb-key")


def backend(name: str = "svc", weight: int = 1) -> Cluster:
    return Cluster(upstream=ServicePort(namespace="default", name=name, port=80), weight=weight)


def prefix(value: str = "/", **kwargs: Any) -> Route:
    kwargs.setdefault("clusters", (backend(),))
    return Route(path=PathMatch(kind=PathKind.PREFIX, value=value), **kwargs)


def new_dag(http_port: int = 8080, https_port: int = 8443) -> DAG:
    dag = DAG()
    dag.ensure_listener(HTTP, Protocol.HTTP, "0.0.0.0", http_port)
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "0.0.0.0", https_port)
    return dag


def add_secure(dag: DAG, fqdn: str, secret: Secret = SECRET, **fields: Any) -> None:
    svh = dag.ensure_secure_virtual_host(HTTPS, fqdn)
    svh.secret = secret
    for name, value in fields.items():
        setattr(svh, name, value)
    if svh.tcp_proxy is None:
        svh.add_route(prefix())


def translate(dag: DAG, cache: ListenerCache | None = None) -> dict[str, listener_v3.Listener]:
    cache = cache or with_builtin_filters(ListenerCache(SINGLE))
    cache.on_change(dag)
    out = {}
    for name, res in cache.contents().items():
        assert res.name == name and res.type_url == resource.LISTENER
        out[name] = listener_v3.Listener.FromString(res.body)
    return out


def unpack_hcm(chain: listener_components.FilterChain) -> hcm.HttpConnectionManager:
    (network_filter,) = chain.filters
    assert network_filter.name == "envoy.filters.network.http_connection_manager"
    manager = hcm.HttpConnectionManager()
    assert network_filter.typed_config.Unpack(manager)
    return manager


def unpack_tcp(chain: listener_components.FilterChain) -> tcp_proxy.TcpProxy:
    (network_filter,) = chain.filters
    assert network_filter.name == "envoy.filters.network.tcp_proxy"
    proxy = tcp_proxy.TcpProxy()
    assert network_filter.typed_config.Unpack(proxy)
    return proxy


def unpack_tls(chain: listener_components.FilterChain) -> tls.DownstreamTlsContext:
    assert chain.transport_socket.name == "envoy.transport_sockets.tls"
    context = tls.DownstreamTlsContext()
    assert chain.transport_socket.typed_config.Unpack(context)
    return context


def lua_code(manager: hcm.HttpConnectionManager) -> str:
    first = manager.http_filters[0]
    assert first.name == "envoy.filters.http.lua"
    config = lua.Lua()
    assert first.typed_config.Unpack(config)
    code: str = config.default_source_code.inline_string
    return code


# -- plain HTTP ------------------------------------------------------------------------------------


def test_empty_dag_has_no_listeners() -> None:
    dag = new_dag()
    dag.prune()
    assert translate(dag) == {}
    # Not even an unpruned listener without anything to serve: Envoy refuses empty listeners.
    assert translate(new_dag()) == {}


def test_http_listener() -> None:
    dag = new_dag(http_port=8080)
    dag.ensure_virtual_host(HTTP, "example.com").add_route(prefix())
    listeners = translate(dag)
    assert list(listeners) == [HTTP]
    listener = listeners[HTTP]
    assert listener.address.socket_address.address == "0.0.0.0"
    assert listener.address.socket_address.port_value == 8080
    assert not listener.listener_filters
    (chain,) = listener.filter_chains
    assert not chain.HasField("filter_chain_match") and not chain.HasField("transport_socket")
    manager = unpack_hcm(chain)
    assert manager.stat_prefix == HTTP
    assert manager.rds.route_config_name == "ingress_http"
    assert manager.rds.config_source.HasField("ads")
    assert manager.rds.config_source.resource_api_version == 2  # V3
    assert [f.name for f in manager.http_filters] == POLICY_FILTERS
    assert manager.use_remote_address.value and manager.normalize_path.value and manager.merge_slashes
    assert manager.strip_any_host_port and manager.preserve_external_request_id
    assert manager.http_protocol_options.accept_http_10
    assert manager.HasField("request_timeout") and manager.request_timeout.seconds == 0
    assert manager.HasField("common_http_protocol_options")
    assert [log.name for log in manager.access_log] == ["envoy.access_loggers.stdout"]


def test_http_settings_from_config_options() -> None:
    dag = new_dag()
    dag.ensure_virtual_host(HTTP, "example.com").add_route(prefix())
    options = {"connection_idle_timeout": 30.0, "stream_idle_timeout": 120.0, "disable_merge_slashes": True}
    manager = unpack_hcm(
        translate(dag, with_builtin_filters(ListenerCache(Config(options=options, route_shape="single"))))[
            HTTP
        ].filter_chains[0]
    )
    assert manager.common_http_protocol_options.idle_timeout.seconds == 30
    assert manager.stream_idle_timeout.seconds == 120
    assert not manager.merge_slashes


def test_policy_filters_are_inert_at_the_connection_manager() -> None:
    """Contour's filters: nothing happens until a virtual host or route configures them."""
    dag = new_dag()
    dag.ensure_virtual_host(HTTP, "example.com").add_route(prefix())
    add_secure(dag, "example.com")
    listeners = translate(dag)
    for manager in (
        unpack_hcm(listeners[HTTP].filter_chains[0]),
        unpack_hcm(listeners[HTTPS].filter_chains[0]),
    ):
        filters = {f.name: f.typed_config for f in manager.http_filters}
        assert filters["envoy.filters.http.cors"].Unpack(cors.Cors())
        limit = local_ratelimit.LocalRateLimit()
        assert filters["envoy.filters.http.local_ratelimit"].Unpack(limit)
        assert limit.stat_prefix == "http" and not limit.HasField("token_bucket")
        cookie = lua.Lua()
        assert filters["envoy.filters.http.lua.cookie_rewrite"].Unpack(cookie)
        # No script (no Lua VM per chain): routes with cookie rules bring their own.
        assert cookie == lua.Lua()
        rules = rbac.RBAC()
        assert filters["envoy.filters.http.rbac"].Unpack(rules)
        assert not rules.HasField("rules") and not rules.HasField("matcher")  # allow everything
    # The 421 filter keeps the Lua extension's own name, so the cookie rules (keyed by the other
    # filter's name) never replace its script on a route.
    https = unpack_hcm(listeners[HTTPS].filter_chains[0])
    assert [f.name for f in https.http_filters][:2] == [
        "envoy.filters.http.lua",
        "envoy.filters.http.compressor",
    ]


def test_plugin_listener_routes_are_named_after_it() -> None:
    dag = DAG()
    dag.ensure_listener("plugin", Protocol.HTTP, "::", 80)
    dag.ensure_virtual_host("plugin", "example.com").add_route(prefix())
    envoy_listener = translate(dag)["plugin"]
    assert envoy_listener.address.socket_address.ipv4_compat
    assert unpack_hcm(envoy_listener.filter_chains[0]).rds.route_config_name == "plugin"
    assert not envoy_listener.listener_filters  # no TLS to inspect


# -- HTTPS -----------------------------------------------------------------------------------------


def test_https_chain_per_vhost_sorted_by_sni() -> None:
    dag = new_dag()
    for fqdn in ("b.com", "a.com", "*.wild.com"):
        add_secure(dag, fqdn)
    listener = translate(dag)[HTTPS]
    (inspector,) = listener.listener_filters
    assert inspector.name == "envoy.filters.listener.tls_inspector"
    assert inspector.typed_config.Is(tls_inspector.TlsInspector.DESCRIPTOR)
    assert [list(c.filter_chain_match.server_names) for c in listener.filter_chains] == [
        ["*.wild.com"],
        ["a.com"],
        ["b.com"],
    ]
    managers = [unpack_hcm(c) for c in listener.filter_chains]
    assert [m.rds.route_config_name for m in managers] == ["https/*.wild.com", "https/a.com", "https/b.com"]
    assert {m.stat_prefix for m in managers} == {HTTPS}
    for manager in managers:
        assert [f.name for f in manager.http_filters] == ["envoy.filters.http.lua", *POLICY_FILTERS]


def test_misdirected_request_lua() -> None:
    dag = new_dag()
    add_secure(dag, "Example.com")
    add_secure(dag, "*.wild.com")
    wild, exact = (unpack_hcm(c) for c in translate(dag)[HTTPS].filter_chains)
    code = lua_code(exact)
    assert 'local target = "example.com"' in code  # lower-cased, as :authority is
    assert '[":status"] = "421"' in code
    assert 'string.lower(headers:get(":authority")' in code
    assert "requestedServerName()" in lua_code(wild)


def test_downstream_tls_context() -> None:
    dag = new_dag()
    add_secure(dag, "example.com", tls=TLSParams(min_version="1.3"))
    (chain,) = translate(dag)[HTTPS].filter_chains
    context = unpack_tls(chain)
    common = context.common_tls_context
    assert common.tls_params.tls_minimum_protocol_version == tls_common.TlsParameters.TLSv1_3
    assert common.tls_params.tls_maximum_protocol_version == tls_common.TlsParameters.TLSv1_3
    assert not common.tls_params.cipher_suites  # Envoy's defaults
    assert list(common.alpn_protocols) == ["h2", "http/1.1"]
    (sds,) = common.tls_certificate_sds_secret_configs
    assert sds.name == secret_name(SECRET) and sds.sds_config.HasField("ads")
    assert not common.tls_certificates  # no key material in LDS
    assert not context.HasField("require_client_certificate")


def test_min_tls_version_has_a_floor() -> None:
    dag = new_dag()
    add_secure(dag, "example.com", tls=TLSParams(min_version="1.1"))
    params = unpack_tls(translate(dag)[HTTPS].filter_chains[0]).common_tls_context.tls_params
    assert params.tls_minimum_protocol_version == tls_common.TlsParameters.TLSv1_2


def test_passthrough_and_tcp_proxy_vhosts() -> None:
    dag = new_dag()
    add_secure(
        dag, "pass.com", passthrough=True, tcp_proxy=TCPProxy(clusters=(backend("b", 0), backend("a", 0)))
    )
    add_secure(
        dag, "term.com", tcp_proxy=TCPProxy(clusters=(backend("x", 3), backend("y", 0), backend("z", 7)))
    )
    passthrough, terminated = translate(dag)[HTTPS].filter_chains
    assert list(passthrough.filter_chain_match.server_names) == ["pass.com"]
    assert not passthrough.HasField("transport_socket")  # TLS goes through untouched
    proxy = unpack_tcp(passthrough)
    assert proxy.stat_prefix == HTTPS and proxy.idle_timeout.seconds == 9001
    # All weights zero: every cluster, evenly; sorted by name.
    entries = [(c.name, c.weight) for c in proxy.weighted_clusters.clusters]
    assert entries == [(cluster_name(backend("a")), 1), (cluster_name(backend("b")), 1)]
    # Zero-weight clusters are dropped otherwise (TCP weights cannot be zero).
    entries = [(c.name, c.weight) for c in unpack_tcp(terminated).weighted_clusters.clusters]
    assert entries == [(cluster_name(backend("x")), 3), (cluster_name(backend("z")), 7)]
    assert not unpack_tls(terminated).common_tls_context.alpn_protocols  # the backend picks


def test_tcp_listener_proxies_every_connection() -> None:
    dag = DAG()
    tcp = dag.ensure_listener("tcp-9000", Protocol.TCP, "127.0.0.2", 17000)
    tcp.tcp_proxy = TCPProxy(clusters=(backend("a", 7), backend("b", 3)))
    dag.ensure_listener("tcp-9001", Protocol.TCP, "127.0.0.2", 17001)  # nothing to proxy to
    dag.prune()
    assert list(dag.listeners) == ["tcp-9000"]
    assert {c.upstream.name for c in dag.clusters()} == {"a", "b"}  # CDS and EDS get them
    assert "tcpproxy" in to_dot(dag)
    envoy_listener = translate(dag)["tcp-9000"]
    (chain,) = envoy_listener.filter_chains
    assert not chain.HasField("filter_chain_match") and not chain.HasField("transport_socket")
    assert not envoy_listener.listener_filters  # nothing inspected
    proxy = unpack_tcp(chain)
    assert proxy.stat_prefix == "tcp-9000"
    entries = [(c.name, c.weight) for c in proxy.weighted_clusters.clusters]
    assert entries == [(cluster_name(backend("a")), 7), (cluster_name(backend("b")), 3)]


def test_tcp_listener_serves_no_virtual_hosts() -> None:
    dag = DAG()
    dag.ensure_listener("tcp", Protocol.TCP, "0.0.0.0", 9000).tcp_proxy = TCPProxy(clusters=(backend(),))
    dag.ensure_virtual_host("tcp", "example.com").add_route(prefix(clusters=(backend("http"),)))
    dag.prune()
    assert not dag.listeners["tcp"].virtual_hosts
    assert [c.upstream.name for c in dag.clusters()] == ["svc"]
    (chain,) = translate(dag)["tcp"].filter_chains
    assert unpack_tcp(chain).cluster == cluster_name(backend())


def test_fallback_certificate_chain() -> None:
    dag = new_dag()
    add_secure(dag, "b.com", fallback_certificate=FALLBACK)
    add_secure(dag, "a.com", fallback_certificate=FALLBACK)
    add_secure(dag, "c.com")
    chains = translate(dag)[HTTPS].filter_chains
    assert [list(c.filter_chain_match.server_names) for c in chains] == [["a.com"], ["b.com"], ["c.com"], []]
    fallback = chains[-1]
    assert fallback.name == "fallback-certificate"
    assert fallback.filter_chain_match.transport_protocol == "tls"
    manager = unpack_hcm(fallback)
    assert manager.rds.route_config_name == "ingress_fallbackcert"
    # No 421 check: it serves many hosts.
    assert [f.name for f in manager.http_filters] == POLICY_FILTERS
    (sds,) = unpack_tls(fallback).common_tls_context.tls_certificate_sds_secret_configs
    assert sds.name == secret_name(FALLBACK)


def test_catch_all_secure_vhost_matches_any_tls() -> None:
    dag = new_dag()
    add_secure(dag, "*")
    (chain,) = translate(dag)[HTTPS].filter_chains
    assert chain.filter_chain_match.transport_protocol == "tls" and not chain.filter_chain_match.server_names
    assert [f.name for f in unpack_hcm(chain).http_filters] == POLICY_FILTERS


def test_secure_vhost_kept_without_routes_gets_its_chain() -> None:
    dag = new_dag()
    empty = dag.ensure_secure_virtual_host(HTTPS, "*")
    empty.secret = SECRET
    assert not empty.valid()  # without routes, a host is normally dropped
    empty.serve_without_routes = True
    dag.ensure_secure_virtual_host(HTTPS, "nosecret.com").serve_without_routes = True
    dag.prune()
    assert list(dag.listeners[HTTPS].secure_virtual_hosts) == ["*"]
    (chain,) = translate(dag)[HTTPS].filter_chains
    assert not chain.filter_chain_match.server_names


def test_authority_check_replaces_the_sni_rule_even_on_the_catch_all_chain() -> None:
    dag = new_dag()
    add_secure(dag, "*", authority_check=AuthorityCheck(accept="*", refuse=("b.com", "*.c.com")))
    add_secure(dag, "a.com")
    chains = {
        c.filter_chain_match.server_names[0] if c.filter_chain_match.server_names else "*": c
        for c in translate(dag)[HTTPS].filter_chains
    }
    code = lua_code(unpack_hcm(chains["*"]))
    assert 'local accept = "*"' in code and 'local refuse = {"b.com", "*.c.com"}' in code
    assert '"a.com"' in lua_code(unpack_hcm(chains["a.com"]))  # without one: the Host must be the SNI's


def test_unservable_secure_vhosts_are_skipped() -> None:
    dag = new_dag()
    dag.ensure_secure_virtual_host(HTTPS, "nosecret.com").add_route(prefix())
    add_secure(dag, "ok.com")
    chains = translate(dag)[HTTPS].filter_chains
    assert [list(c.filter_chain_match.server_names) for c in chains] == [["ok.com"]]


# -- memoisation -----------------------------------------------------------------------------------


def test_unchanged_listeners_keep_their_resources() -> None:
    def build(extra: str = "") -> DAG:
        dag = new_dag()
        dag.ensure_virtual_host(HTTP, "example.com").add_route(prefix())
        for i in range(5):
            add_secure(dag, f"host{i}.com")
        if extra:
            add_secure(dag, extra)
        return dag

    cache = with_builtin_filters(ListenerCache(SINGLE))
    cache.on_change(build())
    before = dict(cache.contents())
    for res in before.values():
        assert res.message().SerializeToString(deterministic=True) == res.body
    cache.on_change(build())
    assert all(cache.contents()[name] is res for name, res in before.items())
    cache.on_change(build("new.com"))
    assert cache.contents()[HTTP] is before[HTTP]
    assert cache.contents()[HTTPS].version != before[HTTPS].version
    assert len(translate(build("new.com"))[HTTPS].filter_chains) == 6


# -- Envoy's verdict -------------------------------------------------------------------------------


def _envoy() -> str:
    from cpx.testing.envoy import envoy_binary

    try:
        return envoy_binary()
    except FileNotFoundError:
        pytest.skip("no envoy binary")


def _static_cluster(name: str, port: int = 9) -> dict[str, Any]:
    """A cluster of that name with one endpoint (closed by default): enough for routes to validate."""
    endpoint = {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}
    assignment = {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": endpoint}]}]}
    return {"name": name, "type": "STATIC", "connect_timeout": "1s", "load_assignment": assignment}


def static_bootstrap(dag: DAG, admin_port: int = 0, upstream_port: int = 9) -> dict[str, Any]:
    """LDS, RDS and SDS of ``dag`` as one static bootstrap (RDS inlined, SDS as static secrets).

    Every cluster is a static one sending to ``127.0.0.1:<upstream_port>``.
    """
    caches = (
        with_builtin_filters(ListenerCache(SINGLE)),
        with_builtin_filters(RouteCache(SINGLE)),
        SecretCache(Config()),
    )
    for cache in caches:
        cache.on_change(dag)
    listeners, routes, secrets = (
        {n: json_format.MessageToDict(r.message()) for n, r in c.contents().items()} for c in caches
    )

    def inline(node: Any) -> None:
        if isinstance(node, dict):
            if "rds" in node:
                node["routeConfig"] = routes[node.pop("rds")["routeConfigName"]]
            for sds in node.get("tlsCertificateSdsSecretConfigs", ()):
                sds.pop("sdsConfig")  # a name alone refers to a static secret
            for value in node.values():
                inline(value)
        elif isinstance(node, list):
            for value in node:
                inline(value)

    inline(listeners)
    clusters = {cluster_name(c) for c in dag.clusters()}
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {
            "listeners": list(listeners.values()),
            "secrets": list(secrets.values()),
            "clusters": [_static_cluster(name, upstream_port) for name in sorted(clusters)],
        },
    }


@pytest.fixture(scope="module")
def keypair() -> certgen.KeyPair:
    ca = certgen.new_ca()
    return certgen.issue(ca, "example.com", dns_names=["example.com", "*.wild.com"])


def add_policies(vhost: VirtualHost) -> None:
    """Every HTTPProxy policy at once: CORS, rate limits, RBAC allow and deny, cookie rewrites,
    hash policies and internal redirects, at virtual host, route and weighted cluster level."""
    vhost.cors = CORSPolicy(
        allow_origin=("*", "https://a.example.com", "regex:https://[a-z]+\\.example\\.org"),
        allow_methods=("GET", "POST"),
        allow_headers=("authorization",),
        expose_headers=("x-expose",),
        allow_credentials=True,
        max_age="600",
        allow_private_network=True,
    )
    vhost.local_rate_limit = LocalRateLimit(
        requests=100, unit_seconds=1, burst=20, response_headers=(HeaderValue(name="x-limited", value="1"),)
    )
    vhost.ip_filter = IPFilter(allow=True, rules=(IPRule(cidr="10.0.0.0/8"), IPRule(cidr="::1", remote=True)))
    rewrites = (
        CookieRewrite(name="session", path="/app", domain="example.com", secure=True, same_site="Lax"),
    )
    vhost.add_route(
        prefix(
            "/hash",
            clusters=(
                Cluster(
                    upstream=ServicePort(namespace="default", name="h", port=80),
                    load_balancer_policy="RequestHash",
                ),
            ),
            hash_policies=(
                HashPolicy(header="x-user", terminal=True),
                HashPolicy(query_parameter="q"),
                HashPolicy(source_ip=True),
            ),
            cookie_rewrites=rewrites,
        )
    )
    vhost.add_route(
        prefix(
            "/sticky",
            clusters=(
                Cluster(
                    upstream=ServicePort(namespace="default", name="s", port=80),
                    load_balancer_policy="Cookie",
                ),
            ),
            hash_policies=(HashPolicy(cookie="X-Contour-Session-Affinity"),),
        )
    )
    vhost.add_route(
        prefix(
            "/redirects",
            internal_redirect=InternalRedirectPolicy(
                max_internal_redirects=2,
                redirect_response_codes=(301, 302, 307),
                allow_cross_scheme_redirect="SafeOnly",
                deny_repeated_route_redirect=True,
            ),
        )
    )
    vhost.add_route(
        prefix("/always", internal_redirect=InternalRedirectPolicy(allow_cross_scheme_redirect="Always"))
    )
    vhost.add_route(
        prefix(
            "/split",
            clusters=(
                Cluster(
                    upstream=ServicePort(namespace="default", name="a", port=80),
                    cookie_rewrites=(CookieRewrite(name="session", secure=False),),
                ),
                backend("b", 1),
            ),
            cookie_rewrites=rewrites,
            local_rate_limit=LocalRateLimit(requests=1, unit_seconds=60, status_code=503),
            ip_filter=IPFilter(allow=False, rules=(IPRule(cidr="192.168.0.0/16", remote=True),)),
        )
    )


def test_envoy_accepts_generated_config(tmp_path: Path, keypair: certgen.KeyPair) -> None:
    envoy = _envoy()
    secret = Secret(namespace="default", name="tls", cert_pem=keypair.cert_pem, key_pem=keypair.key_pem)
    dag = new_dag()
    vhost = dag.ensure_virtual_host(HTTP, "*.example.com")
    vhost.add_route(
        Route(
            path=PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/api/"),
            clusters=(backend("a", 1), backend("b", 3)),
        )
    )
    vhost.add_route(
        Route(path=PathMatch(kind=PathKind.REGEX, value="/v[0-9]+/.*"), clusters=(backend(),), websocket=True)
    )
    vhost.add_route(
        prefix(
            "/", headers=(HeaderMatch(name="x", kind=HeaderMatchKind.CONTAINS, value="y", ignore_case=True),)
        )
    )
    dag.ensure_virtual_host(HTTP, "*").add_route(prefix(https_redirect=True))
    add_policies(dag.ensure_virtual_host(HTTP, "policies.example.com"))
    add_secure(dag, "example.com", secret=secret, fallback_certificate=secret)
    add_policies(dag.ensure_secure_virtual_host(HTTPS, "example.com"))
    add_secure(dag, "*.wild.com", secret=secret)
    add_secure(
        dag, "pass.com", passthrough=True, tcp_proxy=TCPProxy(clusters=(backend("p", 1), backend("q", 1)))
    )
    add_secure(dag, "db.example.com", secret=secret, tcp_proxy=TCPProxy(clusters=(backend("db"),)))
    dag.ensure_listener("tcp", Protocol.TCP, "127.0.0.1", 9000).tcp_proxy = TCPProxy(clusters=(backend(),))
    dag.prune()
    path = tmp_path / "bootstrap.json"
    path.write_text(json.dumps(static_bootstrap(dag)))
    command = [envoy, "--mode", "validate", "-c", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _status(port: int, sni: str | None, host: str) -> int:
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    if sni is not None:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        raw = context.wrap_socket(raw, server_hostname=sni)
    with raw:
        raw.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        # The status line is enough; waiting for Envoy to close would cost its delayed-close timeout.
        data = b""
        while b"\r\n" not in data:
            chunk = raw.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split()[1])


def test_envoy_serves_sni_and_421(keypair: certgen.KeyPair) -> None:
    """A real Envoy: Host ports are ignored, a Host other than the SNI gets 421, wildcards take one label."""
    _envoy()
    from cpx.testing.envoy import EnvoyProcess, free_port

    secret = Secret(namespace="default", name="tls", cert_pem=keypair.cert_pem, key_pem=keypair.key_pem)
    ok: dict[str, Any] = {"direct_response": DirectResponse(status_code=200, body="ok"), "clusters": ()}
    dag = DAG()
    dag.ensure_listener(HTTP, Protocol.HTTP, "127.0.0.1", http_port := free_port())
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "127.0.0.1", https_port := free_port())
    dag.ensure_virtual_host(HTTP, "example.com").add_route(prefix(**ok))
    for fqdn in ("example.com", "*.wild.com"):
        add_secure(dag, fqdn, secret=secret)
        dag.ensure_secure_virtual_host(HTTPS, fqdn).add_route(prefix(**ok))
    with EnvoyProcess(static_bootstrap(dag)) as envoy:
        from cpx.testing.envoy import wait_for_port

        wait_for_port("127.0.0.1", https_port)
        assert _status(http_port, None, "example.com:8080") == 200
        assert _status(http_port, None, "other.com") == 404
        assert _status(https_port, "example.com", "example.com") == 200
        assert _status(https_port, "example.com", "EXAMPLE.com:443") == 200
        assert _status(https_port, "example.com", "a.wild.com") == 421
        assert _status(https_port, "a.wild.com", "a.wild.com") == 200
        assert _status(https_port, "a.wild.com", "b.wild.com") == 421
        # Envoy's *.wild.com also takes a.b.wild.com; the :authority regex does not.
        assert _status(https_port, "a.b.wild.com", "a.b.wild.com") == 404
        assert envoy.running


def _get(
    port: int, path: str, host: str, sni: str | None = None, method: str = "GET", **headers: str
) -> http.client.HTTPResponse:
    conn: http.client.HTTPConnection
    if sni is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    else:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
        conn.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=sni)
    conn.request(method, path, headers={"Host": host, **headers})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def _set_cookies(*cookies: str) -> str:
    return "?" + urlencode([("response_header", f"Set-Cookie: {c}") for c in cookies])


def test_envoy_enforces_http_policies(keypair: certgen.KeyPair) -> None:
    """A real Envoy: the cookie-rewrite Lua, rate limit, RBAC and CORS do what Contour's do, and a
    route's cookie rules leave the 421 check of its HTTPS filter chain alone."""
    _envoy()
    from cpx.testing.backends import EchoServer
    from cpx.testing.envoy import EnvoyProcess, free_port, wait_for_port

    secret = Secret(namespace="default", name="tls", cert_pem=keypair.cert_pem, key_pem=keypair.key_pem)
    rules = (
        CookieRewrite(name="session", path="/app", domain="example.com", secure=False, same_site="Strict"),
        CookieRewrite(name="other", secure=True),
    )
    own = Cluster(
        upstream=ServicePort(namespace="default", name="own", port=80),
        cookie_rewrites=(CookieRewrite(name="session", secure=True),),
    )
    dag = DAG()
    dag.ensure_listener(HTTP, Protocol.HTTP, "127.0.0.1", http_port := free_port())
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "127.0.0.1", https_port := free_port())
    vhost = dag.ensure_virtual_host(HTTP, "example.com")
    vhost.cors = CORSPolicy(
        allow_origin=("https://a.example.com",), allow_methods=("GET", "PUT"), max_age="60"
    )
    vhost.ip_filter = IPFilter(allow=True, rules=(IPRule(cidr="127.0.0.0/8"),))
    vhost.add_route(prefix("/cookies", cookie_rewrites=rules))
    vhost.add_route(prefix("/split", clusters=(own,), cookie_rewrites=rules))
    limited = LocalRateLimit(
        requests=1, unit_seconds=3600, response_headers=(HeaderValue(name="x-limited", value="yes"),)
    )
    vhost.add_route(prefix("/limited", local_rate_limit=limited))
    vhost.add_route(prefix("/denied", ip_filter=IPFilter(allow=False, rules=(IPRule(cidr="127.0.0.1"),))))
    vhost.add_route(prefix("/elsewhere", ip_filter=IPFilter(allow=True, rules=(IPRule(cidr="10.0.0.0/8"),))))
    vhost.add_route(prefix("/"))
    add_secure(dag, "*.wild.com", secret=secret)
    dag.ensure_secure_virtual_host(HTTPS, "*.wild.com").add_route(prefix("/", cookie_rewrites=rules))
    with EchoServer() as echo, EnvoyProcess(static_bootstrap(dag, upstream_port=echo.port)) as envoy:
        wait_for_port("127.0.0.1", https_port)
        query = _set_cookies(
            "session=abc; path=/old; HttpOnly; secure; SameSite=None", "other=x; Path=/", "keep=1; Secure"
        )
        cookies = _get(http_port, "/cookies" + query, "example.com").headers.get_all("set-cookie")
        assert cookies == [
            "session=abc; Path=/app; HttpOnly; SameSite=Strict; Domain=example.com",
            "other=x; Path=/; Secure",
            "keep=1; Secure",  # no rule: untouched
        ]
        # The service's rule (Secure) merged over the route's.
        split = _get(http_port, "/split" + _set_cookies("session=abc"), "example.com").headers.get_all(
            "set-cookie"
        )
        assert split == ["session=abc; Path=/app; Domain=example.com; Secure; SameSite=Strict"]
        plain = _get(http_port, "/plain" + query, "example.com").headers.get_all("set-cookie")
        assert plain
        assert plain[0].startswith("session=abc; path=/old")

        assert _get(http_port, "/limited", "example.com").status == 200
        limited_response = _get(http_port, "/limited", "example.com")
        assert limited_response.status == 429 and limited_response.headers["x-limited"] == "yes"
        assert _get(http_port, "/", "example.com").status == 200  # the virtual host has no limit

        assert _get(http_port, "/denied", "example.com").status == 403
        assert _get(http_port, "/elsewhere", "example.com").status == 403  # overrides the vhost's allow

        preflight = _get(
            http_port,
            "/",
            "example.com",
            method="OPTIONS",
            Origin="https://A.example.com",
            **{"Access-Control-Request-Method": "PUT"},
        )
        assert preflight.status == 200
        assert preflight.headers["access-control-allow-origin"] == "https://A.example.com"
        assert preflight.headers["access-control-allow-methods"] == "GET,PUT"
        assert preflight.headers["access-control-max-age"] == "60"
        other_origin = _get(http_port, "/", "example.com", Origin="https://evil.com")
        assert "access-control-allow-origin" not in other_origin.headers

        wild = _get(https_port, "/" + _set_cookies("other=x"), "a.wild.com", sni="a.wild.com")
        assert wild.status == 200 and wild.headers.get_all("set-cookie") == ["other=x; Secure"]
        # The route's cookie rules must not replace the 421 filter's script (same Lua extension).
        assert _get(https_port, "/", "b.wild.com", sni="a.wild.com").status == 421
        assert envoy.running
