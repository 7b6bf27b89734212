"""Upstream GatewayModifyListeners (conformance/tests/gateway-modify-listeners.go).

A listener added to a Gateway, or one removed, shows in ``status.listeners`` (each with its
attached route) at the new generation.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-modify-listeners.yaml"
READY = [("Accepted", "True", ""), ("ResolvedRefs", "True", "")]


def listener(name: str) -> dict[str, object]:
    return {"name": name, "supportedKinds": ["HTTPRoute"], "conditions": READY, "attachedRoutes": 1}


def test_add_listener(upstream: Conformance) -> None:
    name = "gateway-add-listener"
    upstream.wait_latest_conditions("Gateway", INFRA_NS, name)
    original = upstream.generation("Gateway", INFRA_NS, name)
    gateway = upstream.get("Gateway", INFRA_NS, name)
    gateway["spec"]["listeners"].append(
        {
            "name": "http",
            "port": 80,
            "protocol": "HTTP",
            "hostname": "data.test.com",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }
    )
    upstream.update(gateway)
    upstream.wait_listener_statuses(INFRA_NS, name, [listener("https"), listener("http")])
    upstream.wait_latest_conditions("Gateway", INFRA_NS, name)
    assert upstream.generation("Gateway", INFRA_NS, name) != original


def test_remove_listener(upstream: Conformance) -> None:
    name = "gateway-remove-listener"
    upstream.wait_latest_conditions("Gateway", INFRA_NS, name)
    original = upstream.generation("Gateway", INFRA_NS, name)
    gateway = upstream.get("Gateway", INFRA_NS, name)
    assert len(gateway["spec"]["listeners"]) == 2
    gateway["spec"]["listeners"] = [
        entry for entry in gateway["spec"]["listeners"] if entry["name"] == "http"
    ]
    upstream.update(gateway)
    upstream.wait_listener_statuses(INFRA_NS, name, [listener("http")])
    upstream.wait_latest_conditions("Gateway", INFRA_NS, name)
    assert upstream.generation("Gateway", INFRA_NS, name) != original
