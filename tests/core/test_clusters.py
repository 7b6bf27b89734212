"""CDS: Envoy Clusters from DAG clusters, decoded and checked field by field."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pytest
from envoy.config.cluster.v3 import cluster_pb2 as cluster_v3
from envoy.config.core.v3 import config_source_pb2 as config_source_v3
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common_v3
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2 as tls_v3
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_options_v3
from envoy.type.v3 import http_pb2 as http_type_v3

from cpx.builtin import plugin as builtin
from cpx.config import Config
from cpx.dag import AttachmentKey, Attachments
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import (
    CircuitBreakers,
    Cluster,
    CookieRewrite,
    DNSNameCluster,
    Duration,
    HeadersPolicy,
    HeaderValue,
    HealthCheck,
    PathKind,
    PathMatch,
    Route,
    Secret,
    ServicePort,
    SlowStart,
    TCPProxy,
    UpstreamProtocol,
    UpstreamValidation,
)
from cpx.objects import ObjectKey
from cpx.records import ClusterKindSpec
from cpx.xds import resource
from cpx.xds.caches import clusters as cds
from cpx.xds.caches.clusters import ClusterCache, dns_name_cluster
from cpx.xds.contributions import Contributions
from cpx.xds.naming import cluster_name

HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
KUARD = ServicePort(namespace="default", name="kuard", port=80, port_name="http", target_port=8080)


def _recorded(
    calls: list[Cluster], real: Callable[[Cluster], cluster_v3.Cluster]
) -> Callable[[Cluster], cluster_v3.Cluster]:
    """``real``, noting each Cluster node it translates."""

    def translate(cluster: Cluster) -> cluster_v3.Cluster:
        calls.append(cluster)
        return real(cluster)

    return translate


def dag_of(*clusters: Cluster, extensions: Iterable[StaticNode] = ()) -> DAG:
    """A DAG with one route per cluster (and the same clusters again as a TCP proxy)."""
    dag = DAG()
    dag.ensure_listener("ingress_http", Protocol.HTTP, "0.0.0.0", 8080)
    vhost = dag.ensure_virtual_host("ingress_http", "example.com")
    for i, c in enumerate(clusters):
        vhost.add_route(Route(path=PathMatch(kind=PathKind.PREFIX, value=f"/{i}"), clusters=(c,)))
    for ext in extensions:
        dag.add_cluster_node(ext)
    return dag


@attrs.frozen
class StaticNode:
    """A plugin's own cluster node (see tests/core/test_kinds.py for the kinds themselves)."""

    name: str
    origin: ObjectKey | None = None


def static_cluster(node: StaticNode) -> cluster_v3.Cluster:
    return cluster_v3.Cluster(name=node.name, type=cluster_v3.Cluster.STATIC)


STATIC_KIND = ClusterKindSpec(name="static", node_type=StaticNode, build=static_cluster)


def build(*clusters: Cluster, extensions: Iterable[StaticNode] = ()) -> dict[str, cluster_v3.Cluster]:
    cache = ClusterCache(Config())
    cache.bind_contributions(Contributions(cluster_kinds=(STATIC_KIND,)))
    cache.on_change(dag_of(*clusters, extensions=extensions))
    out: dict[str, cluster_v3.Cluster] = {}
    for name, res in cache.contents().items():
        assert res.type_url == resource.CLUSTER == cache.type_url
        msg = cluster_v3.Cluster()
        msg.ParseFromString(res.body)
        assert msg.name == name
        out[name] = msg
    return out


def only(*clusters: Cluster) -> cluster_v3.Cluster:
    (msg,) = build(*clusters).values()
    return msg


def unpack(any_msg: Any, cls: type[Any]) -> Any:
    msg = cls()
    assert any_msg.Unpack(msg)
    return msg


def protocol_options(msg: cluster_v3.Cluster) -> http_options_v3.HttpProtocolOptions | None:
    if HTTP_OPTIONS not in msg.typed_extension_protocol_options:
        return None
    opts: http_options_v3.HttpProtocolOptions = unpack(
        msg.typed_extension_protocol_options[HTTP_OPTIONS], http_options_v3.HttpProtocolOptions
    )
    return opts


