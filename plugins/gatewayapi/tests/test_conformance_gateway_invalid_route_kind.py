"""Upstream GatewayInvalidRouteKind (conformance/tests/gateway-invalid-route-kind.go).

allowedRoutes.kinds naming an unknown kind: the listener is ResolvedRefs=False
``InvalidRouteKinds`` and supportedKinds keeps only the valid ones (none, or HTTPRoute).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-invalid-route-kind.yaml"
INVALID_KINDS = [("ResolvedRefs", "False", "InvalidRouteKinds")]


def test_only_invalid_route_kind(upstream: Conformance) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        "gateway-only-invalid-route-kind",
        [{"name": "http", "supportedKinds": [], "conditions": INVALID_KINDS, "attachedRoutes": 0}],
    )


def test_supported_and_invalid_route_kind(upstream: Conformance) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        "gateway-supported-and-invalid-route-kind",
        [{"name": "http", "supportedKinds": ["HTTPRoute"], "conditions": INVALID_KINDS, "attachedRoutes": 0}],
    )
