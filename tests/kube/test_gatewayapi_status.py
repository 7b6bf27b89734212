"""Gateway API status through the status subresource, against the emulated API server with
resourceVersions and 409 Conflict: the statuses come from a real pipeline with the gatewayapi
plugin, so the merges and the Envoy Service overlay are the plugin's own."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import kmock
import pytest
from cpx_gatewayapi.kinds import GATEWAY, GATEWAY_CLASS, GROUP, HTTPROUTE
from cpx_gatewayapi.testing import objects as gateway_objects
from tests.kube.test_status import running

from cpx import objects as k8s
from cpx.config import Config
from cpx.ops.metrics import Metrics
from cpx.plugins import PluginHost
from cpx.records import StatusWriterSpec
from cpx.snapshot import SnapshotHandler
from cpx.sources.kube.rest import MERGE_PATCH, collection_path, object_path, request_json
from cpx.sources.kube.watch import KubeSource
from cpx.status.updater import StatusUpdater
from cpx.testing.kubeversions import VersionedKubernetesEmulator, api_client_for

pytestmark = pytest.mark.kmock(cls=VersionedKubernetesEmulator)

CONTROLLER = "projectcontour.io/gateway-controller"
CLASS = gateway_objects.gateway_class(generation=1)
GATEWAY_OBJ = gateway_objects.gateway("127.0.0.2", generation=1)
ROUTE = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "r", "namespace": "default", "generation": 1},
    "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "s", "port": 80}]}]},
}
SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "s", "namespace": "default"},
    "spec": {"ports": [{"port": 80}]},
}


def their_parent(name: str) -> dict[str, Any]:
    return {
        "parentRef": {"group": GROUP, "kind": "Gateway", "name": name},
        "controllerName": "example.com/other-controller",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs"}],
    }


def pipeline() -> SnapshotHandler:
    handler = SnapshotHandler.create(PluginHost.load(["gatewayapi"]), Config())
    for obj in (CLASS, GATEWAY_OBJ, ROUTE, SERVICE):
        handler.upsert(dict(obj))
    handler.rebuild()
    return handler


async def call(api: Any, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    return await asyncio.to_thread(request_json, api, method, path, body=body, **kw)


async def test_another_controllers_write_between_our_read_and_write_survives(
    kmock: kmock.KubernetesEmulator,
) -> None:
    api = api_client_for(kmock)
    route = {**ROUTE, "status": {"parents": [their_parent("a")]}}
    await call(api, "POST", collection_path(HTTPROUTE, "default"), route)
    handler = pipeline()
    route_writer = handler.status_writers[HTTPROUTE.group_kind]
    assert route_writer.merge is not None
    plugin_merge = route_writer.merge
    calls = 0

    def merge(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
        nonlocal calls
        calls += 1
        if calls == 1:  # the other controller writes after our GET: our PATCH gets a 409
            request_json(
                api,
                "PATCH",
                object_path(HTTPROUTE, "default", "r", "status"),
                body={"status": {"parents": [*current["parents"], their_parent("b")]}},
                content_type=MERGE_PATCH,
            )
        return plugin_merge(current, computed)

    writers = {
        **handler.status_writers,
        HTTPROUTE.group_kind: StatusWriterSpec(name="httproute", gvk=HTTPROUTE, merge=merge),
    }
    metrics = Metrics()
    async with running(StatusUpdater(api, writers, metrics)) as updater:
        updater.submit({k: v for k, v in handler.changed_statuses().items() if k.kind == "HTTPRoute"})
        await asyncio.wait_for(updater.idle(), 10)
    parents = (await call(api, "GET", object_path(HTTPROUTE, "default", "r")))["status"]["parents"]
    assert [p["controllerName"] for p in parents] == [
        "example.com/other-controller",
        "example.com/other-controller",
        CONTROLLER,
    ]
    assert parents[:2] == [their_parent("a"), their_parent("b")]
    assert parents[2]["parentRef"] == {"group": GROUP, "kind": "Gateway", "name": "gw"}
    assert calls == 2
    sample = metrics.registry.get_sample_value
    assert sample("contour_status_update_conflict_total", {"kind": "HTTPRoute"}) == 1


async def test_gateway_statuses_are_written_once_and_not_again(kmock: kmock.KubernetesEmulator) -> None:
    """A second build (a second later, new lastTransitionTimes computed from objects without our
    status) changes nothing in the API server: no PATCH."""
    api = api_client_for(kmock)
    await call(api, "POST", collection_path(GATEWAY_CLASS, None), CLASS)
    await call(api, "POST", collection_path(GATEWAY, "default"), GATEWAY_OBJ)
    await call(api, "POST", collection_path(HTTPROUTE, "default"), ROUTE)
    handler = pipeline()
    updater = StatusUpdater(api, handler.status_writers, Metrics())
    async with running(updater):
        updater.submit(handler.changed_statuses())
        await asyncio.wait_for(updater.idle(), 10)
        written = [r.url.path for r in kmock if r.method == "PATCH"]
        assert sorted(written) == [
            f"/apis/{GROUP}/v1/gatewayclasses/contour/status",
            f"/apis/{GROUP}/v1/namespaces/default/gateways/gw/status",
            f"/apis/{GROUP}/v1/namespaces/default/httproutes/r/status",
        ]
        await asyncio.sleep(1.05)  # the next second: fresh transition times
        handler.upsert({**SERVICE, "metadata": {**SERVICE["metadata"], "labels": {"x": "y"}}})
        handler.rebuild()
        updater.submit(handler.changed_statuses())
        await asyncio.wait_for(updater.idle(), 10)
        assert len([r for r in kmock if r.method == "PATCH"]) == len(written)


async def test_gateway_classes_are_watched_cluster_wide_with_watch_namespaces() -> None:
    host = PluginHost.load(["gatewayapi"])
    source = KubeSource(api_client=None, watches=list(host.watches()), namespaces=["a", "b"])  # type: ignore[arg-type]
    scopes = {(t.spec.gvk.kind, t.namespace) for t in source.targets()}
    assert ("GatewayClass", None) in scopes
    assert {("Gateway", "a"), ("Gateway", "b"), ("HTTPRoute", "a")} <= scopes
    assert not any(kind == "GatewayClass" and ns for kind, ns in scopes)
    assert k8s.NAMESPACE.namespaced is False  # the same rule as the core's Namespace