def tls_context(msg: cluster_v3.Cluster) -> tls_v3.UpstreamTlsContext:
    assert msg.transport_socket.name == "envoy.transport_sockets.tls"
    ctx: tls_v3.UpstreamTlsContext = unpack(msg.transport_socket.typed_config, tls_v3.UpstreamTlsContext)
    return ctx


def assert_ads(source: config_source_v3.ConfigSource) -> None:
    assert source.WhichOneof("config_source_specifier") == "ads"
    assert source.resource_api_version == config_source_v3.V3


# -- basics ------------------------------------------------------------------------------------


def test_eds_cluster_defaults() -> None:
    c = Cluster(upstream=KUARD)
    msg = only(c)
    assert msg.name == cluster_name(c)
    assert msg.name.startswith("default/kuard/80/") and len(msg.name.rsplit("/", 1)[1]) == 10
    assert msg.alt_stat_name == "default_kuard_80"
    assert msg.type == cluster_v3.Cluster.EDS
    assert msg.eds_cluster_config.service_name == "default/kuard/http"
    assert_ads(msg.eds_cluster_config.eds_config)
    assert msg.connect_timeout.seconds == 2 and msg.connect_timeout.nanos == 0
    assert msg.lb_policy == cluster_v3.Cluster.ROUND_ROBIN
    # Contour disables the healthy panic threshold explicitly on every cluster.
    assert msg.common_lb_config.HasField("healthy_panic_threshold")
    assert msg.common_lb_config.healthy_panic_threshold.value == 0
    # Nothing else unless asked for.
    for field in ("transport_socket", "circuit_breakers", "load_assignment", "round_robin_lb_config"):
        assert not msg.HasField(field), field
    assert not msg.health_checks
    assert not msg.typed_extension_protocol_options
    assert not msg.ignore_health_on_host_removal


def test_unnamed_port_eds_service_name() -> None:
    msg = only(Cluster(upstream=ServicePort(namespace="ns", name="svc", port=8080)))
    assert msg.eds_cluster_config.service_name == "ns/svc"
    assert msg.alt_stat_name == "ns_svc_8080"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("RoundRobin", cluster_v3.Cluster.ROUND_ROBIN),
        ("WeightedLeastRequest", cluster_v3.Cluster.LEAST_REQUEST),
        ("Random", cluster_v3.Cluster.RANDOM),
        ("Cookie", cluster_v3.Cluster.RING_HASH),
        ("RequestHash", cluster_v3.Cluster.RING_HASH),
        ("Bogus", cluster_v3.Cluster.ROUND_ROBIN),
    ],
)
def test_lb_policy(policy: str, expected: int) -> None:
    assert only(Cluster(upstream=KUARD, load_balancer_policy=policy)).lb_policy == expected


def test_external_name_is_strict_dns() -> None:
    up = ServicePort(
        namespace="default", name="ext", port=443, port_name="https", external_name="api.example.com"
    )
    msg = only(Cluster(upstream=up))
    assert msg.type == cluster_v3.Cluster.STRICT_DNS
    assert not msg.HasField("eds_cluster_config")
    cla = msg.load_assignment
    assert cla.cluster_name == "default/ext/https"
    (locality,) = cla.endpoints
    (lb,) = locality.lb_endpoints
    assert lb.endpoint.address.socket_address.address == "api.example.com"
    assert lb.endpoint.address.socket_address.port_value == 443


def test_external_name_changes_cluster_name() -> None:
    plain = Cluster(upstream=KUARD)
    ext = Cluster(upstream=attrs.evolve(KUARD, external_name="a.example.com"))
    assert cluster_name(plain) != cluster_name(ext)


# -- circuit breakers --------------------------------------------------------------------------


def test_circuit_breakers() -> None:
    cb = CircuitBreakers(max_connections=9000, max_pending_requests=4096, max_requests=404, max_retries=7)
    msg = only(Cluster(upstream=attrs.evolve(KUARD, circuit_breakers=cb)))
    (t,) = msg.circuit_breakers.thresholds
    assert t.max_connections.value == 9000
    assert t.max_pending_requests.value == 4096
    assert t.max_requests.value == 404
    assert t.max_retries.value == 7
    assert t.track_remaining
    (per_host,) = msg.circuit_breakers.per_host_thresholds
    assert per_host.track_remaining
    assert not per_host.HasField("max_connections")


