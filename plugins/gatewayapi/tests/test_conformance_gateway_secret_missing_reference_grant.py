"""Upstream GatewaySecretMissingReferenceGrant (conformance/tests/gateway-secret-missing-reference-grant.go).

A certificateRef to a Secret of another namespace without a ReferenceGrant: the listener is
ResolvedRefs=False ``RefNotPermitted``.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-secret-missing-reference-grant.yaml"


def test_gateway_secret_missing_reference_grant(upstream: Conformance) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        "gateway-secret-missing-reference-grant",
        [
            {
                "name": "https",
                "supportedKinds": ["HTTPRoute"],
                "conditions": [("ResolvedRefs", "False", "RefNotPermitted")],
                "attachedRoutes": 0,
            }
        ],
    )
