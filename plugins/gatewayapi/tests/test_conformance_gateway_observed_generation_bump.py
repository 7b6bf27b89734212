"""Upstream GatewayObservedGenerationBump (conformance/tests/gateway-observed-generation-bump.go).

Adding a listener bumps the Gateway's generation; every condition then reports it.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-observed-generation-bump.yaml"
NAME = "gateway-observed-generation-bump"


def test_gateway_observed_generation_bump(upstream: Conformance) -> None:
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)
    original = upstream.generation("Gateway", INFRA_NS, NAME)
    gateway = upstream.get("Gateway", INFRA_NS, NAME)
    gateway["spec"]["listeners"].append(
        {
            "name": "alternate",
            "hostname": "foo.com",
            "port": 80,
            "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }
    )
    upstream.update(gateway)
    assert upstream.generation("Gateway", INFRA_NS, NAME) != original
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)
    conditions = upstream.gateway_status(INFRA_NS, NAME).get("conditions") or []
    assert conditions, "the Gateway has no conditions"