def test_circuit_breakers_only_set_fields() -> None:
    cb = CircuitBreakers(per_host_max_connections=45)
    msg = only(Cluster(upstream=attrs.evolve(KUARD, circuit_breakers=cb)))
    (t,) = msg.circuit_breakers.thresholds
    for field in ("max_connections", "max_pending_requests", "max_requests", "max_retries"):
        assert not t.HasField(field), field
    (per_host,) = msg.circuit_breakers.per_host_thresholds
    assert per_host.max_connections.value == 45


def test_zero_circuit_breakers_are_unset() -> None:
    cb = CircuitBreakers(max_connections=0)
    assert not only(Cluster(upstream=attrs.evolve(KUARD, circuit_breakers=cb))).HasField("circuit_breakers")


# -- protocols and TLS -------------------------------------------------------------------------


def with_protocol(protocol: UpstreamProtocol, **kw: Any) -> Cluster:
    return Cluster(upstream=attrs.evolve(KUARD, protocol=protocol), **kw)


def test_h2c_is_explicit_http2_without_tls() -> None:
    msg = only(with_protocol(UpstreamProtocol.H2C))
    assert not msg.HasField("transport_socket")
    opts = protocol_options(msg)
    assert opts is not None
    assert opts.explicit_http_config.HasField("http2_protocol_options")
    assert not opts.HasField("common_http_protocol_options")


def test_h2_is_http2_over_tls_with_alpn() -> None:
    msg = only(with_protocol(UpstreamProtocol.H2, sni="kuard.example.com"))
    opts = protocol_options(msg)
    assert opts is not None and opts.explicit_http_config.HasField("http2_protocol_options")
    ctx = tls_context(msg)
    assert list(ctx.common_tls_context.alpn_protocols) == ["h2"]
    assert ctx.sni == "kuard.example.com"
    assert not ctx.common_tls_context.HasField("validation_context")
    assert not ctx.common_tls_context.tls_certificate_sds_secret_configs


def test_tls_is_http1_over_tls() -> None:
    msg = only(with_protocol(UpstreamProtocol.TLS))
    assert protocol_options(msg) is None
    ctx = tls_context(msg)
    assert not ctx.common_tls_context.alpn_protocols
    assert ctx.sni == ""


def test_plain_http_has_no_tls() -> None:
    msg = only(with_protocol(UpstreamProtocol.HTTP1, sni="ignored"))
    assert not msg.HasField("transport_socket")


def test_upstream_validation() -> None:
    ca = Secret(namespace="default", name="ca", ca_pem=b"-----BEGIN CERTIFICATE-----\nCA\n")
    c = with_protocol(
        UpstreamProtocol.TLS,
        validation=UpstreamValidation(ca=ca, subject_names=("kuard.example.com", "alt.example.com")),
        sni="kuard.example.com",
    )
    ctx = tls_context(only(c))
    vc = ctx.common_tls_context.validation_context
    assert vc.trust_chain_verification == vc.VERIFY_TRUST_CHAIN
    assert vc.trusted_ca.inline_bytes == ca.ca_pem
    sans = [(m.san_type, m.matcher.exact) for m in vc.match_typed_subject_alt_names]
    dns = tls_common_v3.SubjectAltNameMatcher.DNS
    assert sans == [(dns, "kuard.example.com"), (dns, "alt.example.com")]
    assert not ctx.common_tls_context.tls_certificate_sds_secret_configs


def test_upstream_validation_uri_names_match_too_and_name_the_cluster() -> None:
    ca = Secret(namespace="default", name="ca", ca_pem=b"-----BEGIN CERTIFICATE-----\nCA\n")
    dns_only = UpstreamValidation(ca=ca, subject_names=("abc.example.com",))
    with_uri = attrs.evolve(dns_only, uri_subject_names=("spiffe://abc.example.com/test-identity",))
    c = with_protocol(UpstreamProtocol.TLS, validation=with_uri)
    vc = tls_context(only(c)).common_tls_context.validation_context
    sans = [(m.san_type, m.matcher.exact) for m in vc.match_typed_subject_alt_names]
    types = tls_common_v3.SubjectAltNameMatcher
    assert sans == [(types.DNS, "abc.example.com"), (types.URI, "spiffe://abc.example.com/test-identity")]
    assert cluster_name(c) != cluster_name(attrs.evolve(c, validation=dns_only))


