"""What upstream's suite adds for the frontend client certificate tests (conformance/utils/suite/suite.go):
two CAs, each with a ConfigMap ``ca.crt`` and a client certificate Secret it signed, plus the CA
ConfigMap ``web-backend-cm`` in the web-backend namespace; and the TLS requests with a client
certificate (conformance/utils/tls: ``MakeTLSRequestAndExpectEventuallyConsistent[Failure]Response``).
"""

from __future__ import annotations

import http.client
from typing import Any

from cpx.ops import certgen
from cpx.testing import client_tls_context

from cpx_gatewayapi.testing import (
    INFRA_NS,
    WEB_NS,
    Answer,
    Conformance,
    Expect,
    await_convergence,
    compare,
    envoy_port,
)
from cpx_gatewayapi.testing.answers import connect_with_sni

CLIENT = "tls-validity-checks-client-certificate"
PER_PORT_CLIENT = "tls-validity-checks-per-port-client-certificate"
_CAS = {
    CLIENT: "tls-validity-checks-ca-certificate",
    PER_PORT_CLIENT: "tls-validity-checks-per-port-ca-certificate",
}


def _config_map(namespace: str, name: str, pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"ca.crt": pem.decode()},
    }


def client_certificates() -> tuple[dict[str, certgen.KeyPair], list[dict[str, Any]]]:
    """The client certificates by Secret name, and the CA ConfigMaps and Secrets to apply."""
    docs: list[dict[str, Any]] = []
    certs = {}
    for client, ca_name in _CAS.items():
        ca = certgen.new_ca(ca_name, lifetime_days=1)
        certs[client] = certgen.issue(ca, client, client=True, server=False, lifetime_days=1)
        docs += [
            _config_map(INFRA_NS, ca_name, ca.cert_pem),
            certgen.tls_secret(INFRA_NS, client, certs[client]),
        ]
    other = certgen.new_ca("web-backend-cm", lifetime_days=1)
    docs.append(_config_map(WEB_NS, "web-backend-cm", other.cert_pem))
    return certs, docs


def _tls_request(
    upstream: Conformance, gateway: tuple[str, str], expect: Expect, port: int, client: certgen.KeyPair | None
) -> Answer:
    """One request with SNI = Host, the server checked against the suite's CA (not its name, as
    :meth:`Conformance.request`: the certificate is for ``*`` and ``*.org``)."""
    ctx = client_tls_context(upstream.ca_pem, check_hostname=False, client_cert=client)
    conn = http.client.HTTPSConnection(upstream.addresses[gateway], envoy_port(port), timeout=5, context=ctx)
    conn.connect = connect_with_sni(conn, ctx, expect.host)  # type: ignore[method-assign]
    try:
        conn.putrequest(expect.method, expect.path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", expect.host)
        conn.endheaders()
        response = conn.getresponse()
        return Answer.of(response.status, response.getheaders(), response.read())
    finally:
        conn.close()


def expect_tls(
    upstream: Conformance, gateway: tuple[str, str], expect: Expect, port: int, client: certgen.KeyPair | None
) -> None:
    """``MakeTLSRequestAndExpectEventuallyConsistentResponse`` (SNI = Host, the client's certificate)."""

    def attempt() -> str | None:
        try:
            answer = _tls_request(upstream, gateway, expect, port, client)
        except (OSError, http.client.HTTPException) as err:
            return f"request failed: {err!r}"
        return compare(expect, answer, scheme="https")

    await_convergence(attempt, f"{expect.name()} on port {port} with {_named(client)}", None)


def expect_tls_failure(
    upstream: Conformance, gateway: tuple[str, str], expect: Expect, port: int, client: certgen.KeyPair | None
) -> None:
    """``MakeTLSRequestAndExpectEventuallyConsistentFailureResponse``: the request fails (handshake
    refused, connection closed), 3 times in a row."""

    def attempt() -> str | None:
        try:
            answer = _tls_request(upstream, gateway, expect, port, client)
        except (OSError, http.client.HTTPException):
            return None
        return f"answered {answer.status}"

    await_convergence(attempt, f"refusal of {expect.host} on port {port} with {_named(client)}", None)


def _named(client: certgen.KeyPair | None) -> str:
    return "no client certificate" if client is None else client.cert.subject.rfc4514_string()
