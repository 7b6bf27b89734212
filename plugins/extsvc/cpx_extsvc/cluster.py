"""The Envoy cluster of an ExtensionService (Contour's ``EnvoyGen.ExtensionCluster``), a cluster kind.

One cluster per ExtensionService, named ``extension/<namespace>/<name>`` whatever its settings
(Contour wants a 1-1 mapping, not a new cluster per change), reading one ClusterLoadAssignment of
the same name that merges the services' endpoints, one locality per service with its weight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
from cpx import ClusterKindSpec, ObjectKey
from cpx.dag import (
    CircuitBreakers,
    Cluster,
    Duration,
    LoadAssignment,
    ServicePort,
    UpstreamProtocol,
    UpstreamValidation,
)

if TYPE_CHECKING:
    from envoy.config.cluster.v3 import cluster_pb2

HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
PROTOCOLS = {"h2": UpstreamProtocol.H2, "h2c": UpstreamProtocol.H2C, "http/1.1": UpstreamProtocol.HTTP1}


def cluster_name(key: ObjectKey) -> str:
    """Contour's ExtensionClusterName."""
    return f"extension/{key.namespace}/{key.name}"


@attrs.frozen(cache_hash=True, kw_only=True)
class ExtensionCluster:
    """The DAG node: a CustomNode claimed by the ``extension`` cluster kind."""

    name: str
    origin: ObjectKey | None
    upstreams: tuple[ServicePort, ...]
    weights: tuple[int, ...]
    protocol: str = "h2"
    validation: UpstreamValidation | None = None
    sni: str = ""
    load_balancer_policy: str = ""
    idle_connection_timeout: Duration | None = None
    circuit_breakers: CircuitBreakers = attrs.field(factory=CircuitBreakers)


def build(node: ExtensionCluster) -> cluster_pb2.Cluster:
    """The core's translation of an equivalent Service cluster, renamed and pointed at the merged
    ClusterLoadAssignment; ``http/1.1`` asks for HTTP/1 explicitly, as Contour does."""
    from cpx.xds import envoy_cluster, to_any  # noqa: PLC0415 - protobuf on first build only
    from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2  # noqa: PLC0415

    template = Cluster(
        upstream=ServicePort(
            namespace="",
            name=node.name,
            port=0,
            protocol=PROTOCOLS[node.protocol],
            circuit_breakers=node.circuit_breakers,
        ),
        load_balancer_policy=node.load_balancer_policy or "RoundRobin",
        validation=node.validation,
        sni=node.sni,
        idle_connection_timeout=node.idle_connection_timeout,
    )
    msg = envoy_cluster(template)
    msg.name = node.name
    msg.alt_stat_name = node.name.replace("/", "_")
    msg.eds_cluster_config.service_name = node.name
    if node.protocol == "http/1.1" and HTTP_PROTOCOL_OPTIONS not in msg.typed_extension_protocol_options:
        options = http_protocol_options_pb2.HttpProtocolOptions()
        options.explicit_http_config.http_protocol_options.SetInParent()
        msg.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].CopyFrom(to_any(options))
    return msg


def load_assignments(node: ExtensionCluster) -> tuple[LoadAssignment, ...]:
    """Contour's ServiceCluster.Rebalance: no weight at all spreads the load evenly."""
    weights = node.weights if any(node.weights) else tuple(1 for _ in node.weights)
    return (LoadAssignment(name=node.name, ports=node.upstreams, weights=weights),)


EXTENSION_CLUSTER_KIND = ClusterKindSpec(
    name="extension",
    node_type=ExtensionCluster,
    build=build,
    load_assignments=load_assignments,
    description="ExtensionService clusters (extension/<namespace>/<name>), endpoints over EDS",
)
