"""Listener and cluster kinds: a plugin's own nodes, built whole by the plugin, served by the core.

The test plugin (``tests/plugins/cpx_test_tcpecho``) adds, per TCPEcho object, a TCP proxy listener
on a port of its own and a cluster of its own kind (STATIC or EDS).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2

from cpx import ClusterKindSpec, ListenerKindSpec, hookimpl
from cpx.builtin import plugin as builtin
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import DNSNameCluster, PathKind, PathMatch, Route, Secret
from cpx.errors import PluginError
from cpx.objects import ObjectKey
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.xds import resource
from cpx.xds.caches.clusters import ClusterCache
from cpx.xds.caches.secrets import SecretCache
from cpx.xds.contributions import Contributions
from cpx.xds.naming import secret_name

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))
import cpx_test_tcpecho as tcpecho

echo = tcpecho.manifest
KEY = ObjectKey("tcpecho.cpx.test", "TCPEcho", "default", "one")


def endpoint_slice(service: str, address: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": "default",
            "name": f"{service}-a",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address]}],
    }


def handler(*objects: dict[str, Any], plugins: tuple[tuple[str, object], ...] = ()) -> SnapshotHandler:
    host = PluginHost.from_modules([("core", builtin), ("tcpecho", tcpecho), *plugins])
    p = SnapshotHandler.create(host, Config())
    for obj in objects:
        p.upsert(obj)
    return p


def decoded(p: SnapshotHandler, type_url: str, cls: type[Any]) -> dict[str, Any]:
    out = {}
    for name, res in p.rebuild().get(type_url).resources.items():
        msg = cls()
        msg.ParseFromString(res.body)
        out[name] = msg
    return out


def problems(p: SnapshotHandler, key: ObjectKey) -> list[tuple[str, str, str]]:
    return [(n.type, n.reason, n.message) for n in p.statuses()[key].notes]


# -- what the kinds build -----------------------------------------------------------------------


def test_listener_and_static_cluster_of_a_plugin_kind() -> None:
    p = handler(echo("one", 10001, {"address": "127.0.0.2", "port": 9000}))
    listeners = decoded(p, resource.LISTENER, listener_pb2.Listener)
    assert list(listeners) == ["tcpecho/default/one"]  # the core's listeners have no hosts
    listener = listeners["tcpecho/default/one"]
    assert listener.address.socket_address.address == "127.0.0.1"
    assert listener.address.socket_address.port_value == 10001
    proxy = tcp_proxy_pb2.TcpProxy()
    listener.filter_chains[0].filters[0].typed_config.Unpack(proxy)
    assert proxy.cluster == "tcpecho/default/one"
    clusters = decoded(p, resource.CLUSTER, cluster_pb2.Cluster)
    cluster = clusters["tcpecho/default/one"]
    assert cluster.type == cluster_pb2.Cluster.STATIC
    address = cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address
    assert (address.address, address.port_value) == ("127.0.0.2", 9000)
    assert decoded(p, resource.ENDPOINT, endpoint_pb2.ClusterLoadAssignment) == {}
    assert p.statuses() == {}


def test_eds_cluster_of_a_plugin_kind_gets_its_service_endpoints() -> None:
    p = handler(
        echo("one", 10001, {"service": "backend", "port": 9000}), endpoint_slice("backend", "10.0.0.7", 9000)
    )
    cluster = decoded(p, resource.CLUSTER, cluster_pb2.Cluster)["tcpecho/default/one"]
    assert cluster.type == cluster_pb2.Cluster.EDS
    assert cluster.eds_cluster_config.service_name == "default/backend"
    clas = decoded(p, resource.ENDPOINT, endpoint_pb2.ClusterLoadAssignment)
    assert list(clas) == ["default/backend"]
    address = clas["default/backend"].endpoints[0].lb_endpoints[0].endpoint.address.socket_address
    assert (address.address, address.port_value) == ("10.0.0.7", 9000)


def test_unchanged_nodes_keep_their_resources() -> None:
    p = handler(echo("one", 10001, {"address": "127.0.0.2", "port": 9000}))
    first = p.rebuild()
    p.upsert(echo("two", 10002, {"address": "127.0.0.3", "port": 9000}))
    second = p.rebuild()
    for type_url in (resource.LISTENER, resource.CLUSTER):
        # Built once: the first object's resources are the very same objects after the change.
        before = first.get(type_url).resources["tcpecho/default/one"]
        assert second.get(type_url).resources["tcpecho/default/one"] is before
        assert len(second.get(type_url).resources) == 2


def test_secrets_of_plugin_nodes_are_served_over_sds() -> None:
    @attrs.frozen
    class Node:
        name: str
        origin: ObjectKey | None = None

    cert = Secret(namespace="ns", name="client", cert_pem=b"CERT", key_pem=b"KEY")
    ca = Secret(namespace="ns", name="ca", ca_pem=b"CA")
    cache = SecretCache(Config())
    cache.bind_contributions(
        Contributions(
            cluster_kinds=(
                ClusterKindSpec(name="c", node_type=Node, build=lambda n: None, secrets=lambda n: (cert,)),
            ),
            listener_kinds=(
                ListenerKindSpec(name="l", node_type=Node, build=lambda n: None, secrets=lambda n: (ca,)),
            ),
        )
    )
    dag = DAG()
    dag.add_cluster_node(Node("c"))
    dag.add_listener_node(Node("l"))
    cache.on_change(dag)
    assert list(cache.contents()) == sorted([secret_name(cert), secret_name(ca)])
    served = secret_pb2.Secret()
    served.ParseFromString(cache.contents()[secret_name(cert)].body)
    assert served.tls_certificate.certificate_chain.inline_bytes == b"CERT"


# -- what goes wrong ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"break": "unclaimed"},
            ("ClusterError", "UnknownKind", "no enabled plugin has a cluster kind for Unclaimed"),
        ),
        ({"break": "crash"}, ("InternalError", "TranslationFailed", "the backend table is on fire")),
        ({"break": "nameless"}, ("ClusterError", "InvalidCluster", "it has no name")),
        ({"port": 0}, ("ListenerError", "InvalidListener", "port 0 is not between 1 and 65535")),
        ({"port": 10002}, ("ListenerError", "AddressConflict", "is bound by 'tcpecho/default/good'")),
    ],
    ids=["unknown-node-type", "build-raises", "no-name", "port-0", "address-taken"],
)
def test_a_bad_node_leaves_out_its_object_and_notes_why(
    spec: dict[str, Any], expected: tuple[str, str, str]
) -> None:
    good = echo("good", 10002, {"address": "127.0.0.2", "port": 9000})
    bad = echo("one", 10001, {"address": "127.0.0.2", "port": 9000})
    bad["spec"].update(spec)
    p = handler(good, bad)
    listeners = decoded(p, resource.LISTENER, listener_pb2.Listener)
    assert "tcpecho/default/good" in listeners and "tcpecho/default/one" not in listeners
    clusters = decoded(p, resource.CLUSTER, cluster_pb2.Cluster)
    assert "tcpecho/default/good" in clusters and "tcpecho/default/one" not in clusters
    ((type_, reason, message),) = problems(p, KEY)
    assert (type_, reason) == expected[:2]
    assert expected[2] in message


def test_a_served_listener_keeps_its_address_against_a_newcomer() -> None:
    p = handler(echo("served", 10001, {"address": "127.0.0.2", "port": 9000}))
    p.rebuild()
    # Sorted (and added) before the served one: only having been served decides.
    p.upsert(echo("a-newcomer", 10001, {"address": "127.0.0.3", "port": 9000}))
    listeners = decoded(p, resource.LISTENER, listener_pb2.Listener)
    assert list(listeners) == ["tcpecho/default/served"]
    ((_, reason, message),) = problems(p, attrs.evolve(KEY, name="a-newcomer"))
    assert reason == "AddressConflict" and "is bound by 'tcpecho/default/served'" in message


def test_envoy_rules_apply_to_what_a_kind_builds() -> None:
    bad = echo("one", 10001, {"address": "not an address", "port": 9000})
    p = handler(echo("good", 10002, {"address": "127.0.0.2", "port": 9000}), bad)
    clusters = decoded(p, resource.CLUSTER, cluster_pb2.Cluster)
    assert list(clusters) == ["tcpecho/default/good"]
    ((type_, reason, message),) = problems(p, KEY)
    assert (type_, reason) == ("ClusterError", "EnvoyConstraintViolated")
    assert "Envoy would reject Cluster 'tcpecho/default/one'" in message


def test_a_node_without_origin_is_left_out_with_a_log(caplog: pytest.LogCaptureFixture) -> None:
    cache = ClusterCache(Config())
    cache.bind_contributions(Contributions())
    dag = DAG()
    dag.add_cluster_node(tcpecho.EchoCluster(name="static", origin=None, address="127.0.0.1", port=1))
    cache.on_change(dag)
    assert dict(cache.contents()) == {}
    assert "cluster 'static' left out: ClusterError (UnknownKind)" in caplog.text


def test_a_name_clash_between_nodes_notes_the_later_origin() -> None:
    first = tcpecho.EchoCluster(name="shared", origin=KEY, address="127.0.0.1", port=1)
    later_key = attrs.evolve(KEY, name="two")
    dag = DAG()
    dag.add_cluster_node(first)
    dag.add_cluster_node(attrs.evolve(first, origin=later_key, port=2))
    dag.add_cluster_node(first)  # the same node again is no clash
    assert dag.cluster_nodes() == (first,)
    assert [n.reason for n in dag.notes[later_key]] == ["NameConflict"]
    assert KEY not in dag.notes


def test_a_listener_node_named_like_a_core_listener_is_dropped_with_a_note() -> None:
    dag = DAG()
    dag.ensure_listener("ingress_http", Protocol.HTTP, "0.0.0.0", 8080)
    dag.ensure_virtual_host("ingress_http", "example.com").add_route(
        Route(path=PathMatch(kind=PathKind.PREFIX, value="/"))
    )
    dag.add_listener_node(tcpecho.EchoListener(name="ingress_http", origin=KEY, port=1, cluster="c"))
    dag.prune()
    assert dag.listener_nodes() == ()
    assert "already used by a core listener" in dag.notes[KEY][0].message


# -- registration ---------------------------------------------------------------------------------


class Copycat:
    """A second plugin claiming the test plugin's node type under another kind name."""

    @hookimpl
    def cpx_cluster_kinds(self) -> Iterator[ClusterKindSpec]:
        yield ClusterKindSpec(name="copy", node_type=tcpecho.EchoCluster, build=tcpecho.build_cluster)


