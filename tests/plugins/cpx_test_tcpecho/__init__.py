"""A test plugin with a listener kind and a cluster kind of its own: TCP proxies on ports it picks.

Each ``TCPEcho`` object (``tcpecho.cpx.test/v1``) asks for a listener on ``127.0.0.1:<spec.port>``
whose one filter chain proxies TCP to a cluster of this plugin's kind: STATIC when the spec names
an ``address``, EDS (the Service port's endpoints) when it names a ``service``::

    spec: {port: 10001, backend: {address: 127.0.0.1, port: 9000}}
    spec: {port: 10002, backend: {service: echo, port: 80, portName: http}}

``spec.break`` makes the plugin misbehave on purpose: ``unclaimed`` adds a cluster node of a type no
kind claims, ``crash`` makes the cluster build raise, ``nameless`` builds a Cluster without a name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import config_source_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2

from cpx import (
    ClusterKindSpec,
    Config,
    GroupVersionKind,
    ListenerKindSpec,
    ObjectKey,
    Phase,
    ProcessorSpec,
    SourceView,
    WatchSpec,
    blame,
    hookimpl,
)
from cpx.dag import DAG, ServicePort

TCPECHO = GroupVersionKind(group="tcpecho.cpx.test", version="v1", kind="TCPEcho", plural="tcpechoes")


def manifest(name: str, port: int, backend: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A TCPEcho object in namespace default (for tests)."""
    return {
        "apiVersion": "tcpecho.cpx.test/v1",
        "kind": "TCPEcho",
        "metadata": {"namespace": "default", "name": name},
        "spec": {"port": port, "backend": backend, **extra},
    }


@attrs.frozen
class EchoCluster:
    name: str
    origin: ObjectKey | None
    address: str = ""  # STATIC when set
    port: int = 0
    service: ServicePort | None = None  # EDS otherwise
    fault: str = ""


@attrs.frozen
class EchoListener:
    name: str
    origin: ObjectKey | None
    port: int
    cluster: str


@attrs.frozen
class Unclaimed:
    name: str
    origin: ObjectKey | None


def build_cluster(node: EchoCluster) -> cluster_pb2.Cluster:
    if node.fault == "crash":
        raise RuntimeError("the backend table is on fire")
    cluster = cluster_pb2.Cluster(name="" if node.fault == "nameless" else node.name)
    cluster.connect_timeout.seconds = 2
    if node.service is not None:
        cluster.type = cluster_pb2.Cluster.EDS
        cluster.eds_cluster_config.service_name = node.service.eds_name
        source = cluster.eds_cluster_config.eds_config
        source.ads.SetInParent()
        source.resource_api_version = config_source_pb2.V3
        return cluster
    cluster.type = cluster_pb2.Cluster.STATIC
    cluster.load_assignment.cluster_name = node.name
    endpoint = cluster.load_assignment.endpoints.add().lb_endpoints.add().endpoint
    endpoint.address.socket_address.address = node.address
    endpoint.address.socket_address.port_value = node.port
    return cluster


def build_listener(node: EchoListener) -> listener_pb2.Listener:
    listener = listener_pb2.Listener(name=node.name)
    listener.address.socket_address.address = "127.0.0.1"
    listener.address.socket_address.port_value = node.port
    proxy = tcp_proxy_pb2.TcpProxy(stat_prefix=node.name.replace("/", "_"), cluster=node.cluster)
    chain_filter = listener.filter_chains.add().filters.add(name="envoy.filters.network.tcp_proxy")
    chain_filter.typed_config.Pack(proxy)
    return listener


def cluster_ports(node: EchoCluster) -> tuple[ServicePort, ...]:
    return (node.service,) if node.service is not None else ()


class TCPEchoProcessor:
    def __init__(self, config: Config) -> None:
        self.config = config

    def run(self, dag: DAG, source: SourceView) -> None:
        for obj in source.list(TCPECHO):
            key = ObjectKey.of(obj)
            with blame(key):
                self._add(dag, key, obj.get("spec") or {})

    @staticmethod
    def _add(dag: DAG, key: ObjectKey, spec: Mapping[str, Any]) -> None:
        name = f"tcpecho/{key.namespace}/{key.name}"
        backend = spec["backend"]
        fault = str(spec.get("break", ""))
        if fault == "unclaimed":
            dag.add_cluster_node(Unclaimed(name=name, origin=key))
        elif "service" in backend:
            port = ServicePort(
                namespace=key.namespace,
                name=backend["service"],
                port=int(backend["port"]),
                port_name=str(backend.get("portName", "")),
            )
            dag.add_cluster_node(EchoCluster(name=name, origin=key, service=port, fault=fault))
        else:
            node = EchoCluster(name=name, origin=key, address=backend["address"], port=int(backend["port"]))
            dag.add_cluster_node(attrs.evolve(node, fault=fault))
        dag.add_listener_node(EchoListener(name=name, origin=key, port=int(spec["port"]), cluster=name))


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=TCPECHO)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(name="tcpecho", factory=TCPEchoProcessor, phase=Phase.LISTENERS)


@hookimpl
def cpx_listener_kinds() -> Iterator[ListenerKindSpec]:
    yield ListenerKindSpec(
        name="tcpecho",
        node_type=EchoListener,
        build=build_listener,
        clusters=lambda node: (node.cluster,),
        description="a TCP proxy on a port of the object's choosing",
    )


@hookimpl
def cpx_cluster_kinds() -> Iterator[ClusterKindSpec]:
    yield ClusterKindSpec(
        name="tcpecho",
        node_type=EchoCluster,
        build=build_cluster,
        service_ports=cluster_ports,
        description="a STATIC address or a Service port's endpoints",
    )
