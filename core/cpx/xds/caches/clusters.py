"""CDS: one Envoy Cluster per distinct cluster name in the DAG (``internal/envoy/v3/cluster.go``).

Translation is memoised by DAG node, so a rebuild where nothing changed costs a dictionary lookup
per referenced cluster and keeps every :class:`Resource` object (and so its version) as it was.
A node differing only in what CDS never shows (route weight, per-service headers and cookie
rewrites, plugin data) reuses the Resource built for its twin.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from typing import Any, cast

import attrs
from envoy.config.cluster.v3 import cluster_pb2 as cluster_v3
from envoy.config.core.v3 import health_check_pb2 as health_check_v3
from envoy.config.endpoint.v3 import endpoint_pb2 as endpoint_v3
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common_v3
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2 as tls_v3
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_options_v3
from envoy.type.v3 import http_pb2 as http_type_v3

from cpx.config import Config
from cpx.contourkeys import connect_timeout as checked_connect_timeout
from cpx.dag.attachments import NO_ATTACHMENTS
from cpx.dag.dag import DAG
from cpx.dag.nodes import (
    CircuitBreakers,
    Cluster,
    CustomNode,
    DNSNameCluster,
    Duration,
    HeadersPolicy,
    HealthCheck,
    ServicePort,
    SlowStart,
    UpstreamProtocol,
    UpstreamValidation,
)
from cpx.durations import parse_duration
from cpx.records import ClusterKindSpec
from cpx.xds import resource
from cpx.xds.caches.kinds import KindTranslator
from cpx.xds.contributions import Contributions
from cpx.xds.envoy.common import ads_config_source, seconds, timeout, to_any
from cpx.xds.naming import alt_stat_name, cluster_name
from cpx.xds.resource import Resource

HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls"
SLOW_START_AGGRESSION_KEY = "contour.slowstart.aggression"
CONNECT_TIMEOUT = 2.0  # seconds, Contour's default

LB_POLICIES = {
    "RoundRobin": cluster_v3.Cluster.ROUND_ROBIN,
    "WeightedLeastRequest": cluster_v3.Cluster.LEAST_REQUEST,
    "Random": cluster_v3.Cluster.RANDOM,
    "Cookie": cluster_v3.Cluster.RING_HASH,
    "RequestHash": cluster_v3.Cluster.RING_HASH,
}
_NO_HEADERS = HeadersPolicy()

# Contour's cluster.dns-lookup-family values (--cluster-dns-lookup-family).
DNS_LOOKUP_FAMILIES = {
    "auto": cluster_v3.Cluster.AUTO,
    "v4": cluster_v3.Cluster.V4_ONLY,
    "v6": cluster_v3.Cluster.V6_ONLY,
    "all": cluster_v3.Cluster.ALL,
}

# What a node translates to: its name, its Resource and its shape (see `_shape_key`).
Entry = tuple[str, Resource, tuple[object, ...]]


class ClusterCache:
    """The CDS resources of the last DAG, keyed by cluster name and sorted by it."""

    type_url = resource.CLUSTER

    def __init__(self, config: Config) -> None:
        self.config = config
        self._dns_family = DNS_LOOKUP_FAMILIES[config.option("cluster_dns_lookup_family", "auto")]
        self._connect_timeout = connect_timeout(config)
        self._resources: dict[str, Resource] = {}
        # Memos of the last build only, so nodes that left the DAG are forgotten.
        self._by_node: dict[Cluster, Entry] = {}
        self._by_shape: dict[tuple[object, ...], Entry] = {}
        # Plugins' own cluster nodes, built by their kinds (see bind_contributions).
        self._kinds: KindTranslator[ClusterKindSpec] = KindTranslator(self.type_url)
        # The DAG's distinct nodes last time: the same (mostly identical) nodes mean nothing to do.
        # A set, since only which nodes are used matters (equal names mean equal clusters).
        self._nodes: tuple[frozenset[Cluster], tuple[CustomNode, ...]] | None = None
        # ... and the nodes as the DAG's routes hold them, in order: the very same nodes (the usual
        # case, as unchanged routes are reused) are found equal without hashing each one.
        self._walk: tuple[tuple[tuple[Cluster, ...], ...], tuple[CustomNode, ...]] | None = None

    def bind_contributions(self, contributions: Contributions) -> None:
        self._kinds.bind(contributions.cluster_kinds)
        self._nodes = self._walk = None

    def contents(self) -> Mapping[str, Resource]:
        return self._resources

    def on_change(self, dag: DAG) -> None:
        walk = (dag.cluster_walk(), dag.cluster_nodes())
        if walk == self._walk:
            return
        nodes = (dag.cluster_set(), walk[1])
        if nodes == self._nodes:
            self._walk = walk
            return
        found: dict[str, Resource] = {}
        by_node: dict[Cluster, Entry] = {}
        by_shape: dict[tuple[object, ...], Entry] = {}
        # Distinct nodes, each looked up once (a node hashes all its fields: ~1 us).
        for node in dag.unique_clusters():
            entry = by_node[node] = self._lookup(node, by_shape)
            # Contour keys clusters by name; the first node with a name wins.
            found.setdefault(entry[0], entry[1])
        for custom, res, _ in self._kinds.translate(nodes[1]):
            if res.name in found:
                message = f"cluster name {res.name!r} is already used by a route's cluster"
                self._kinds.conflict(custom, "NameConflict", message)
                continue
            found[res.name] = res
        self._by_node, self._by_shape = by_node, by_shape
        self._nodes, self._walk = nodes, walk
        resources = {name: found[name] for name in sorted(found)}
        # Same contents: hand out the same mapping, which observers can compare by identity.
        if resources != self._resources:
            self._resources = resources

    def _lookup(self, node: Cluster, by_shape: dict[tuple[object, ...], Entry]) -> Entry:
        entry = self._by_node.get(node) if self._by_node else None  # (the first build: no hashing)
        if entry is not None:
            by_shape.setdefault(entry[2], entry)
            return entry
        shape = _shape_key(node)
        entry = by_shape.get(shape) or (self._by_shape.get(shape) if self._by_shape else None)
        if entry is None:
            # The node itself rather than its shape: CDS and its name read none of the fields the
            # shape leaves out, and the routes ask for this very object's name (memoised).
            name = cluster_name(node)
            message = cluster(node)
            if self._connect_timeout != CONNECT_TIMEOUT:
                message.connect_timeout.CopyFrom(seconds(self._connect_timeout))
            if node.upstream.external_name:
                _dns_lookup_family(message, self._dns_family)
            entry = (name, Resource.from_message(name, self.type_url, message), shape)
        by_shape[shape] = entry
        return entry


def connect_timeout(config: Config) -> float:
    """Contour's timeouts.connect-timeout (``--cluster-connect-timeout``) in seconds: 2 unless set."""
    value = config.option("cluster_connect_timeout")
    if not value:
        return CONNECT_TIMEOUT
    try:
        return parse_duration(checked_connect_timeout(value))
    except ValueError as err:
        raise ValueError(f"--cluster-connect-timeout: {err}") from None


