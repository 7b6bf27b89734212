"""What incremental consumers rely on: the source cache's change log and lookup recording, the
xDS caches' reuse of unchanged work, and the pipeline's status diff."""

from __future__ import annotations

from typing import Any

import pytest

from cpx import objects as k8s
from cpx.builtin.filters import with_builtin_filters
from cpx.config import Config
from cpx.dag.builder import Builder
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route, ServicePort
from cpx.objects import ObjectKey
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.sources.cache import CHANGE_LOG_LIMIT, SourceCache, _ChangeLog
from cpx.xds.caches.clusters import ClusterCache
from cpx.xds.caches.endpoints import EndpointCache
from cpx.xds.caches.routes import RouteCache

# Contour's single-RouteConfiguration shape: what these tests inspect (the scoped shape's split of
# it is tested in test_scoped_routes.py).
SINGLE = Config(route_shape="single")

WEB = ServicePort(namespace="default", name="web", port=80, port_name="http")


def service(name: str = "web", port: int = 80, version: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": "default", "name": name, "resourceVersion": version},
        "spec": {"ports": [{"name": "http", "port": port}]},
    }


def endpoint_slice(ip: str, service_name: str = "web", version: str = "1", name: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": "default",
            "name": name or f"{service_name}-1",
            "resourceVersion": version,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": [ip]}],
    }


def ingress(name: str, host: str, service_name: str = "web", version: str = "1") -> dict[str, Any]:
    backend = {"service": {"name": service_name, "port": {"number": 80}}}
    path = {"path": "/", "pathType": "Prefix", "backend": backend}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"namespace": "default", "name": name, "resourceVersion": version},
        "spec": {"rules": [{"host": host, "http": {"paths": [path]}}]},
    }


# -- source cache ----------------------------------------------------------------------------------


def test_change_log_lists_real_changes_only() -> None:
    source = SourceCache()
    start = source.revision
    source.insert(service())
    source.insert(service())  # same resourceVersion: no change
    source.insert(endpoint_slice("10.0.0.1"))
    source.remove(service())
    source.remove(service())  # already gone: no change
    web = ObjectKey("", "Service", "default", "web")
    web_1 = ObjectKey("discovery.k8s.io", "EndpointSlice", "default", "web-1")
    assert source.changes_since(start) == [web, web_1, web]
    assert source.changes_since(source.revision) == []
    assert source.endpoint_changes_since(start) == [("default", "web")]
    assert source.object_revision(ObjectKey("", "Service", "default", "web")) == 0  # removed
    source.insert(service(version="2"))
    assert source.object_revision(ObjectKey("", "Service", "default", "web")) == source.revision
    assert source.endpoints_revision("default", "web") == start + 2
    source.remove(endpoint_slice("10.0.0.1"))
    assert source.endpoints_revision("default", "web") == 0


def test_a_status_write_keeps_the_cached_status_current_without_a_change() -> None:
    """A status-only update (a status write coming back through the watch) needs no rebuild, but
    plugins read the object's status (lastTransitionTime, their own entries): the cached object
    takes it, in place, so that it keeps its identity."""
    source = SourceCache()
    route = ingress("r", "r.example.com")
    source.insert(route)
    cached = source.get(ObjectKey("networking.k8s.io", "Ingress", "default", "r"))
    start = source.revision
    written = {**route, "metadata": {**route["metadata"], "resourceVersion": "2"}, "status": {"ours": 1}}
    assert source.insert(written) is False
    assert source.changes_since(start) == []
    assert source.get(ObjectKey("networking.k8s.io", "Ingress", "default", "r")) is cached
    assert cached is not None and cached["status"] == {"ours": 1}
    assert source.insert({**written, "status": {"ours": 1, "theirs": 2}}) is False
    assert cached["status"] == {"ours": 1, "theirs": 2}
    assert source.insert(ingress("r", "r.example.com", version="3")) is False  # the status gone again
    assert "status" not in cached and source.changes_since(start) == []


def test_a_slice_moving_to_another_service_changes_both() -> None:
    source = SourceCache()
    source.insert(endpoint_slice("10.0.0.1", "a", name="s"))
    before = source.revision
    source.insert(endpoint_slice("10.0.0.1", "b", version="2", name="s"))
    assert sorted(source.endpoint_changes_since(before) or []) == [("default", "a"), ("default", "b")]
    assert source.endpoint_slices("default", "a") == []
    assert len(source.endpoint_slices("default", "b")) == 1


def test_trimmed_change_log_says_so() -> None:
    log: _ChangeLog[int] = _ChangeLog(limit=4)
    for revision in range(1, 7):
        log.append(revision, revision)
    assert log.since(0) is None  # entries 1.. were dropped: the consumer must recompute all
    assert log.since(4) == [5, 6]
    assert log.since(6) == []
    assert CHANGE_LOG_LIMIT >= 1 << 16


def test_recording_collects_lookups_and_volatility() -> None:
    source = SourceCache()
    source.insert(service())
    with source.recording() as outer:
        source.lookup_service("default", "web")
        with source.recording() as inner:
            source.get(ObjectKey("", "Secret", "default", "missing"))
        assert not outer.volatile
        list(source.list(k8s.SERVICE))
    missing = ObjectKey("", "Secret", "default", "missing")
    assert inner.keys == {missing}
    assert outer.keys == {ObjectKey("", "Service", "default", "web"), missing}
    assert outer.volatile  # a listing depends on objects the log cannot pin down
    # mypy keeps `not outer.volatile` from above although list() changed it:
    source.lookup_service("default", "web")  # type: ignore[unreachable]  # no recording active: no error