# -- health checks -----------------------------------------------------------------------------


def test_http_health_check() -> None:
    hc = HealthCheck(
        path="/healthz",
        host="kuard.local",
        interval=10,
        timeout=1.5,
        unhealthy_threshold=5,
        healthy_threshold=1,
        expected_statuses=((200, 300), (418, 419)),
    )
    msg = only(Cluster(upstream=KUARD, health_check=hc))
    assert msg.ignore_health_on_host_removal
    (check,) = msg.health_checks
    assert check.interval.seconds == 10
    assert (check.timeout.seconds, check.timeout.nanos) == (1, 500_000_000)
    assert check.unhealthy_threshold.value == 5
    assert check.healthy_threshold.value == 1
    http = check.http_health_check
    assert (http.path, http.host) == ("/healthz", "kuard.local")
    assert http.codec_client_type == http_type_v3.HTTP1
    assert [(r.start, r.end) for r in http.expected_statuses] == [(200, 300), (418, 419)]


def test_http_health_check_default_host_and_http2_codec() -> None:
    msg = only(with_protocol(UpstreamProtocol.H2C, health_check=HealthCheck(path="/hc")))
    http = msg.health_checks[0].http_health_check
    assert http.host == "contour-envoy-healthcheck"
    assert http.codec_client_type == http_type_v3.HTTP2


def test_tcp_health_check_when_no_path() -> None:
    msg = only(Cluster(upstream=KUARD, health_check=HealthCheck()))
    (check,) = msg.health_checks
    assert check.WhichOneof("health_checker") == "tcp_health_check"
    assert check.interval.seconds == 5 and check.timeout.seconds == 2
    assert check.unhealthy_threshold.value == 3 and check.healthy_threshold.value == 2
    assert msg.ignore_health_on_host_removal


# -- slow start, idle timeout ------------------------------------------------------------------


def test_slow_start_round_robin() -> None:
    msg = only(Cluster(upstream=KUARD, slow_start=SlowStart(window=30, aggression=1.5, min_weight_percent=5)))
    config = msg.round_robin_lb_config.slow_start_config
    assert config.slow_start_window.seconds == 30
    assert config.aggression.default_value == 1.5
    assert config.aggression.runtime_key == "contour.slowstart.aggression"
    assert config.min_weight_percent.value == 5


def test_slow_start_least_request() -> None:
    c = Cluster(upstream=KUARD, load_balancer_policy="WeightedLeastRequest", slow_start=SlowStart(window=3))
    msg = only(c)
    assert msg.WhichOneof("lb_config") == "least_request_lb_config"
    assert msg.least_request_lb_config.slow_start_config.min_weight_percent.value == 10


def test_slow_start_ignored_for_other_policies() -> None:
    msg = only(Cluster(upstream=KUARD, load_balancer_policy="Random", slow_start=SlowStart(window=3)))
    assert msg.WhichOneof("lb_config") is None


def test_idle_connection_timeout() -> None:
    msg = only(Cluster(upstream=KUARD, idle_connection_timeout=Duration(seconds=90)))
    opts = protocol_options(msg)
    assert opts is not None
    # HTTP/1 stays explicit, as Contour writes it.
    assert opts.explicit_http_config.HasField("http_protocol_options")
    assert opts.common_http_protocol_options.idle_timeout.seconds == 90


def test_idle_connection_timeout_disabled_is_zero() -> None:
    msg = only(with_protocol(UpstreamProtocol.H2C, idle_connection_timeout=Duration(seconds=None)))
    opts = protocol_options(msg)
    assert opts is not None
    assert opts.explicit_http_config.HasField("http2_protocol_options")
    assert opts.common_http_protocol_options.HasField("idle_timeout")
    assert opts.common_http_protocol_options.idle_timeout.seconds == 0


# -- the cache ---------------------------------------------------------------------------------


