"""One change re-plans only the routes whose result can change; unchanged virtual hosts and statuses
are the same objects build after build.

Counts the routes each build planned (``RouteMemo.planned``) on a long-lived source and processor;
test_incremental_fuzz checks that what is kept is right.
"""

from __future__ import annotations

from typing import Any

from cpx import Config, KubeObject, ObjectKey
from cpx.dag import DAG
from cpx.testing import Builder, ListenerProcessor, SourceCache

from cpx_gatewayapi import plugin
from cpx_gatewayapi.processor import GatewayAPIProcessor

GROUP = "gateway.networking.k8s.io"
LISTENER = "http-80-127_0_0_10"
ROUTES = 5


def gateway(hostname: str | None = None) -> KubeObject:
    listener: dict[str, Any] = {"name": "http", "port": 80, "protocol": "HTTP"}
    if hostname is not None:
        listener["hostname"] = hostname
    spec = {
        "gatewayClassName": "contour",
        "addresses": [{"type": "IPAddress", "value": "127.0.0.10"}],
        "listeners": [listener],
    }
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": spec,
    }


def gateway_class() -> KubeObject:
    spec = {"controllerName": "projectcontour.io/gateway-controller"}
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "contour"},
        "spec": spec,
    }


def service(name: str, port: int = 80) -> KubeObject:
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": port}]}}


def route(index: int, host: str | None = None, path: str = "/", day: int = 1) -> KubeObject:
    meta = {"name": f"r{index}", "namespace": "default", "creationTimestamp": f"2026-01-0{day}T00:00:00Z"}
    rule = {
        "matches": [{"path": {"type": "PathPrefix", "value": path}}],
        "backendRefs": [{"name": f"s{index}", "port": 80}],
    }
    spec = {"parentRefs": [{"name": "gw"}], "hostnames": [host or f"r{index}.example.com"], "rules": [rule]}
    return {"apiVersion": f"{GROUP}/v1", "kind": "HTTPRoute", "metadata": meta, "spec": spec}


def key(index: int) -> ObjectKey:
    return ObjectKey(GROUP, "HTTPRoute", "default", f"r{index}")


class Stack:
    """A source and a processor that live across builds, as in ``cpx serve``."""

    def __init__(self, *objects: KubeObject) -> None:
        watches = {spec.gvk.group_kind: spec for spec in plugin.cpx_watches()}
        self.source = SourceCache(watches=watches)
        config = Config()
        self.processor = GatewayAPIProcessor.from_config(config)
        self.builder = Builder([("listeners", ListenerProcessor(config)), ("gatewayapi", self.processor)])
        for obj in (gateway_class(), gateway(), *objects, *(service(f"s{i}") for i in range(ROUTES))):
            self.source.insert(obj)
        self.dag = self.build()

    def build(self, *changes: KubeObject) -> DAG:
        for obj in changes:
            self.source.insert(obj)
        self.dag = self.builder.build(self.source)
        return self.dag

    @property
    def planned(self) -> int:
        return self.processor.routes.planned


def reason(dag: DAG, index: int) -> str:
    conditions = dag.statuses[key(index)]["parents"][0]["conditions"]
    return str(next(c["reason"] for c in conditions if c["type"] == "Accepted"))


def test_the_first_build_plans_every_route_and_an_unchanged_source_none() -> None:
    stack = Stack(*(route(i) for i in range(ROUTES)))
    assert stack.planned == ROUTES
    first = stack.dag
    again = stack.build()
    assert stack.planned == 0
    hosts = again.listeners[LISTENER].virtual_hosts
    assert sorted(hosts) == [f"r{i}.example.com" for i in range(ROUTES)]
    assert all(hosts[name] is vhost for name, vhost in first.listeners[LISTENER].virtual_hosts.items())
    assert all(again.statuses[key(i)] is first.statuses[key(i)] for i in range(ROUTES))


