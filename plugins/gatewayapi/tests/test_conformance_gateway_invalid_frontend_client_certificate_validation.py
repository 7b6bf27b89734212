"""Upstream GatewayInvalidFrontendClientCertificateValidation
(conformance/tests/gateway-with-invalid-clientcertificate-validation.go).

Per-port validations naming a missing ConfigMap, a Service, and another namespace's ConfigMap
without a ReferenceGrant: each of those listeners only is ResolvedRefs=False (InvalidCACertificateRef,
InvalidCACertificateKind, RefNotPermitted), Accepted=False NoValidCACertificate and not Programmed;
the listener under the valid default validation is all True.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpx.ops import certgen

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-with-invalid-clientcertificate-validation.yaml"
GATEWAY = (INFRA_NS, "gateway-with-invalid-client-cert-validation")

_REFUSED = {
    "https-unresolved": "InvalidCACertificateRef",
    "https-invalid-kind": "InvalidCACertificateKind",
    "https-grant-missing": "RefNotPermitted",
}


def test_gateway_invalid_frontend_client_certificate_validation(
    client_certs: Mapping[str, certgen.KeyPair], upstream: Conformance
) -> None:
    assert client_certs
    upstream.wait_listeners(
        *GATEWAY,
        [("ResolvedRefs", "True", ""), ("Accepted", "True", ""), ("Programmed", "True", "")],
        ["https"],
    )
    for listener, reason in _REFUSED.items():
        upstream.wait_listeners(
            *GATEWAY,
            [
                ("ResolvedRefs", "False", reason),
                ("Accepted", "False", "NoValidCACertificate"),
                ("Programmed", "False", ""),
            ],
            [listener],
        )
