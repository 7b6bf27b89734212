"""EDS: ClusterLoadAssignments from EndpointSlices, and the endpoint fast path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
from envoy.config.endpoint.v3 import endpoint_pb2 as endpoint_v3

from cpx.config import Config
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import (
    Cluster,
    HealthCheck,
    LoadAssignment,
    PathKind,
    PathMatch,
    Route,
    ServicePort,
)
from cpx.objects import ObjectKey
from cpx.records import ClusterKindSpec
from cpx.sources.cache import SourceCache
from cpx.xds import resource
from cpx.xds.caches import endpoints as eds
from cpx.xds.caches.endpoints import EndpointCache
from cpx.xds.contributions import Contributions

HTTP = ServicePort(namespace="default", name="kuard", port=80, port_name="http", target_port=8080)


Translate = Callable[
    [str, Sequence[eds.PortEndpoints], Sequence[int] | None], endpoint_v3.ClusterLoadAssignment
]


def _recorded(calls: list[str], real: Translate) -> Translate:
    """``real``, noting the name of each cluster it translates."""

    def translate(
        name: str, feeds: Sequence[eds.PortEndpoints], weights: Sequence[int] | None = None
    ) -> endpoint_v3.ClusterLoadAssignment:
        calls.append(name)
        return real(name, feeds, weights)

    return translate


def dag_of(
    *ports: ServicePort,
    clusters: tuple[Cluster, ...] = (),
    extensions: tuple[PortsNode | MergedNode, ...] = (),
) -> DAG:
    dag = DAG()
    dag.ensure_listener("ingress_http", Protocol.HTTP, "0.0.0.0", 8080)
    vhost = dag.ensure_virtual_host("ingress_http", "example.com")
    all_clusters = (*(Cluster(upstream=p) for p in ports), *clusters)
    for i, c in enumerate(all_clusters):
        vhost.add_route(Route(path=PathMatch(kind=PathKind.PREFIX, value=f"/{i}"), clusters=(c,)))
    for ext in extensions:
        dag.add_cluster_node(ext)
    return dag


@attrs.frozen
class PortsNode:
    """A plugin's own cluster node reading the endpoints of some Service ports."""

    name: str
    upstreams: tuple[ServicePort, ...]
    origin: ObjectKey | None = None


PORTS_KIND = ClusterKindSpec(
    name="ports", node_type=PortsNode, build=lambda node: None, service_ports=lambda node: node.upstreams
)


def endpoint(ip: str, *more: str, ready: bool | None = None) -> dict[str, Any]:
    ep: dict[str, Any] = {"addresses": [ip, *more]}
    if ready is not None:
        ep["conditions"] = {"ready": ready}
    return ep


def port(name: str | None, number: int, protocol: str | None = "TCP") -> dict[str, Any]:
    p: dict[str, Any] = {"port": number}
    if name is not None:
        p["name"] = name
    if protocol is not None:
        p["protocol"] = protocol
    return p


def slice_(
    name: str,
    ports: list[dict[str, Any]],
    endpoints: list[dict[str, Any]],
    *,
    service: str = "kuard",
    namespace: str = "default",
    address_type: str = "IPv4",
    version: str = "1",
) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "resourceVersion": version,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": address_type,
        "ports": ports,
        "endpoints": endpoints,
    }


def service(name: str, ports: list[dict[str, Any]], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"ports": ports},
    }


def cache_for(source: SourceCache, dag: DAG, *kinds: ClusterKindSpec) -> EndpointCache:
    cache = EndpointCache(Config())
    cache.bind_contributions(Contributions(cluster_kinds=kinds))
    cache.bind_source(source)
    cache.on_change(dag)
    return cache


def decode(cache: EndpointCache) -> dict[str, endpoint_v3.ClusterLoadAssignment]:
    out = {}
    for name, res in cache.contents().items():
        assert res.type_url == resource.ENDPOINT == cache.type_url
        cla = endpoint_v3.ClusterLoadAssignment()
        cla.ParseFromString(res.body)
        assert cla.cluster_name == name
        out[name] = cla
    return out


