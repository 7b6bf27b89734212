"""Kubernetes mode's side of the status writers: the Envoy Service's address on Gateways that have
none of their own (``status.envoy_load_balancer``), and merges that leave unchanged conditions'
lastTransitionTime alone, so that a status differing only in those times is never written."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from cpx.plugins import PluginHost
from cpx.testing.translation import Translation, translate_yaml

from cpx_gatewayapi import status
from cpx_gatewayapi.kinds import GATEWAY, GROUP

CONTROLLER = "projectcontour.io/gateway-controller"
SERVICE_LB = {"ingress": [{"ip": "192.0.2.10", "ipMode": "VIP"}, {"hostname": "lb.example.com"}]}
OLD = "2020-01-01T00:00:00Z"

OBJECTS = f"""
apiVersion: {GROUP}/v1
kind: GatewayClass
metadata: {{name: contour, generation: 1}}
spec: {{controllerName: {CONTROLLER}}}
---
apiVersion: {GROUP}/v1
kind: Gateway
metadata: {{name: lb, namespace: default, generation: 2}}
spec:
  gatewayClassName: contour
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: {GROUP}/v1
kind: Gateway
metadata: {{name: lb-assign, namespace: default, generation: 1}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress}}]
  listeners:
  - {{name: http, port: 81, protocol: HTTP}}
  - name: https
    port: 443
    protocol: HTTPS
    tls: {{certificateRefs: [{{name: missing}}]}}
---
apiVersion: {GROUP}/v1
kind: Gateway
metadata: {{name: own, namespace: default, generation: 1}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress, value: 127.0.0.2}}]
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: {GROUP}/v1
kind: Gateway
metadata: {{name: unusable, namespace: default, generation: 1}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress, value: "300.1.2.3"}}]
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: {GROUP}/v1
kind: Gateway
metadata: {{name: theirs, namespace: default, generation: 1}}
spec:
  gatewayClassName: someone-else
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
"""


@pytest.fixture(scope="module")
def built() -> Translation:
    return translate_yaml(OBJECTS, ["gatewayapi"])  # what cpx_translate does, once for the module


def gateway_status(built: Translation, name: str) -> dict[str, Any]:
    return copy.deepcopy(dict(built.status("Gateway", name)))


def conditions(found: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in found["conditions"]}


def test_a_gateway_without_an_address_gets_the_envoy_service_addresses(built: Translation) -> None:
    computed = gateway_status(built, "lb")
    assert computed["addresses"] == []
    assert conditions(computed)["Programmed"] == ("False", "AddressNotAssigned")

    written = status.envoy_load_balancer(SERVICE_LB, computed)
    assert written["addresses"] == [
        {"type": "IPAddress", "value": "192.0.2.10"},
        {"type": "Hostname", "value": "lb.example.com"},
    ]
    assert conditions(written) == {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed")}
    [programmed] = [c for c in written["conditions"] if c["type"] == "Programmed"]
    assert programmed["observedGeneration"] == 2
    assert written["listeners"] == computed["listeners"]
    assert conditions(computed)["Programmed"] == ("False", "AddressNotAssigned")  # not changed in place


def test_with_the_address_a_listener_not_programmed_still_keeps_the_gateway_unprogrammed(
    built: Translation,
) -> None:
    written = status.envoy_load_balancer(SERVICE_LB, gateway_status(built, "lb-assign"))
    assert written["addresses"][0] == {"type": "IPAddress", "value": "192.0.2.10"}
    assert conditions(written)["Programmed"] == ("False", "ListenersNotValid")
    [programmed] = [c for c in written["conditions"] if c["type"] == "Programmed"]
    assert programmed["message"] == "Listeners not programmed: https"


@pytest.mark.parametrize("name", ["own", "unusable"])
def test_gateways_with_addresses_of_their_own_are_left_alone(built: Translation, name: str) -> None:
    computed = gateway_status(built, name)
    assert status.envoy_load_balancer(SERVICE_LB, computed) == computed


def test_other_controllers_gateways_and_a_service_without_an_address_change_nothing(
    built: Translation,
) -> None:
    assert built.status("Gateway", "theirs") == {}  # not ours: nothing computed...
    assert status.envoy_load_balancer(SERVICE_LB, {}) == {}  # ...and nothing added
    computed = gateway_status(built, "lb")
    no_addresses: list[dict[str, Any]] = [{}, {"ingress": []}, {"ingress": [{"ports": [{"port": 80}]}]}]
    for no_address in no_addresses:
        assert status.envoy_load_balancer(no_address, computed) == computed


def test_only_the_gateway_writer_takes_the_envoy_service_address() -> None:
    writers = {w.gvk.kind: w for w in PluginHost.load(["gatewayapi"]).status_writers()}
    assert writers["Gateway"].load_balancer is status.envoy_load_balancer
    assert GATEWAY.kind == "Gateway"
    assert all(w.load_balancer is None for kind, w in writers.items() if kind != "Gateway")


def _aged(found: Mapping[str, Any]) -> dict[str, Any]:
    """A status as written a while ago: every condition's lastTransitionTime is OLD."""
    aged = copy.deepcopy(dict(found))
    entries = [aged, *aged.get("listeners", ()), *aged.get("parents", ())]
    for entry in entries:
        for condition in entry.get("conditions", ()):
            condition["lastTransitionTime"] = OLD
    return aged


def test_a_gateway_status_differing_only_in_transition_times_is_not_written(built: Translation) -> None:
    """In Kubernetes mode a build may compute from an older status than the object's (a write of
    ours not seen yet): its fresh lastTransitionTimes must not cause a write."""
    written = status.envoy_load_balancer(SERVICE_LB, gateway_status(built, "lb"))
    current = {**_aged(written), "conditions": [*_aged(written)["conditions"], {"type": "Theirs"}]}
    assert status.merge_gateway(current, written) is None

    # A flip is written, with a new transition time for that condition only.
    merged = status.merge_gateway(current, gateway_status(built, "lb"))
    assert merged is not None
    times = {c["type"]: c.get("lastTransitionTime") for c in merged["conditions"]}
    assert times["Accepted"] == OLD and times["Programmed"] != OLD and "Theirs" in times
    assert merged["addresses"] == []
    assert all(c["lastTransitionTime"] == OLD for c in merged["listeners"][0]["conditions"])


def test_a_route_status_differing_only_in_transition_times_is_not_written(
    cpx_translate: Callable[..., Translation],
) -> None:
    route = f"""
apiVersion: {GROUP}/v1
kind: HTTPRoute
metadata: {{name: r, namespace: default, generation: 1}}
spec:
  parentRefs: [{{name: own}}]
  rules: [{{backendRefs: [{{name: missing, port: 80}}]}}]
"""
    computed = cpx_translate(OBJECTS + "---" + route, ["gatewayapi"]).status("HTTPRoute", "r")
    theirs = {"parentRef": {"name": "own"}, "controllerName": "example.com/other", "conditions": []}
    current = _aged({"parents": [theirs, *computed["parents"]]})
    merge = status.route_merge(CONTROLLER)
    assert merge(current, computed) is None
