"""Upstream HTTPRouteObservedGenerationBump (conformance/tests/httproute-observed-generation-bump.go).

Changing a backendRef bumps the route's generation; its parent conditions then report it.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V2, SAME_NAMESPACE, Conformance

MANIFEST = "httproute-observed-generation-bump.yaml"
NAME = "observed-generation-bump"


def test_httproute_observed_generation_bump(upstream: Conformance) -> None:
    upstream.wait_gateway_ready(*SAME_NAMESPACE)
    original = upstream.generation("HTTPRoute", INFRA_NS, NAME)
    upstream.wait_route_condition(INFRA_NS, NAME, SAME_NAMESPACE, "Accepted", "True")
    route = upstream.get("HTTPRoute", INFRA_NS, NAME)
    route["spec"]["rules"][0]["backendRefs"][0]["name"] = INFRA_V2
    upstream.update(route)
    assert upstream.generation("HTTPRoute", INFRA_NS, NAME) != original
    upstream.wait_route_condition(INFRA_NS, NAME, SAME_NAMESPACE, "Accepted", "True")
    upstream.wait_route_condition(INFRA_NS, NAME, SAME_NAMESPACE, "ResolvedRefs", "True", "ResolvedRefs")