def addresses(cla: endpoint_v3.ClusterLoadAssignment) -> list[tuple[str, int]]:
    return [
        (lb.endpoint.address.socket_address.address, lb.endpoint.address.socket_address.port_value)
        for locality in cla.endpoints
        for lb in locality.lb_endpoints
    ]


def endpoints_of(source: SourceCache, *ports: ServicePort) -> dict[str, list[tuple[str, int]]]:
    return {name: addresses(cla) for name, cla in decode(cache_for(source, dag_of(*ports))).items()}


# -- translation -------------------------------------------------------------------------------


def test_ready_endpoints_sorted_first_address() -> None:
    source = SourceCache()
    source.insert(
        slice_(
            "kuard-a",
            [port("http", 8080)],
            [
                endpoint("10.0.0.9"),  # no condition: ready
                endpoint("10.0.0.10", "10.0.0.99", ready=True),  # first address only
                endpoint("10.0.0.3", ready=False),
                {"addresses": []},  # malformed: skipped
            ],
        )
    )
    cache = cache_for(source, dag_of(HTTP))
    (cla,) = decode(cache).values()
    assert cla.cluster_name == "default/kuard/http"
    (locality,) = cla.endpoints
    assert locality.load_balancing_weight.value == 1
    assert addresses(cla) == [("10.0.0.10", 8080), ("10.0.0.9", 8080)]
    for lb in locality.lb_endpoints:
        assert not lb.endpoint.HasField("health_check_config")


def test_service_without_endpoints_gets_empty_cla() -> None:
    (cla,) = decode(cache_for(SourceCache(), dag_of(HTTP))).values()
    assert cla.cluster_name == "default/kuard/http"
    assert not cla.endpoints


def test_port_name_mismatch_yields_no_endpoints() -> None:
    source = SourceCache()
    source.insert(slice_("kuard-a", [port("web", 8080)], [endpoint("10.0.0.1")]))
    assert endpoints_of(source, HTTP) == {"default/kuard/http": []}


def test_named_port_matched_by_name_not_target_port() -> None:
    # Service port 80 "http" targets 8080, but pods publish the named port on 9090: name wins.
    source = SourceCache()
    source.insert(slice_("kuard-a", [port("metrics", 8080), port("http", 9090)], [endpoint("10.0.0.1")]))
    assert endpoints_of(source, HTTP) == {"default/kuard/http": [("10.0.0.1", 9090)]}


def test_unnamed_service_port_matches_unnamed_slice_port() -> None:
    unnamed = ServicePort(namespace="default", name="kuard", port=80, target_port=8080)
    source = SourceCache()
    source.insert(slice_("kuard-a", [port(None, 8080)], [endpoint("10.0.0.1")]))
    source.insert(slice_("kuard-b", [port("http", 9090)], [endpoint("10.0.0.2")]))
    assert endpoints_of(source, unnamed) == {"default/kuard": [("10.0.0.1", 8080)]}


def test_only_tcp_ports_and_missing_protocol_is_tcp() -> None:
    source = SourceCache()
    source.insert(slice_("kuard-udp", [port("http", 53, "UDP")], [endpoint("10.0.0.1")]))
    source.insert(slice_("kuard-tcp", [port("http", 8080, None)], [endpoint("10.0.0.2")]))
    assert endpoints_of(source, HTTP) == {"default/kuard/http": [("10.0.0.2", 8080)]}


def test_dedupe_across_slices_and_sort() -> None:
    source = SourceCache()
    source.insert(slice_("kuard-b", [port("http", 8080)], [endpoint("10.0.0.2"), endpoint("10.0.0.1")]))
    source.insert(slice_("kuard-a", [port("http", 8080)], [endpoint("10.0.0.1"), endpoint("10.0.0.3")]))
    assert endpoints_of(source, HTTP) == {
        "default/kuard/http": [("10.0.0.1", 8080), ("10.0.0.2", 8080), ("10.0.0.3", 8080)]
    }


def test_fqdn_slices_ignored_ipv6_kept() -> None:
    source = SourceCache()
    source.insert(slice_("kuard-f", [port("http", 8080)], [endpoint("pod.example.com")], address_type="FQDN"))
    source.insert(slice_("kuard-6", [port("http", 8080)], [endpoint("fd00::1")], address_type="IPv6"))
    assert endpoints_of(source, HTTP) == {"default/kuard/http": [("fd00::1", 8080)]}