# -- xDS caches ----------------------------------------------------------------------------------


def dag_with(*routes: tuple[str, Cluster]) -> DAG:
    dag = DAG()
    dag.ensure_listener("ingress_http", Protocol.HTTP, "0.0.0.0", 8080)
    for host, cluster in routes:
        vhost = dag.ensure_virtual_host("ingress_http", host)
        vhost.add_route(Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), clusters=(cluster,)))
    dag.seal()
    return dag


def test_route_cache_keeps_unchanged_resources() -> None:
    cache = with_builtin_filters(RouteCache(SINGLE))
    web = Cluster(upstream=WEB)
    cache.on_change(dag_with(("a.example.com", web), ("b.example.com", web)))
    first = cache.contents()
    cache.on_change(dag_with(("a.example.com", web), ("b.example.com", web)))
    assert cache.contents() is first  # equal routes: same mapping, same Resource objects
    cache.on_change(dag_with(("a.example.com", web)))
    assert cache.contents()["ingress_http"] is not first["ingress_http"]


def test_cluster_cache_ignores_the_order_of_the_dag() -> None:
    cache = ClusterCache(Config())
    a, b = Cluster(upstream=WEB), Cluster(upstream=ServicePort(namespace="default", name="b", port=80))
    cache.on_change(dag_with(("a.example.com", a), ("b.example.com", b)))
    first = cache.contents()
    cache.on_change(dag_with(("0.example.com", b), ("a.example.com", a)))
    assert cache.contents() is first
    cache.on_change(dag_with(("a.example.com", a)))
    assert [name.split("/")[1] for name in cache.contents()] == ["web"]


def test_endpoint_changes_reach_a_rebuild_without_the_fast_path() -> None:
    source = SourceCache()
    cache = EndpointCache(Config())
    cache.bind_source(source)
    source.insert(endpoint_slice("10.0.0.1"))
    dag = dag_with(("a.example.com", Cluster(upstream=WEB)))
    cache.on_change(dag)
    first = cache.contents()
    cache.on_change(dag_with(("a.example.com", Cluster(upstream=WEB))))
    assert cache.contents() is first  # nothing changed
    # A slice changes and nobody calls on_endpoints_change: the next DAG still sees it.
    source.insert(endpoint_slice("10.0.0.2", version="2"))
    cache.on_change(dag_with(("a.example.com", Cluster(upstream=WEB))))
    assert b"10.0.0.2" in cache.contents()["default/web/http"].body
    # A slice of a Service the DAG does not use changes nothing.
    latest = cache.contents()
    source.insert(endpoint_slice("10.9.9.9", "other"))
    cache.on_change(dag_with(("a.example.com", Cluster(upstream=WEB))))
    assert cache.contents() is latest


# -- pipeline --------------------------------------------------------------------------------------


def pipeline() -> SnapshotHandler:
    p = SnapshotHandler.create(PluginHost.load(["ingress"]), SINGLE)
    p.upsert(service())
    return p


def test_changed_statuses_reports_only_what_changed() -> None:
    p = pipeline()
    p.upsert(ingress("a", "a.example.com"))
    p.upsert(ingress("b", "b.example.com", service_name="missing"))
    p.rebuild()
    first = p.changed_statuses()
    assert sorted(k.name for k in first) == ["a", "b"]
    assert first == {k: v for k, v in p.statuses().items()}
    p.rebuild()
    assert p.changed_statuses() == {}
    # A new Ingress, and the missing Service appearing (b's notes go away); a's status is unchanged.
    p.upsert(ingress("c", "c.example.com"))
    p.upsert(service("missing"))
    p.rebuild()
    changed = p.changed_statuses()
    assert sorted(k.name for k in changed) == ["b", "c"]
    assert all(s is not None and not s.notes for s in changed.values())
    p.delete(ingress("a", "a.example.com"))
    p.rebuild()
    assert {k.name: s for k, s in p.changed_statuses().items()} == {"a": None}


def test_builder_seals_the_dag_and_walks_it_once() -> None:
    p = pipeline()
    p.upsert(ingress("a", "a.example.com"))
    dag = Builder(p.builder.processors).build(p.source)
    assert dag.sealed
    assert dag.unique_clusters() is dag.unique_clusters()
    assert dag.cluster_set() == frozenset(dag.clusters())


@pytest.mark.parametrize(
    ("field", "before", "after"),
    [
        ("stringData", {"tls.crt": "a"}, {"tls.crt": "b"}),  # standalone manifests often use it
        ("binaryData", {"ca.crt": "YQ=="}, {"ca.crt": "Yg=="}),
        ("addressType", "IPv4", "IPv6"),
    ],
)
def test_a_change_to_any_content_field_is_a_change(field: str, before: Any, after: Any) -> None:
    source = SourceCache()
    meta = {"namespace": "default", "name": "x", "resourceVersion": "1"}
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, field: before}
    source.insert(obj)
    start = source.revision
    changed = {**obj, "metadata": {**meta, "resourceVersion": "2"}, field: after}
    source.insert(changed)
    assert source.changes_since(start) == [ObjectKey("", "Secret", "default", "x")]
    source.insert({**changed, "metadata": {**meta, "resourceVersion": "3"}})  # the same content
    assert source.changes_since(start) == [ObjectKey("", "Secret", "default", "x")]
