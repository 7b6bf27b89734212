"""StatusUpdater and the Envoy Service watcher against an emulated API server.

The emulator is kmock's, with resourceVersions and 409 Conflict added
(:class:`cpx.testing.kubeversions.VersionedKubernetesEmulator`).  Statuses come from a real pipeline
with the ingress and httpproxy plugins, so their merges are the plugins' own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import kmock
import pytest

from cpx import objects as k8s
from cpx.config import Config
from cpx.objects import GroupVersionKind, ObjectKey
from cpx.ops.metrics import Metrics
from cpx.plugins import PluginHost
from cpx.records import StatusWriterSpec
from cpx.snapshot import ObjectStatus, SnapshotHandler
from cpx.sources.kube.rest import MERGE_PATCH, collection_path, object_path, request_json
from cpx.status.loadbalancer_watch import ServiceLoadBalancerWatcher
from cpx.status.updater import StatusUpdater, merge_patch
from cpx.testing.kubeversions import VersionedKubernetesEmulator, api_client_for

pytestmark = pytest.mark.kmock(cls=VersionedKubernetesEmulator)

HTTPPROXY = GroupVersionKind(group="projectcontour.io", version="v1", kind="HTTPProxy", plural="httpproxies")
INGRESS = GroupVersionKind(group="networking.k8s.io", version="v1", kind="Ingress", plural="ingresses")
WIDGET = GroupVersionKind(group="example.com", version="v1", kind="Widget", plural="widgets")


def proxy(name: str, fqdn: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {
            "virtualhost": {"fqdn": fqdn or f"{name}.example.com"},
            "routes": [{"services": [{"name": "s", "port": 80}]}],
        },
    }


def ingress(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}},
    }


SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "s", "namespace": "default"},
    "spec": {"ports": [{"port": 80}]},
}


class Cluster:
    """The emulator, a client, and helpers to read and write objects from the test."""

    def __init__(self, emulator: kmock.KubernetesEmulator) -> None:
        self.emulator = emulator
        self.api = api_client_for(emulator)

    async def call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        return await asyncio.to_thread(request_json, self.api, method, path, body=body, **kw)

    async def create(self, gvk: GroupVersionKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        namespace = obj["metadata"].get("namespace")
        created: dict[str, Any] = await self.call("POST", collection_path(gvk, namespace), obj)
        return created

    async def get(self, gvk: GroupVersionKind, namespace: str, name: str) -> dict[str, Any]:
        got: dict[str, Any] = await self.call("GET", object_path(gvk, namespace, name))
        return got

    def patches(self) -> list[str]:
        return [r.url.path for r in self.emulator if r.method == "PATCH"]


@pytest.fixture
async def cluster(kmock: kmock.KubernetesEmulator) -> Cluster:
    return Cluster(kmock)


@contextlib.asynccontextmanager
async def running(updater: StatusUpdater, *, leader: bool = True) -> AsyncIterator[StatusUpdater]:
    task = asyncio.create_task(updater.run())
    if leader:
        updater.start_writing()
    try:
        yield updater
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def settle(updater: StatusUpdater) -> None:
    await asyncio.wait_for(updater.idle(), 10)


def pipeline_with(*objs: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> SnapshotHandler:
    pipeline = SnapshotHandler.create(
        PluginHost.load(["ingress", "httpproxy"]), Config(options=dict(options or {}))
    )
    for obj in objs:
        pipeline.upsert(dict(obj))
    pipeline.rebuild()
    return pipeline


def count(metrics: Metrics, name: str, kind: str) -> float:
    value = metrics.registry.get_sample_value(f"contour_status_update_{name}", {"kind": kind})
    return value or 0.0


def test_merge_patch_nulls_removed_keys_and_replaces_lists() -> None:
    current = {"a": 1, "b": {"c": 1, "d": 2}, "l": [1, 2], "gone": {"x": 1}}
    desired = {"a": 1, "b": {"c": 1, "e": 3}, "l": [2], "new": "n"}
    assert merge_patch(current, desired) == {"gone": None, "b": {"d": None, "e": 3}, "l": [2], "new": "n"}
    assert merge_patch(desired, desired) == {}


async def test_the_leader_writes_status_through_the_subresource(cluster: Cluster) -> None:
    proxies = [proxy("a"), proxy("b"), proxy("bad", fqdn="a.example.com")]  # bad: a duplicate fqdn
    for obj in proxies:
        await cluster.create(HTTPPROXY, obj)
    pipeline = pipeline_with(SERVICE, *proxies)
    metrics = Metrics()
    async with running(StatusUpdater(cluster.api, pipeline.status_writers, metrics)) as updater:
        updater.submit(pipeline.changed_statuses())
        await settle(updater)
    statuses = {
        p["metadata"]["name"]: (await cluster.get(HTTPPROXY, "default", p["metadata"]["name"]))["status"]
        for p in proxies
    }
    assert statuses["b"]["currentStatus"] == "valid"
    assert statuses["b"]["conditions"][0]["type"] == "Valid"
    assert statuses["a"]["currentStatus"] == "invalid"  # both claim a.example.com
    assert statuses["bad"]["currentStatus"] == "invalid"
    assert sorted(cluster.patches()) == [
        f"/apis/projectcontour.io/v1/namespaces/default/httpproxies/{name}/status"
        for name in ("a", "b", "bad")
    ]
    assert count(metrics, "total", "HTTPProxy") == 3
    assert count(metrics, "success_total", "HTTPProxy") == 3
    assert count(metrics, "noop_total", "HTTPProxy") == 0
    duration = metrics.registry.get_sample_value(
        "contour_status_update_duration_seconds_count", {"kind": "HTTPProxy", "error": "false"}
    )
    assert duration == 3


async def test_unchanged_statuses_are_not_written_again(cluster: Cluster) -> None:
    await cluster.create(HTTPPROXY, proxy("a"))
    pipeline = pipeline_with(SERVICE, proxy("a"))
    metrics = Metrics()
    async with running(StatusUpdater(cluster.api, pipeline.status_writers, metrics)) as updater:
        updater.submit(pipeline.changed_statuses())
        await settle(updater)
        assert len(cluster.patches()) == 1
        # Resubmitting the same status costs nothing; a full rewrite reads and skips.
        updater.submit(pipeline.statuses())
        updater.rewrite_all()
        await settle(updater)
    assert len(cluster.patches()) == 1
    assert count(metrics, "noop_total", "HTTPProxy") == 1
    assert count(metrics, "success_total", "HTTPProxy") == 2  # a no-op is a success


async def test_a_conflicting_write_is_retried_on_the_new_version(cluster: Cluster) -> None:
    await cluster.create(WIDGET, {"metadata": {"name": "w", "namespace": "default"}, "status": {"theirs": 1}})
    calls = 0

    def merge(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:  # someone else writes between our GET and our PATCH
            request_json(
                cluster.api,
                "PATCH",
                object_path(WIDGET, "default", "w", "status"),
                body={"status": {"theirs": 2}},
                content_type=MERGE_PATCH,
            )
        return {**current, **computed}

    writers = {WIDGET.group_kind: StatusWriterSpec(name="widget", gvk=WIDGET, merge=merge)}
    metrics = Metrics()
    key = ObjectKey("example.com", "Widget", "default", "w")
    async with running(StatusUpdater(cluster.api, writers, metrics)) as updater:
        updater.submit({key: ObjectStatus(key=key, status={"ours": "ok"})})
        await settle(updater)
    got = await cluster.get(WIDGET, "default", "w")
    assert got["status"] == {"theirs": 2, "ours": "ok"}  # their write survived ours
    assert calls == 2
    assert count(metrics, "conflict_total", "Widget") == 1
    assert count(metrics, "success_total", "Widget") == 1
    assert count(metrics, "failed_total", "Widget") == 0


async def test_default_writer_replaces_and_deleted_objects_are_ignored(cluster: Cluster) -> None:
    await cluster.create(WIDGET, {"metadata": {"name": "w", "namespace": "default"}, "status": {"old": 1}})
    writers = {WIDGET.group_kind: StatusWriterSpec(name="widget", gvk=WIDGET)}
    metrics = Metrics()
    here = ObjectKey("example.com", "Widget", "default", "w")
    gone = ObjectKey("example.com", "Widget", "default", "gone")
    async with running(StatusUpdater(cluster.api, writers, metrics)) as updater:
        updater.submit(
            {
                here: ObjectStatus(key=here, status={"new": (1, 2)}),  # tuples are written as lists
                gone: ObjectStatus(key=gone, status={"new": 1}),
            }
        )
        await settle(updater)
    assert (await cluster.get(WIDGET, "default", "w"))["status"] == {"new": [1, 2]}
    assert cluster.patches() == ["/apis/example.com/v1/namespaces/default/widgets/w/status"]
    assert count(metrics, "failed_total", "Widget") == 0


async def test_only_the_leader_writes_and_a_new_leader_rewrites_everything(cluster: Cluster) -> None:
    await cluster.create(HTTPPROXY, proxy("a"))
    pipeline = pipeline_with(SERVICE, proxy("a"))
    async with running(
        StatusUpdater(cluster.api, pipeline.status_writers, Metrics()), leader=False
    ) as updater:
        updater.submit(pipeline.changed_statuses())
        await asyncio.sleep(0.1)
        assert cluster.patches() == []
        updater.start_writing()
        await settle(updater)
        assert len(cluster.patches()) == 1
        updater.stop_writing()
        await cluster.call(
            "PATCH",
            object_path(HTTPPROXY, "default", "a", "status"),
            {"status": None},
            content_type=MERGE_PATCH,
        )
        updater.rewrite_all()  # a follower: nothing happens
        await asyncio.sleep(0.1)
        assert len(cluster.patches()) == 2  # only the test's own
        updater.start_writing()  # leader again: the wiped status is restored
        await settle(updater)
    assert (await cluster.get(HTTPPROXY, "default", "a"))["status"]["currentStatus"] == "valid"


ENVOY = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "envoy", "namespace": "projectcontour"},
    "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10", "ipMode": "VIP"}]}},
}


async def test_the_envoy_service_address_reaches_ingress_and_httpproxy_status(cluster: Cluster) -> None:
    await cluster.create(k8s.SERVICE, ENVOY)
    await cluster.create(
        k8s.SERVICE, {**SERVICE, "metadata": {"name": "other", "namespace": "projectcontour"}}
    )
    await cluster.create(HTTPPROXY, proxy("a"))
    await cluster.create(INGRESS, ingress("i"))
    pipeline = pipeline_with(SERVICE, proxy("a"), ingress("i"))
    updater = StatusUpdater(cluster.api, pipeline.status_writers, Metrics())
    watcher = ServiceLoadBalancerWatcher(cluster.api, "envoy", "projectcontour", updater.set_load_balancer)
    watch = asyncio.create_task(watcher.run())

    async def lb_of(gvk: GroupVersionKind, name: str) -> object:
        return (await cluster.get(gvk, "default", name)).get("status", {}).get("loadBalancer")

    async def until(check: Callable[[], Any]) -> None:
        for _ in range(100):
            if await check():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("timed out")

    try:
        async with running(updater):
            updater.submit(pipeline.changed_statuses())
            await until(lambda: lb_of(HTTPPROXY, "a"))
            await settle(updater)
            assert await lb_of(HTTPPROXY, "a") == {"ingress": [{"ip": "192.0.2.10", "ipMode": "VIP"}]}
            assert await lb_of(INGRESS, "i") == {"ingress": [{"ip": "192.0.2.10"}]}  # networking/v1
            proxy_status = (await cluster.get(HTTPPROXY, "default", "a"))["status"]
            assert proxy_status["currentStatus"] == "valid"  # the conditions were written too

            # The Service's address changes: the watch brings it, every object is rewritten.
            await cluster.call(
                "PATCH",
                object_path(k8s.SERVICE, "projectcontour", "envoy", "status"),
                {"status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}},
                content_type=MERGE_PATCH,
            )

            async def moved() -> bool:
                return await lb_of(INGRESS, "i") == {"ingress": [{"hostname": "lb.example.com"}]}

            await until(moved)
            await settle(updater)
            assert await lb_of(HTTPPROXY, "a") == {"ingress": [{"hostname": "lb.example.com"}]}
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)


async def test_the_status_address_flag_wins_over_the_envoy_service(cluster: Cluster) -> None:
    """With --ingress-status-address the processors compute the address and the Service is not
    watched (start_status_writing starts no watcher): the flag's address is what gets written."""
    await cluster.create(HTTPPROXY, proxy("a"))
    await cluster.create(INGRESS, ingress("i"))
    pipeline = pipeline_with(
        SERVICE, proxy("a"), ingress("i"), options={"ingress_status_address": "192.0.2.99"}
    )
    async with running(StatusUpdater(cluster.api, pipeline.status_writers, Metrics())) as updater:
        updater.submit(pipeline.changed_statuses())
        await settle(updater)
    for gvk, name in ((HTTPPROXY, "a"), (INGRESS, "i")):
        status = (await cluster.get(gvk, "default", name))["status"]
        assert status["loadBalancer"] == {"ingress": [{"ip": "192.0.2.99"}]}


