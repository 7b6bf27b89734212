"""Test plugin standing in for an ExtensionService: the h2c cluster ``extension/projectcontour/ratelimit``
to ``127.0.0.1:--test-rls-port`` (the name Contour gives ExtensionService projectcontour/ratelimit)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
from cpx import ClusterKindSpec, Config, OptionSpec, Phase, ProcessorSpec, SourceView, hookimpl
from cpx.dag import DAG
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2

CLUSTER = "extension/projectcontour/ratelimit"
PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


@attrs.frozen
class RlsCluster:
    name: str
    origin: None
    port: int


def build(node: RlsCluster) -> cluster_pb2.Cluster:
    cluster = cluster_pb2.Cluster(name=node.name, type=cluster_pb2.Cluster.STATIC)
    cluster.connect_timeout.seconds = 1
    endpoint = cluster.load_assignment.endpoints.add().lb_endpoints.add().endpoint
    endpoint.address.socket_address.address = "127.0.0.1"
    endpoint.address.socket_address.port_value = node.port
    cluster.load_assignment.cluster_name = node.name
    options = http_protocol_options_pb2.HttpProtocolOptions()
    options.explicit_http_config.http2_protocol_options.SetInParent()
    cluster.typed_extension_protocol_options[PROTOCOL_OPTIONS].Pack(options)
    return cluster


@attrs.define
class RlsProcessor:
    config: Config

    def run(self, dag: DAG, source: SourceView) -> None:
        dag.add_cluster_node(
            RlsCluster(name=CLUSTER, origin=None, port=int(self.config.option("test_rls_port")))
        )


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    yield OptionSpec(name="test_rls_port", help="the test rate limit service's port", type=int, default=0)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(name="test-rls-cluster", factory=RlsProcessor, phase=Phase.LISTENERS)


@hookimpl
def cpx_cluster_kinds() -> Iterator[ClusterKindSpec]:
    yield ClusterKindSpec(name="test-rls", node_type=RlsCluster, build=build)