def test_other_services_slices_not_used() -> None:
    source = SourceCache()
    source.insert(slice_("other-a", [port("http", 8080)], [endpoint("10.0.0.1")], service="other"))
    source.insert(slice_("kuard-a", [port("http", 8080)], [endpoint("10.0.0.1")], namespace="elsewhere"))
    assert endpoints_of(source, HTTP) == {"default/kuard/http": []}


def test_health_port_sets_per_endpoint_health_check_port() -> None:
    source = SourceCache()
    source.insert(service("kuard", [{"name": "http", "port": 80}, {"name": "health", "port": 8081}]))
    source.insert(
        slice_(
            "kuard-a",
            [port("http", 8080), port("health", 9000)],
            [endpoint("10.0.0.1"), endpoint("10.0.0.2")],
        )
    )
    c = Cluster(upstream=HTTP, health_check=HealthCheck(path="/healthz", port=8081))
    (cla,) = decode(cache_for(source, dag_of(clusters=(c,)))).values()
    assert addresses(cla) == [("10.0.0.1", 8080), ("10.0.0.2", 8080)]
    assert [lb.endpoint.health_check_config.port_value for lb in cla.endpoints[0].lb_endpoints] == [
        9000,
        9000,
    ]


def test_health_port_same_as_service_port_is_not_separate() -> None:
    source = SourceCache()
    source.insert(service("kuard", [{"name": "http", "port": 80}]))
    source.insert(slice_("kuard-a", [port("http", 8080)], [endpoint("10.0.0.1")]))
    c = Cluster(upstream=HTTP, health_check=HealthCheck(path="/healthz", port=80))
    (cla,) = decode(cache_for(source, dag_of(clusters=(c,)))).values()
    assert not cla.endpoints[0].lb_endpoints[0].endpoint.HasField("health_check_config")


def test_external_name_upstreams_have_no_cla() -> None:
    ext = ServicePort(namespace="default", name="ext", port=443, external_name="api.example.com")
    assert endpoints_of(SourceCache(), ext, HTTP) == {"default/kuard/http": []}


def test_one_cla_per_eds_name_sorted() -> None:
    other_protocol = ServicePort(
        namespace="default", name="kuard", port=80, port_name="http", target_port="x"
    )
    ports = [
        ServicePort(namespace="b", name="svc", port=80),
        HTTP,
        other_protocol,  # same EDS name as HTTP
        ServicePort(namespace="a", name="svc", port=80, port_name="web"),
    ]
    names = list(endpoints_of(SourceCache(), *ports))
    assert names == ["a/svc/web", "b/svc", "default/kuard/http"]


def test_extension_clusters() -> None:
    auth = ServicePort(namespace="auth", name="authz", port=9000, port_name="grpc")
    canary = ServicePort(namespace="auth", name="authz-canary", port=9000, port_name="grpc")
    source = SourceCache()
    source.insert(
        slice_("authz-a", [port("grpc", 9001)], [endpoint("10.1.0.1")], service="authz", namespace="auth")
    )
    source.insert(
        slice_(
            "canary-a", [port("grpc", 9001)], [endpoint("10.1.0.2")], service="authz-canary", namespace="auth"
        )
    )
    single = PortsNode(name="extension/auth/one", upstreams=(auth,))
    multi = PortsNode(name="extension/auth/two", upstreams=(auth, canary))
    got = decode(cache_for(source, dag_of(extensions=(single, multi)), PORTS_KIND))
    # One CLA per Service port, shared by every node that reads it.
    assert sorted(got) == ["auth/authz-canary/grpc", "auth/authz/grpc"]
    assert addresses(got["auth/authz/grpc"]) == [("10.1.0.1", 9001)]
    assert addresses(got["auth/authz-canary/grpc"]) == [("10.1.0.2", 9001)]


@attrs.frozen
class MergedNode:
    """A plugin's cluster reading one ClusterLoadAssignment merged from weighted Service ports."""

    name: str
    upstreams: tuple[ServicePort, ...]
    weights: tuple[int, ...]
    origin: ObjectKey | None = None


