"""Upstream GatewayFrontendClientCertificateValidationInsecureFallback
(conformance/tests/gateway-with-clientcertificate-validation-insecure-fallback.go).

``mode: AllowInsecureFallback`` on the default and the per-port validation: the Gateway says so
(InsecureFrontendValidationMode), and both listeners answer with a matching client certificate,
another CA's, or none.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpx.ops import certgen

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, Conformance, Expect

from .frontendconformance import CLIENT, PER_PORT_CLIENT, expect_tls

MANIFEST = "gateway-with-clientcertificate-validation-insecure-fallback.yaml"
GATEWAY = (INFRA_NS, "client-validation-insecure-fallback")


def test_gateway_frontend_client_certificate_validation_insecure_fallback(
    client_certs: Mapping[str, certgen.KeyPair], upstream: Conformance
) -> None:
    upstream.wait_routes_accepted(
        GATEWAY,
        (INFRA_NS, "client-cert-validation-insecure-fallback-test"),
        (INFRA_NS, "client-cert-validation-insecure-fallback-test-no-hostname"),
    )
    upstream.wait_gateway_condition(
        *GATEWAY, "InsecureFrontendValidationMode", "True", "ConfigurationChanged"
    )
    client, per_port = client_certs[CLIENT], client_certs[PER_PORT_CLIENT]
    first = Expect(host="example.org", backend=INFRA_V1, namespace=INFRA_NS)
    second = Expect(host="second-example.org", backend=INFRA_V2, namespace=INFRA_NS)
    for expect, port, matching, other in ((first, 443, client, per_port), (second, 8443, per_port, client)):
        for presented in (matching, other, None):
            expect_tls(upstream, GATEWAY, expect, port, presented)
