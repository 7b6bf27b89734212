"""Upstream GatewayFrontendClientCertificateValidation
(conformance/tests/gateway-with-clientcertificate-validation.go).

``tls.frontend``: the default validation (one CA) on the 443 listener, a per-port one (another CA)
on 8443: each listener answers a client certificate of its own CA and refuses the other's.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpx.ops import certgen

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, Conformance, Expect

from .frontendconformance import CLIENT, PER_PORT_CLIENT, expect_tls, expect_tls_failure

MANIFEST = "gateway-with-clientcertificate-validation.yaml"
GATEWAY = (INFRA_NS, "client-validation-default")


def test_gateway_frontend_client_certificate_validation(
    client_certs: Mapping[str, certgen.KeyPair], upstream: Conformance
) -> None:
    upstream.wait_routes_accepted(
        GATEWAY,
        (INFRA_NS, "client-certificate-validation-https-test"),
        (INFRA_NS, "client-certificate-validation-https-test-no-hostname"),
    )
    client, per_port = client_certs[CLIENT], client_certs[PER_PORT_CLIENT]
    # Default configuration.
    first = Expect(host="example.org", backend=INFRA_V1, namespace=INFRA_NS)
    expect_tls(upstream, GATEWAY, first, 443, client)
    expect_tls_failure(upstream, GATEWAY, Expect(host="example.org"), 443, per_port)
    # Per-port configuration.
    second = Expect(host="second-example.org", backend=INFRA_V2, namespace=INFRA_NS)
    expect_tls(upstream, GATEWAY, second, 8443, per_port)
    expect_tls_failure(upstream, GATEWAY, Expect(host="second-example.org"), 8443, client)