MERGED_KIND = ClusterKindSpec(
    name="merged",
    node_type=MergedNode,
    build=lambda node: None,
    load_assignments=lambda node: (
        LoadAssignment(name=node.name, ports=node.upstreams, weights=node.weights),
    ),
)


def test_a_merged_load_assignment_has_a_weighted_locality_per_service() -> None:
    auth = ServicePort(namespace="auth", name="authz", port=9000, port_name="grpc")
    canary = ServicePort(namespace="auth", name="authz-canary", port=9000, port_name="grpc")
    source = SourceCache()
    source.insert(
        slice_("authz-a", [port("grpc", 9001)], [endpoint("10.1.0.1")], service="authz", namespace="auth")
    )
    node = MergedNode(name="extension/auth/ext", upstreams=(auth, canary), weights=(3, 0))
    cache = cache_for(source, dag_of(extensions=(node,)), MERGED_KIND)
    [cla] = decode(cache).values()
    assert cla.cluster_name == "extension/auth/ext"
    assert [(loc.lb_endpoints[0].endpoint.address.socket_address.address, loc.load_balancing_weight.value)
            for loc in cla.endpoints] == [("10.1.0.1", 3)]  # fmt: skip
    # The canary's endpoints arrive: the fast path updates the merged CLA; weight 0 stays unset.
    source.insert(
        slice_(
            "canary-a", [port("grpc", 9001)], [endpoint("10.1.0.2")], service="authz-canary", namespace="auth"
        )
    )
    assert cache.on_endpoints_change(source, [("auth", "authz-canary")])
    [cla] = decode(cache).values()
    assert [loc.HasField("load_balancing_weight") for loc in cla.endpoints] == [True, False]
    # New weights alone make a new resource.
    before = cache.contents()["extension/auth/ext"]
    cache.on_change(dag_of(extensions=(attrs.evolve(node, weights=(1, 1)),)))
    assert cache.contents()["extension/auth/ext"] is not before
    assert [loc.load_balancing_weight.value for loc in decode(cache)["extension/auth/ext"].endpoints] == [
        1,
        1,
    ]


def test_on_change_needs_a_source() -> None:
    with pytest.raises(RuntimeError, match="bind_source"):
        EndpointCache(Config()).on_change(dag_of(HTTP))


# -- memoisation and the fast path -------------------------------------------------------------


def three_services() -> tuple[SourceCache, EndpointCache, list[ServicePort]]:
    ports = [ServicePort(namespace="ns", name=f"s{i}", port=80, port_name="http") for i in range(3)]
    source = SourceCache()
    for i, p in enumerate(ports):
        source.insert(
            slice_(
                f"{p.name}-a", [port("http", 8080)], [endpoint(f"10.0.{i}.1")], service=p.name, namespace="ns"
            )
        )
    return source, cache_for(source, dag_of(*ports)), ports


def test_rebuild_with_nothing_changed_keeps_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    _, cache, ports = three_services()
    before = cache.contents()
    identities = {name: id(r) for name, r in before.items()}
    calls: list[str] = []
    real = eds.cluster_load_assignment
    monkeypatch.setattr(eds, "cluster_load_assignment", _recorded(calls, real))
    cache.on_change(dag_of(*ports))
    assert calls == []
    assert cache.contents() is before
    assert {name: id(r) for name, r in cache.contents().items()} == identities


def test_fast_path_changes_only_the_affected_cla() -> None:
    source, cache, _ = three_services()
    before = cache.contents()
    source.insert(
        slice_(
            "s1-a",
            [port("http", 8080)],
            [endpoint("10.0.1.1"), endpoint("10.0.1.2")],
            service="s1",
            namespace="ns",
            version="2",
        )
    )
    assert cache.on_endpoints_change(source, [("ns", "s1")]) is True
    after = cache.contents()
    assert after is not before  # a new mapping; the old one is untouched
    assert list(after) == list(before)
    assert after["ns/s0/http"] is before["ns/s0/http"]
    assert after["ns/s2/http"] is before["ns/s2/http"]
    assert after["ns/s1/http"] is not before["ns/s1/http"]
    assert after["ns/s1/http"].version != before["ns/s1/http"].version
    assert addresses(decode(cache)["ns/s1/http"]) == [("10.0.1.1", 8080), ("10.0.1.2", 8080)]
    assert addresses(endpoint_v3.ClusterLoadAssignment.FromString(before["ns/s1/http"].body)) == [
        ("10.0.1.1", 8080)
    ]