def _dns_lookup_family(msg: cluster_v3.Cluster, family: cluster_v3.Cluster.DnsLookupFamily.ValueType) -> None:
    """Contour's cluster.dns-lookup-family on an ExternalName cluster: "all" resolves through
    LOGICAL_DNS (one connection target of every address family, as Contour does)."""
    msg.dns_lookup_family = family
    if family == cluster_v3.Cluster.ALL:
        msg.type = cluster_v3.Cluster.LOGICAL_DNS


# The node fields CDS ignores (they shape routes, not clusters).
_ROUTE_ONLY_FIELDS = ("weight", "request_headers", "response_headers", "cookie_rewrites", "attachments")
# The other fields as a tuple, at C speed: equal for nodes of equal `cds_shape`, without building it.
_shape_key: Callable[[Cluster], tuple[object, ...]] = operator.attrgetter(
    *[f.name for f in attrs.fields(cast(Any, Cluster)) if f.name not in _ROUTE_ONLY_FIELDS]
)


def cds_shape(node: Cluster) -> Cluster:
    """The node without the fields CDS ignores (they shape routes, not clusters)."""
    if (
        node.weight == 1
        and not node.attachments
        and not node.cookie_rewrites
        and node.request_headers == _NO_HEADERS
        and node.response_headers == _NO_HEADERS
    ):
        return node
    # cast: mypy's attrs plugin does not see through nodes.py's `frozen` alias.
    shape: Cluster = attrs.evolve(
        cast(Any, node),
        weight=1,
        request_headers=_NO_HEADERS,
        response_headers=_NO_HEADERS,
        cookie_rewrites=(),
        attachments=NO_ATTACHMENTS,
    )
    return shape


