"""Upstream GatewayFrontendInvalidDefaultClientCertificateValidation
(conformance/tests/gateway-invalid-default-frontend-client-certificate-validation.go).

A default validation naming a missing ConfigMap refuses the HTTPS listener (ResolvedRefs=False
InvalidCACertificateRef, Accepted=False NoValidCACertificate, not Programmed: a TLS request fails)
and leaves the HTTP listener serving (a per-port validation for port 80 does not apply to HTTP).
"""

from __future__ import annotations

from collections.abc import Mapping

from cpx.ops import certgen

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, Conformance, Expect

from .frontendconformance import expect_tls_failure

MANIFEST = "gateway-invalid-default-frontend-client-certificate-validation.yaml"
GATEWAY = (INFRA_NS, "invalid-default-client-validation-config")


def test_gateway_frontend_invalid_default_client_certificate_validation(
    client_certs: Mapping[str, certgen.KeyPair], upstream: Conformance
) -> None:
    assert client_certs
    upstream.gateway_address(*GATEWAY)
    upstream.wait_listeners(
        *GATEWAY,
        [("ResolvedRefs", "True", ""), ("Accepted", "True", ""), ("Programmed", "True", "")],
        ["http"],
    )
    upstream.expect(GATEWAY, Expect(host="example.org", backend=INFRA_V1, namespace=INFRA_NS))
    upstream.wait_listeners(
        *GATEWAY,
        [
            ("ResolvedRefs", "False", "InvalidCACertificateRef"),
            ("Accepted", "False", "NoValidCACertificate"),
            ("Programmed", "False", ""),
        ],
        ["https"],
    )
    expect_tls_failure(upstream, GATEWAY, Expect(host="example.org"), 443, None)
