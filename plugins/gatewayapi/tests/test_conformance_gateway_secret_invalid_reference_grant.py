"""Upstream GatewaySecretInvalidReferenceGrant
(conformance/tests/gateway-secret-invalid-reference-grant.go).

A certificateRef to another namespace with only near-miss ReferenceGrants: the listener is
ResolvedRefs=False ``RefNotPermitted``.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-secret-invalid-reference-grant.yaml"


def test_gateway_secret_invalid_reference_grant(upstream: Conformance) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        "gateway-secret-invalid-reference-grant",
        [
            {
                "name": "https",
                "supportedKinds": ["HTTPRoute"],
                "conditions": [("ResolvedRefs", "False", "RefNotPermitted")],
                "attachedRoutes": 0,
            }
        ],
    )