def test_a_changed_route_replans_only_itself_and_keeps_the_other_hosts_and_statuses() -> None:
    stack = Stack(*(route(i) for i in range(ROUTES)))
    before = stack.dag
    after = stack.build(route(2, path="/v2"))
    assert stack.planned == 1
    old, new = before.listeners[LISTENER].virtual_hosts, after.listeners[LISTENER].virtual_hosts
    assert [name for name in new if new[name] is not old[name]] == ["r2.example.com"]
    assert list(new["r2.example.com"].routes) != list(old["r2.example.com"].routes)
    # r2's status says what it said: last build's object, nothing to write.
    assert all(after.statuses[key(i)] is before.statuses[key(i)] for i in range(ROUTES))


def test_routes_on_one_host_meet_again_when_one_of_them_changes() -> None:
    # r0 is older and has the match first: r1's only rule conflicts, until r0 leaves the host.
    stack = Stack(route(0, "shared.example.com"), route(1, "shared.example.com", day=2))
    assert (reason(stack.dag, 0), reason(stack.dag, 1)) == ("Accepted", "RuleMatchConflict")
    dag = stack.build(route(0, "own.example.com"))
    assert stack.planned == 1
    assert (reason(dag, 0), reason(dag, 1)) == ("Accepted", "Accepted")
    assert sorted(dag.listeners[LISTENER].virtual_hosts) == ["own.example.com", "shared.example.com"]


def test_a_changed_service_replans_the_routes_reading_it() -> None:
    stack = Stack(*(route(i) for i in range(ROUTES)))
    before = stack.dag
    dag = stack.build(service("s3", 81))
    assert stack.planned == 1
    assert [i for i in range(ROUTES) if dag.statuses[key(i)] is not before.statuses[key(i)]] == [3]
    conditions = dag.statuses[key(3)]["parents"][0]["conditions"]
    assert [c["reason"] for c in conditions if c["type"] == "ResolvedRefs"] == ["BackendNotFound"]


def test_a_changed_gateway_replans_every_route() -> None:
    stack = Stack(*(route(i) for i in range(ROUTES)))
    dag = stack.build(gateway("r1.example.com"))
    assert stack.planned == ROUTES
    assert sorted(dag.listeners[LISTENER].virtual_hosts) == ["r1.example.com"]
    assert reason(dag, 0) == "NoMatchingListenerHostname"


def grpc_route(host: str, day: int) -> KubeObject:
    meta = {"name": "g", "namespace": "default", "creationTimestamp": f"2025-12-{day:02d}T00:00:00Z"}
    spec = {
        "parentRefs": [{"name": "gw"}],
        "hostnames": [host],
        "rules": [{"backendRefs": [{"name": "s0", "port": 80}]}],
    }
    return {"apiVersion": f"{GROUP}/v1", "kind": "GRPCRoute", "metadata": meta, "spec": spec}


def test_an_older_grpcroute_takes_only_its_host_without_replanning() -> None:
    # The GRPCRoute is older than every HTTPRoute: r1's host becomes its own; r1 conflicts there.
    stack = Stack(*(route(i) for i in range(ROUTES)))
    before = stack.dag
    after = stack.build(grpc_route("r1.example.com", day=1))
    assert stack.planned == 0  # no HTTPRoute planned again: only the claimed host is rebuilt
    old, new = before.listeners[LISTENER].virtual_hosts, after.listeners[LISTENER].virtual_hosts
    assert [name for name in new if name in old and new[name] is not old[name]] == ["r1.example.com"]
    [served] = new["r1.example.com"].routes.values()
    assert served.origin is not None and served.origin.kind == "GRPCRoute"
    assert (reason(after, 0), reason(after, 1)) == ("Accepted", "RuleMatchConflict")
    # It goes: r1 has its host again.
    stack.source.remove(grpc_route("r1.example.com", day=1))
    dag = stack.build()
    assert stack.planned == 0
    assert reason(dag, 1) == "Accepted"
    [back] = dag.listeners[LISTENER].virtual_hosts["r1.example.com"].routes.values()
    assert back.origin == key(1)
