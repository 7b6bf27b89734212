"""Upstream GatewaySecretReferenceGrantSpecific
(conformance/tests/gateway-secret-reference-grant-specific.go).

A ReferenceGrant naming the Secret lets the Gateway use it from another namespace: the listener is
Programmed and ResolvedRefs.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-secret-reference-grant-specific.yaml"


def test_gateway_secret_reference_grant_specific(upstream: Conformance) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        "gateway-secret-reference-grant-specific",
        [
            {
                "name": "https",
                "supportedKinds": ["HTTPRoute"],
                "conditions": [("Programmed", "True", "Programmed"), ("ResolvedRefs", "True", "")],
                "attachedRoutes": 0,
            }
        ],
    )
