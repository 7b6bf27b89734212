"""Upstream GatewaySecretReferenceGrantAllInNamespace
(conformance/tests/gateway-secret-reference-grant-all-in-namespace.go).

A ReferenceGrant to every Secret of the namespace (no name) lets the Gateway use one: the listener
is Programmed and ResolvedRefs.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-secret-reference-grant-all-in-namespace.yaml"


def test_gateway_secret_reference_grant_all_in_namespace(upstream: Conformance) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        "gateway-secret-reference-grant-all-in-namespace",
        [
            {
                "name": "https",
                "supportedKinds": ["HTTPRoute"],
                "conditions": [("Programmed", "True", "Programmed"), ("ResolvedRefs", "True", "")],
                "attachedRoutes": 0,
            }
        ],
    )