# -- translation -------------------------------------------------------------------------------


def cluster(c: Cluster) -> cluster_v3.Cluster:
    """Contour's ``Cluster``: EDS (or STRICT_DNS for ExternalName) plus the cluster's policies."""
    up = c.upstream
    if up.external_name:
        return _cluster(c)
    # EDS clusters differ mostly in their names: copy a memoised message of the same options.
    msg = cluster_v3.Cluster()
    msg.CopyFrom(
        _eds_template(
            load_balancer_policy=c.load_balancer_policy,
            health_check=c.health_check,
            protocol=up.protocol,
            circuit_breakers=up.circuit_breakers,
            validation=c.validation,
            sni=c.sni,
            idle_connection_timeout=c.idle_connection_timeout,
            slow_start=c.slow_start,
        )
    )
    msg.name = cluster_name(c)
    msg.alt_stat_name = alt_stat_name(c)
    msg.eds_cluster_config.service_name = up.eds_name
    return msg


@functools.lru_cache(maxsize=256)
def _eds_template(
    *,
    load_balancer_policy: str,
    health_check: HealthCheck | None,
    protocol: UpstreamProtocol,
    circuit_breakers: CircuitBreakers,
    validation: UpstreamValidation | None,
    sni: str,
    idle_connection_timeout: Duration | None,
    slow_start: SlowStart | None,
) -> cluster_v3.Cluster:
    """The EDS cluster of a placeholder Service with these options (names are set by the caller)."""
    placeholder = Cluster(
        upstream=ServicePort(
            namespace="", name="", port=0, protocol=protocol, circuit_breakers=circuit_breakers
        ),
        load_balancer_policy=load_balancer_policy,
        health_check=health_check,
        validation=validation,
        sni=sni,
        idle_connection_timeout=idle_connection_timeout,
        slow_start=slow_start,
    )
    return _cluster(placeholder)


def _cluster(c: Cluster) -> cluster_v3.Cluster:
    up = c.upstream
    msg = _defaults(c.load_balancer_policy)
    msg.name = cluster_name(c)
    msg.alt_stat_name = alt_stat_name(c)
    if up.external_name:
        msg.type = cluster_v3.Cluster.STRICT_DNS
        msg.load_assignment.CopyFrom(external_name_assignment(up))
    else:
        msg.type = cluster_v3.Cluster.EDS
        _eds(msg, up.eds_name)
    if c.health_check is not None:
        msg.health_checks.append(health_check(c.health_check, up.protocol))
        # Drain connections at once when an endpoint is known to be gone.
        msg.ignore_health_on_host_removal = True
    _circuit_breakers(msg, up.circuit_breakers)
    _upstream_protocol(msg, up.protocol, c.validation, c.sni)
    _protocol_options(msg, up.protocol, c.idle_connection_timeout)
    if c.slow_start is not None:
        _slow_start(msg, c.slow_start)
    return msg


