"""BackendTLSPolicy through the real ``cpx serve`` and a real Envoy, to a TLS echo backend whose
certificate (``abc.example.com`` and a SPIFFE URI) the test CA signed: the right CA and hostname
(or subjectAltName, DNS or URI) answer 200 with the hostname as SNI; a wrong CA, hostname or SAN
fails the handshake (503); a missing CA answers 500; editing the CA ConfigMap flips the answer and
back (upstream BackendTLSPolicy, BackendTLSPolicyInvalidCACertificateRef and
BackendTLSPolicySANValidation, re-expressed)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from cpx.ops import certgen
from cpx.ops.echoserver import EchoServer
from cpx.testing import default_ca, endpoint_slice, eventually, http_get, issue_cert, service

from cpx_gatewayapi.testing.objects import gateway_yaml

pytestmark = pytest.mark.e2e

ADDRESS = "127.0.0.78"
HOST = "abc.example.com"
SPIFFE_ID = "spiffe://abc.example.com/test-identity"
# Backend Service -> (CA ConfigMap, validation.hostname, subjectAltNames)
CASES: dict[str, tuple[str, str, list[dict[str, str]]]] = {
    "good": ("ca", HOST, []),
    "wrong-ca": ("other-ca", HOST, []),
    "wrong-host": ("ca", "other.example.com", []),
    "missing-ca": ("nowhere", HOST, []),
    "san-dns": ("ca", "sni.example.com", [{"type": "Hostname", "hostname": HOST}]),
    "san-mismatch": ("ca", HOST, [{"type": "Hostname", "hostname": "def.example.com"}]),
    "san-uri": ("ca", HOST, [{"type": "URI", "uri": SPIFFE_ID}]),
    "san-uri-mismatch": ("ca", HOST, [{"type": "URI", "uri": "spiffe://def.example.com/test-identity"}]),
}

GATEWAY = gateway_yaml(ADDRESS)


def ca_config_map(name: str, pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"ca.crt": pem.decode()},
    }


def objects(tls_port: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = list(yaml.safe_load_all(GATEWAY))
    rules = []
    for name, (ca, hostname, sans) in CASES.items():
        docs.append(service(name, port=443, target_port=tls_port, port_name="https"))
        docs.append(endpoint_slice(name, tls_port, port_name="https"))
        validation: dict[str, Any] = {
            "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}],
            "hostname": hostname,
        }
        if sans:
            validation["subjectAltNames"] = sans
        docs.append(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "BackendTLSPolicy",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "targetRefs": [{"group": "", "kind": "Service", "name": name}],
                    "validation": validation,
                },
            }
        )
        rules.append(
            {
                "matches": [{"path": {"type": "Exact", "value": f"/{name}"}}],
                "backendRefs": [{"name": name, "port": 443}],
            }
        )
    docs.append(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [HOST], "rules": rules},
        }
    )
    docs.append(ca_config_map("other-ca", certgen.new_ca("another CA").cert_pem))
    return docs


@pytest.fixture
def tls_echo() -> Iterator[EchoServer]:
    pair = issue_cert([HOST], uris=[SPIFFE_ID])
    server = EchoServer("tls-backend", tls=(pair.cert_pem, pair.key_pem)).start()
    try:
        yield server
    finally:
        server.stop()


def test_backend_tls_policy_verifies_the_backend(cpx_envoy: Callable[..., Any], tls_echo: EchoServer) -> None:
    served = cpx_envoy("", plugins=["gatewayapi"])
    served.apply(objects(tls_echo.port), "policies.yaml")
    served.apply([ca_config_map("ca", default_ca().cert_pem)], "ca.yaml")
    url = f"http://{ADDRESS}:8080"

    def answered(path: str, status: int) -> Any:
        response = http_get(url + path, host_header=HOST, timeout=3.0)
        assert response.status == status, f"{path}: {response.status}"
        return response

    body = json.loads(eventually(lambda: answered("/good", 200), 30.0).body)
    assert body["tls"]["sni"] == HOST  # validation.hostname is the SNI
    sni_only = json.loads(eventually(lambda: answered("/san-dns", 200), 10.0).body)
    assert sni_only["tls"]["sni"] == "sni.example.com"  # the SAN, not the hostname, is verified
    eventually(lambda: answered("/san-uri", 200), 10.0)
    for path in ("/wrong-ca", "/wrong-host", "/san-mismatch", "/san-uri-mismatch"):
        eventually(functools.partial(answered, path, 503), 10.0)  # handshake refused: never plaintext
    eventually(lambda: answered("/missing-ca", 500), 10.0)

    # The CA ConfigMap edited to another CA: verification fails; restored: served again.
    served.apply([ca_config_map("ca", certgen.new_ca("a third CA").cert_pem)], "ca.yaml")
    eventually(lambda: answered("/good", 503), 20.0)
    served.apply([ca_config_map("ca", default_ca().cert_pem)], "ca.yaml")
    eventually(lambda: answered("/good", 200), 20.0)
    assert served.rejected_updates() == 0