def test_one_cluster_per_name_sorted() -> None:
    a = Cluster(upstream=ServicePort(namespace="b", name="svc", port=80))
    b = Cluster(upstream=ServicePort(namespace="a", name="svc", port=80))
    c = Cluster(upstream=ServicePort(namespace="a", name="svc", port=80), load_balancer_policy="Random")
    # The same cluster in two routes and with another weight is still one Envoy cluster.
    weighted = attrs.evolve(a, weight=30)
    got = build(a, b, c, weighted, b, extensions=[StaticNode(name="extension/x/y")])
    assert list(got) == sorted(got)
    assert len(got) == 4
    assert {cluster_name(a), cluster_name(b), cluster_name(c), "extension/x/y"} == set(got)


def test_tcp_proxy_and_mirror_clusters_included() -> None:
    dag = dag_of()
    tcp = Cluster(upstream=ServicePort(namespace="ns", name="tcp", port=9000))
    dag.ensure_listener("ingress_https", Protocol.HTTPS, "0.0.0.0", 8443)
    dag.ensure_secure_virtual_host("ingress_https", "tcp.example.com").tcp_proxy = TCPProxy(clusters=(tcp,))
    cache = ClusterCache(Config())
    cache.on_change(dag)
    assert list(cache.contents()) == [cluster_name(tcp)]


def copy(c: Cluster) -> Cluster:
    """An equal node that is a different object, as a fresh DAG build makes."""
    return attrs.evolve(c, upstream=attrs.evolve(c.upstream))


def test_unchanged_rebuild_keeps_resources_and_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [Cluster(upstream=ServicePort(namespace="ns", name=f"s{i}", port=80)) for i in range(5)]
    cache = ClusterCache(Config())
    cache.on_change(dag_of(*nodes))
    before = cache.contents()
    identities = {name: id(r) for name, r in before.items()}

    calls: list[Cluster] = []
    real = cds.cluster
    monkeypatch.setattr(cds, "cluster", _recorded(calls, real))
    cache.on_change(dag_of(*[copy(n) for n in nodes]))
    assert calls == []  # nothing translated again
    assert cache.contents() is before
    assert {name: id(r) for name, r in cache.contents().items()} == identities