def external_name_assignment(up: ServicePort) -> endpoint_v3.ClusterLoadAssignment:
    """The single DNS endpoint of an ExternalName Service (Contour's externalNameClusterLoadAssignment)."""
    cla = endpoint_v3.ClusterLoadAssignment(cluster_name=up.eds_name)
    address = cla.endpoints.add().lb_endpoints.add().endpoint.address.socket_address
    address.address = up.external_name or ""
    address.port_value = up.port
    return cla


_DNS_LOOKUP_FAMILIES = {
    "v4": cluster_v3.Cluster.V4_ONLY,
    "v6": cluster_v3.Cluster.V6_ONLY,
    "all": cluster_v3.Cluster.ALL,
}


def dns_name_cluster(node: DNSNameCluster) -> cluster_v3.Cluster:
    """Contour's ``DNSNameCluster``: one DNS endpoint (LOGICAL_DNS when every address family is
    looked up, STRICT_DNS otherwise), over TLS for https with the address as SNI."""
    msg = _defaults("RoundRobin")
    msg.name = node.name
    family = _DNS_LOOKUP_FAMILIES.get(node.dns_lookup_family, cluster_v3.Cluster.AUTO)
    msg.dns_lookup_family = family
    msg.type = (
        cluster_v3.Cluster.LOGICAL_DNS if family == cluster_v3.Cluster.ALL else cluster_v3.Cluster.STRICT_DNS
    )
    msg.load_assignment.cluster_name = node.name
    address = msg.load_assignment.endpoints.add().lb_endpoints.add().endpoint.address.socket_address
    address.address = node.address
    address.port_value = node.port
    if node.scheme == "https":
        msg.transport_socket.name = TLS_TRANSPORT_SOCKET
        msg.transport_socket.typed_config.CopyFrom(
            to_any(upstream_tls_context(node.validation, node.address))
        )
    return msg


def health_check(hc: HealthCheck, protocol: UpstreamProtocol) -> health_check_v3.HealthCheck:
    """HTTP health check when a path is set, TCP otherwise (Contour's http/tcpHealthCheck)."""
    msg = health_check_v3.HealthCheck(
        timeout=seconds(hc.timeout),
        interval=seconds(hc.interval),
    )
    msg.unhealthy_threshold.value = hc.unhealthy_threshold
    msg.healthy_threshold.value = hc.healthy_threshold
    if not hc.path:
        msg.tcp_health_check.SetInParent()
        return msg
    http = msg.http_health_check
    http.path = hc.path
    http.host = hc.host
    http2 = protocol in (UpstreamProtocol.H2, UpstreamProtocol.H2C)
    http.codec_client_type = http_type_v3.HTTP2 if http2 else http_type_v3.HTTP1
    for start, end in hc.expected_statuses:
        http.expected_statuses.add(start=start, end=end)
    return msg


def upstream_tls_context(
    validation: UpstreamValidation | None, sni: str, alpn: tuple[str, ...] = ()
) -> tls_v3.UpstreamTlsContext:
    """Contour's UpstreamTLSContext, with the CA inline."""
    context = tls_v3.UpstreamTlsContext(sni=sni)
    common = context.common_tls_context
    common.alpn_protocols.extend(alpn)
    if validation is not None and validation.ca.ca_pem:
        _validation_context(common.validation_context, validation)
    return context


def _validation_context(
    vc: tls_common_v3.CertificateValidationContext, validation: UpstreamValidation
) -> None:
    vc.trust_chain_verification = tls_common_v3.CertificateValidationContext.VERIFY_TRUST_CHAIN
    vc.trusted_ca.inline_bytes = validation.ca.ca_pem
    for san_type, names in (
        (tls_common_v3.SubjectAltNameMatcher.DNS, validation.subject_names),
        (tls_common_v3.SubjectAltNameMatcher.URI, validation.uri_subject_names),
    ):
        for san in names:
            matcher = vc.match_typed_subject_alt_names.add(san_type=san_type)
            matcher.matcher.exact = san