class Namesake:
    @hookimpl
    def cpx_listener_kinds(self) -> Iterator[ListenerKindSpec]:
        yield ListenerKindSpec(name="tcpecho", node_type=tcpecho.Unclaimed, build=lambda n: None)


def test_host_lists_the_kinds() -> None:
    host = PluginHost.from_modules([("core", builtin), ("tcpecho", tcpecho)])
    contributions = host.xds_contributions()
    # The core's own dnsname kind first (cpx.dag.DNSNameCluster), then the plugin's.
    assert [k.node_type for k in contributions.cluster_kinds] == [DNSNameCluster, tcpecho.EchoCluster]
    assert [k.node_type for k in contributions.listener_kinds] == [tcpecho.EchoListener]


@pytest.mark.parametrize(
    ("other", "match"),
    [
        (Copycat(), r"cluster kind node type '.*EchoCluster' is registered by both 'tcpecho' and 'copycat'"),
        (Namesake(), r"listener kind 'tcpecho' is registered by both 'tcpecho' and 'copycat'"),
    ],
)
def test_duplicate_kinds_name_both_plugins(other: object, match: str) -> None:
    host = PluginHost.from_modules([("core", builtin), ("tcpecho", tcpecho), ("copycat", other)])
    with pytest.raises(PluginError, match=match):
        host.xds_contributions()
