"""Upstream GatewayInvalidTLSConfiguration (conformance/tests/gateway-invalid-tls-configuration.go).

An HTTPS listener whose certificateRef is a missing Secret, another group, another kind or a
malformed Secret: ResolvedRefs=False ``InvalidCertificateRef``.
"""

from __future__ import annotations

import pytest

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-invalid-tls-configuration.yaml"


@pytest.mark.parametrize(
    "gateway",
    [
        "gateway-certificate-nonexistent-secret",
        "gateway-certificate-unsupported-group",
        "gateway-certificate-unsupported-kind",
        "gateway-certificate-malformed-secret",
    ],
)
def test_gateway_invalid_tls_configuration(upstream: Conformance, gateway: str) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        gateway,
        [
            {
                "name": "https",
                "supportedKinds": ["HTTPRoute"],
                "conditions": [("ResolvedRefs", "False", "InvalidCertificateRef")],
                "attachedRoutes": 0,
            }
        ],
    )