def _lb_widgets() -> dict[tuple[str, str], StatusWriterSpec]:
    """Widgets opting in to the Envoy Service's address: only those whose computed status asks
    for it get it (the overlay sees the computed status), and a computed "explode" makes it raise."""

    def overlay(service_lb: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any]:
        if computed.get("explode"):
            raise RuntimeError("a plugin's overlay failed")
        if not computed.get("wantsAddress"):
            return computed
        return {**computed, "address": service_lb["ingress"][0]["ip"]}

    return {WIDGET.group_kind: StatusWriterSpec(name="widget", gvk=WIDGET, load_balancer=overlay)}


async def test_the_load_balancer_overlay_sees_each_computed_status(cluster: Cluster) -> None:
    for name in ("wants", "own", "bad"):
        await cluster.create(WIDGET, {"metadata": {"name": name, "namespace": "default"}})
    keys = {name: ObjectKey("example.com", "Widget", "default", name) for name in ("wants", "own", "bad")}
    computed: dict[str, dict[str, Any]] = {
        "wants": {"wantsAddress": True},
        "own": {"address": "198.51.100.7"},  # an address of its own: the overlay leaves it
        "bad": {"explode": True},
    }
    metrics = Metrics()
    updater = StatusUpdater(cluster.api, _lb_widgets(), metrics, retry_delay=60)
    updater.set_load_balancer({"ingress": [{"ip": "192.0.2.10"}]})
    async with running(updater):
        updater.submit({keys[n]: ObjectStatus(key=keys[n], status=s) for n, s in computed.items()})
        assert updater.computed(keys["wants"]) == {"wantsAddress": True, "address": "192.0.2.10"}

        async def status_of(name: str) -> object:
            return (await cluster.get(WIDGET, "default", name)).get("status")

        async def written(name: str, expected: object) -> None:
            for _ in range(100):  # the failed one waits for its retry: the updater is not idle
                if await status_of(name) == expected:
                    return
                await asyncio.sleep(0.02)
            raise AssertionError(f"{name}: {await status_of(name)!r}, not {expected!r}")

        await written("wants", {"wantsAddress": True, "address": "192.0.2.10"})
        await written("own", {"address": "198.51.100.7"})
        assert await status_of("bad") is None  # its write failed; the workers went on
        assert count(metrics, "failed_total", "Widget") == 1

        # A new address reaches the objects it applies to (the others' writes are no-ops).
        updater.set_load_balancer({"ingress": [{"ip": "192.0.2.20"}]})
        await written("wants", {"wantsAddress": True, "address": "192.0.2.20"})
        assert await status_of("own") == {"address": "198.51.100.7"}