def test_the_very_same_nodes_are_not_even_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unchanged routes are reused between builds: their nodes are found unchanged by identity;
    equal copies, or the same nodes in another order, still are by comparing the sets."""
    nodes = [Cluster(upstream=ServicePort(namespace="ns", name=f"s{i}", port=80)) for i in range(3)]
    cache = ClusterCache(Config())
    cache.on_change(dag_of(*nodes))
    before = cache.contents()
    sets: list[DAG] = []
    real = DAG.cluster_set

    def recorded(dag: DAG) -> frozenset[Cluster]:
        sets.append(dag)
        return real(dag)

    monkeypatch.setattr(DAG, "cluster_set", recorded)
    cache.on_change(dag_of(*nodes))
    assert sets == [] and cache.contents() is before
    reordered = dag_of(*[copy(n) for n in reversed(nodes)])
    cache.on_change(reordered)
    assert sets == [reordered] and cache.contents() is before
    cache.on_change(dag_of(*nodes[:2]))
    assert list(cache.contents()) == sorted(cluster_name(n) for n in nodes[:2])


def test_weight_and_route_level_fields_do_not_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    node = Cluster(upstream=KUARD)
    cache = ClusterCache(Config())
    cache.on_change(dag_of(node))
    (res,) = cache.contents().values()

    calls: list[Cluster] = []
    real = cds.cluster
    monkeypatch.setattr(cds, "cluster", _recorded(calls, real))
    headers = HeadersPolicy(set=(HeaderValue(name="x-a", value="b"),))
    attachments = Attachments().set(AttachmentKey("p", int), 1)
    variant = attrs.evolve(node, weight=70, request_headers=headers, attachments=attachments)
    cache.on_change(dag_of(variant))
    assert calls == []
    assert next(iter(cache.contents().values())) is res


def test_cookie_rewrites_shape_routes_not_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    node = Cluster(upstream=KUARD, load_balancer_policy="Cookie")
    cache = ClusterCache(Config())
    cache.on_change(dag_of(node))
    (res,) = cache.contents().values()
    assert cluster_v3.Cluster.FromString(res.body).lb_policy == cluster_v3.Cluster.RING_HASH

    calls: list[Cluster] = []
    real = cds.cluster
    monkeypatch.setattr(cds, "cluster", _recorded(calls, real))
    variant = attrs.evolve(node, cookie_rewrites=(CookieRewrite(name="session", secure=True),))
    assert cluster_name(variant) == cluster_name(node)
    cache.on_change(dag_of(variant))
    assert calls == []  # the same Cluster: the rewrite lives in the route's per-filter config
    assert next(iter(cache.contents().values())) is res


def test_changed_cluster_gets_new_resource_others_kept() -> None:
    a = Cluster(upstream=ServicePort(namespace="ns", name="a", port=80))
    b = Cluster(upstream=ServicePort(namespace="ns", name="b", port=80))
    cache = ClusterCache(Config())
    cache.on_change(dag_of(a, b))
    before = dict(cache.contents())
    b2 = attrs.evolve(b, load_balancer_policy="Random")
    cache.on_change(dag_of(copy(a), b2))
    after = cache.contents()
    assert after[cluster_name(a)] is before[cluster_name(a)]
    assert cluster_name(b) not in after
    assert cluster_name(b2) in after
    assert after[cluster_name(b2)].version != before[cluster_name(b)].version


def test_removed_clusters_disappear() -> None:
    a = Cluster(upstream=KUARD)
    cache = ClusterCache(Config())
    cache.on_change(dag_of(a))
    cache.on_change(dag_of())
    assert dict(cache.contents()) == {}


def test_versions_are_content_hashes_across_caches() -> None:
    a = Cluster(upstream=KUARD, health_check=HealthCheck(path="/"), slow_start=SlowStart(window=1))
    one, two = ClusterCache(Config()), ClusterCache(Config())
    one.on_change(dag_of(a))
    two.on_change(dag_of(copy(a)))
    assert [r.version for r in one.contents().values()] == [r.version for r in two.contents().values()]
    assert [r.body for r in one.contents().values()] == [r.body for r in two.contents().values()]


# -- the core's dnsname cluster kind ------------------------------------------------------------------


def test_dns_name_cluster_is_contours() -> None:
    ca = Secret(namespace="default", name="ca", ca_pem=b"CA")
    node = DNSNameCluster(
        address="idp.example.com",
        port=8443,
        dns_lookup_family="v4",
        validation=UpstreamValidation(ca=ca, subject_names=("idp.example.com",)),
    )
    msg = dns_name_cluster(node)
    assert msg.name == "dnsname/https/idp.example.com"
    assert msg.type == cluster_v3.Cluster.STRICT_DNS
    assert msg.dns_lookup_family == cluster_v3.Cluster.V4_ONLY
    assert msg.connect_timeout.seconds == 2
    [endpoint] = msg.load_assignment.endpoints[0].lb_endpoints
    assert (
        endpoint.endpoint.address.socket_address.address,
        endpoint.endpoint.address.socket_address.port_value,
    ) == (
        "idp.example.com",
        8443,
    )
    context = tls_v3.UpstreamTlsContext()
    msg.transport_socket.typed_config.Unpack(context)
    assert context.sni == "idp.example.com"
    assert context.common_tls_context.validation_context.trusted_ca.inline_bytes == b"CA"
    every_family = dns_name_cluster(
        DNSNameCluster(address="10.0.0.1", port=80, scheme="http", dns_lookup_family="all")
    )
    assert every_family.type == cluster_v3.Cluster.LOGICAL_DNS
    assert not every_family.HasField("transport_socket")


def test_dns_name_clusters_of_several_objects_are_one_cluster() -> None:
    first = ObjectKey("example.com", "Thing", "default", "a")
    second = ObjectKey("example.com", "Thing", "default", "b")
    dag = DAG()
    dag.add_cluster_node(DNSNameCluster(address="idp.example.com", port=443, origin=first))
    dag.add_cluster_node(DNSNameCluster(address="idp.example.com", port=443, origin=second))
    dag.add_cluster_node(DNSNameCluster(address="idp.example.com", port=8443, origin=second))
    [node] = dag.cluster_nodes()
    assert node.origin == first
    # Another port under the same (Contour's) name: the later object's note says so.
    assert [n.reason for n in dag.notes.get(second, [])] == ["NameConflict"]
    cache = ClusterCache(Config())
    cache.bind_contributions(Contributions(cluster_kinds=tuple(builtin.cpx_cluster_kinds())))
    cache.on_change(dag)
    assert list(cache.contents()) == ["dnsname/https/idp.example.com"]