def _defaults(lb_policy: str) -> cluster_v3.Cluster:
    msg = cluster_v3.Cluster(
        connect_timeout=seconds(CONNECT_TIMEOUT),
        lb_policy=LB_POLICIES.get(lb_policy, cluster_v3.Cluster.ROUND_ROBIN),
    )
    # Contour disables the healthy panic threshold (explicit 0%) on every cluster.
    msg.common_lb_config.healthy_panic_threshold.value = 0
    return msg


def _eds(msg: cluster_v3.Cluster, service_name: str) -> None:
    msg.eds_cluster_config.service_name = service_name
    msg.eds_cluster_config.eds_config.CopyFrom(ads_config_source())


def _circuit_breakers(msg: cluster_v3.Cluster, cb: CircuitBreakers) -> None:
    """Only positive values count, as in Contour's applyCircuitBreakers."""
    limits = {
        "max_connections": cb.max_connections,
        "max_pending_requests": cb.max_pending_requests,
        "max_requests": cb.max_requests,
        "max_retries": cb.max_retries,
    }
    if not any(v is not None and v > 0 for v in (*limits.values(), cb.per_host_max_connections)):
        return
    thresholds = msg.circuit_breakers.thresholds.add(track_remaining=True)
    for field, value in limits.items():
        if value and value > 0:
            getattr(thresholds, field).value = value
    per_host = msg.circuit_breakers.per_host_thresholds.add(track_remaining=True)
    if cb.per_host_max_connections and cb.per_host_max_connections > 0:
        per_host.max_connections.value = cb.per_host_max_connections


def _upstream_protocol(
    msg: cluster_v3.Cluster,
    protocol: UpstreamProtocol,
    validation: UpstreamValidation | None,
    sni: str,
) -> None:
    if protocol not in (UpstreamProtocol.TLS, UpstreamProtocol.H2):
        return
    alpn = ("h2",) if protocol is UpstreamProtocol.H2 else ()
    context = upstream_tls_context(validation, sni, alpn)
    msg.transport_socket.name = TLS_TRANSPORT_SOCKET
    msg.transport_socket.typed_config.CopyFrom(to_any(context))


def _protocol_options(msg: cluster_v3.Cluster, protocol: UpstreamProtocol, idle: Duration | None) -> None:
    """Explicit HTTP/2 for h2/h2c and the idle connection timeout; nothing keeps Envoy's defaults."""
    http2 = protocol in (UpstreamProtocol.H2, UpstreamProtocol.H2C)
    if not http2 and idle is None:
        return
    options = http_options_v3.HttpProtocolOptions()
    if http2:
        options.explicit_http_config.http2_protocol_options.SetInParent()
    else:
        options.explicit_http_config.http_protocol_options.SetInParent()
    if idle is not None:
        # Disabled (Contour's "infinity") is an explicit 0, which Envoy reads as "no timeout".
        options.common_http_protocol_options.idle_timeout.CopyFrom(timeout(idle))
    msg.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(to_any(options))


def _slow_start(msg: cluster_v3.Cluster, slow_start: SlowStart) -> None:
    """Envoy supports slow start only for round robin and least request; others ignore it."""
    if msg.lb_policy == cluster_v3.Cluster.ROUND_ROBIN:
        config = msg.round_robin_lb_config.slow_start_config
    elif msg.lb_policy == cluster_v3.Cluster.LEAST_REQUEST:
        config = msg.least_request_lb_config.slow_start_config
    else:
        return
    config.slow_start_window.CopyFrom(seconds(slow_start.window))
    config.aggression.default_value = slow_start.aggression
    config.aggression.runtime_key = SLOW_START_AGGRESSION_KEY
    config.min_weight_percent.value = slow_start.min_weight_percent
