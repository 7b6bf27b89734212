"""Statuses stay put across rebuilds: transition times carry over from the last build's status.

Objects read from files have no stored status, so without the carry-over every rebuild a second
apart would stamp new transition times and report every Gateway API object as changed.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml
from cpx import Config, KubeObject, ObjectKey, WatchSpec
from cpx.testing import Builder, ListenerProcessor, SourceCache

from cpx_gatewayapi import conditions
from cpx_gatewayapi.kinds import GATEWAY, GATEWAY_CLASS, GROUP, HTTPROUTE
from cpx_gatewayapi.processor import GatewayAPIProcessor

OBJECTS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: contour, generation: 1}
spec: {controllerName: projectcontour.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default, generation: 1}
spec:
  gatewayClassName: contour
  addresses: [{type: IPAddress, value: 127.0.0.10}]
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: v1, namespace: default}
spec: {ports: [{port: 8080}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: default, generation: 1}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: v1, port: 8080}]}]
"""

ROUTE = ObjectKey(GROUP, "HTTPRoute", "default", "web")
GW = ObjectKey(GROUP, "Gateway", "default", "gw")
CLASS = ObjectKey(GROUP, "GatewayClass", "", "contour")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every condition built gets a later time than the one before."""
    ticks = (f"2026-01-01T00:00:{second:02d}Z" for second in itertools.count())
    monkeypatch.setattr(conditions, "now", lambda: next(ticks))


class Stack:
    def __init__(self) -> None:
        kinds = (GATEWAY_CLASS, GATEWAY, HTTPROUTE)
        self.source = SourceCache(watches={k.group_kind: WatchSpec(gvk=k) for k in kinds})
        config = Config()
        processor = GatewayAPIProcessor.from_config(config)
        self.builder = Builder([("listeners", ListenerProcessor(config)), ("gatewayapi", processor)])
        for obj in yaml.safe_load_all(OBJECTS):
            self.source.insert(obj)

    def statuses(self, *changes: KubeObject) -> dict[ObjectKey, Any]:
        for obj in changes:
            self.source.insert(obj)
        return dict(self.builder.build(self.source).statuses)


def transitions(status: Any) -> list[str]:
    """Every lastTransitionTime in a status, in document order."""
    if isinstance(status, dict):
        own = [status[conditions.TRANSITION]] if conditions.TRANSITION in status else []
        return own + [t for value in status.values() for t in transitions(value)]
    if isinstance(status, list):
        return [t for value in status for t in transitions(value)]
    return []


@pytest.mark.usefixtures("clock")
def test_an_unchanged_rebuild_keeps_every_status_object() -> None:
    stack = Stack()
    first = stack.statuses()
    second = stack.statuses()
    for key in (ROUTE, GW, CLASS):
        assert transitions(first[key])
        assert second[key] is first[key]


@pytest.mark.usefixtures("clock")
def test_a_changed_condition_moves_alone() -> None:
    stack = Stack()
    first = stack.statuses()
    [old_refs] = [c for c in first[ROUTE]["parents"][0]["conditions"] if c["type"] == "ResolvedRefs"]
    route_doc = OBJECTS.rsplit("---", maxsplit=1)[-1]
    missing = yaml.safe_load(route_doc.replace("name: v1, port", "name: gone, port"))
    second = stack.statuses(missing)
    parent = second[ROUTE]["parents"][0]
    by_type = {c["type"]: c for c in parent["conditions"]}
    assert by_type["ResolvedRefs"]["reason"] == "BackendNotFound"
    assert by_type["ResolvedRefs"]["lastTransitionTime"] != old_refs["lastTransitionTime"]
    [old] = [c for c in first[ROUTE]["parents"][0]["conditions"] if c["type"] == "Accepted"]
    assert by_type["Accepted"]["lastTransitionTime"] == old["lastTransitionTime"]
    # The Gateway's attachedRoutes did not change: neither does its status.
    assert second[GW] is first[GW]
