"""The first build hands its clusters, endpoints and secrets out before building its routing."""

from __future__ import annotations

from typing import Any

from cpx.config import Config
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.xds.resource import CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET, Snapshot


def objects(name: str) -> list[dict[str, Any]]:
    meta = {"namespace": "default", "name": name}
    backend = {"service": {"name": name, "port": {"number": 80}}}
    path = {"path": "/", "pathType": "Prefix", "backend": backend}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": 80}]}},
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": meta,
            "spec": {"rules": [{"host": f"{name}.example.com", "http": {"paths": [path]}}]},
        },
    ]


def pipeline(*names: str) -> tuple[SnapshotHandler, list[Snapshot]]:
    p = SnapshotHandler.create(PluginHost.load(["ingress"]), Config())
    offered: list[Snapshot] = []
    p.on_first_clusters = offered.append
    for name in names:
        for obj in objects(name):
            p.upsert(obj)
    return p, offered


def test_the_first_build_offers_its_clusters_first_and_the_same_ones_again() -> None:
    p, offered = pipeline("a", "b")
    full = p.rebuild()
    (early,) = offered
    assert early.clusters_only and not full.clusters_only
    assert set(early.types) == {CLUSTER, ENDPOINT, SECRET}
    assert [name.split("/")[:3] for name in sorted(early.get(CLUSTER).resources)] == [
        ["default", "a", "80"],
        ["default", "b", "80"],
    ]
    for type_url in (CLUSTER, ENDPOINT, SECRET):
        assert early.get(type_url) is full.get(type_url)  # the server sees nothing changed
    assert full.get(LISTENER).resources and full.get(ROUTE).resources

    for obj in objects("c"):
        p.upsert(obj)
    p.rebuild()
    assert len(offered) == 1  # later builds publish whole snapshots only


def test_nothing_is_offered_early_when_whole_snapshots_are_checked() -> None:
    p, offered = pipeline("a")
    p.checkers.append(lambda snapshot: None)
    p.rebuild()
    assert offered == []