def test_fast_path_ignores_unrelated_services() -> None:
    source, cache, _ = three_services()
    before = cache.contents()
    source.insert(
        slice_("x-a", [port("http", 8080)], [endpoint("10.9.9.9")], service="unused", namespace="ns")
    )
    assert cache.on_endpoints_change(source, [("ns", "unused"), ("other", "s1")]) is False
    assert cache.contents() is before


def test_fast_path_irrelevant_slice_change_keeps_resource() -> None:
    source, cache, _ = three_services()
    before = cache.contents()
    # A new slice object whose only change is an unready endpoint: same CLA.
    source.insert(
        slice_(
            "s0-a",
            [port("http", 8080)],
            [endpoint("10.0.0.1"), endpoint("10.0.0.7", ready=False)],
            service="s0",
            namespace="ns",
            version="2",
        )
    )
    assert cache.on_endpoints_change(source, [("ns", "s0")]) is False
    assert cache.contents() is before


def test_fast_path_slice_deleted_empties_cla() -> None:
    source, cache, _ = three_services()
    source.remove(slice_("s2-a", [], [], service="s2", namespace="ns"))
    assert cache.on_endpoints_change(source, {("ns", "s2")}) is True
    got = decode(cache)
    assert got["ns/s2/http"].endpoints == []
    assert addresses(got["ns/s0/http"]) == [("10.0.0.1", 8080)]


def test_fast_path_relabelled_slice_updates_its_old_service_too() -> None:
    """A slice moved to another Service: the event names the new one, the old CLA changes too."""
    source, cache, _ = three_services()
    source.insert(
        slice_(
            "s1-a", [port("http", 8080)], [endpoint("10.0.1.1")], service="s2", namespace="ns", version="2"
        )
    )
    assert cache.on_endpoints_change(source, [("ns", "s2")]) is True
    got = {name: addresses(cla) for name, cla in decode(cache).items()}
    assert got["ns/s1/http"] == []
    assert got["ns/s2/http"] == [("10.0.1.1", 8080), ("10.0.2.1", 8080)]


def test_fast_path_updates_every_cla_of_a_service() -> None:
    http = ServicePort(namespace="ns", name="multi", port=80, port_name="http")
    grpc = ServicePort(namespace="ns", name="multi", port=90, port_name="grpc")
    source = SourceCache()
    cache = cache_for(source, dag_of(http, grpc))
    source.insert(
        slice_(
            "multi-a",
            [port("http", 8080), port("grpc", 9090)],
            [endpoint("10.0.0.1")],
            service="multi",
            namespace="ns",
        )
    )
    assert cache.on_endpoints_change(source, [("ns", "multi")]) is True
    got = {name: addresses(cla) for name, cla in decode(cache).items()}
    assert got == {"ns/multi/grpc": [("10.0.0.1", 9090)], "ns/multi/http": [("10.0.0.1", 8080)]}


def test_rebuild_after_fast_path_reuses_fast_path_results(monkeypatch: pytest.MonkeyPatch) -> None:
    source, cache, ports = three_services()
    source.insert(
        slice_(
            "s1-a", [port("http", 8080)], [endpoint("10.0.1.5")], service="s1", namespace="ns", version="2"
        )
    )
    cache.on_endpoints_change(source, [("ns", "s1")])
    after_fast = cache.contents()
    calls: list[str] = []
    real = eds.cluster_load_assignment
    monkeypatch.setattr(eds, "cluster_load_assignment", _recorded(calls, real))
    cache.on_change(dag_of(*ports))
    assert calls == []
    assert cache.contents() is after_fast


def test_cla_dropped_when_dag_stops_using_it() -> None:
    source, cache, ports = three_services()
    cache.on_change(dag_of(ports[0]))
    assert list(cache.contents()) == ["ns/s0/http"]
    assert cache.on_endpoints_change(source, [("ns", "s1")]) is False
