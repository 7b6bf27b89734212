"""certgen: a CA plus cpx's server and Envoy's client certificates, as files and as Secrets."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from cpx.ops import certgen
from cpx.sources import secrets as tlsutil
from cpx.testing import EchoServer, request


@pytest.fixture(scope="module")
def bundle() -> certgen.Bundle:
    return certgen.generate_bundle(namespace="edge", dns_names=["cpx.example.com"], ip_addresses=["10.0.0.7"])


def _sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName), [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]


def _usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_ca_is_self_signed(bundle: certgen.Bundle) -> None:
    ca = bundle.ca.cert
    ca.verify_directly_issued_by(ca)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert (constraints.ca, constraints.path_length) == (True, 0)
    key = bundle.ca.private_key()
    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size == 2048


def test_cpx_server_certificate(bundle: certgen.Bundle) -> None:
    cert = bundle.cpx.cert
    cert.verify_directly_issued_by(bundle.ca.cert)
    dns, ips = _sans(cert)
    assert dns == [
        "cpx",
        "cpx.edge",
        "cpx.edge.svc",
        "cpx.edge.svc.cluster.local",
        "localhost",
        "cpx.example.com",
    ]
    assert ips == ["127.0.0.1", "10.0.0.7"]
    assert _usages(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_envoy_client_certificate(bundle: certgen.Bundle) -> None:
    cert = bundle.envoy.cert
    cert.verify_directly_issued_by(bundle.ca.cert)
    assert _sans(cert) == (["envoy", "envoy.edge", "envoy.edge.svc", "envoy.edge.svc.cluster.local"], [])
    assert _usages(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    public_key = cert.public_key()
    assert isinstance(public_key, rsa.RSAPublicKey)
    assert bundle.envoy.private_key().public_key().public_numbers() == public_key.public_numbers()


def test_uri_subject_alt_names(bundle: certgen.Bundle) -> None:
    pair = certgen.issue(
        bundle.ca, "abc", dns_names=["abc.example.com"], uris=["spiffe://abc.example.com/id"]
    )
    sans = pair.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["abc.example.com"]
    assert sans.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://abc.example.com/id"]


def test_lifetime() -> None:
    now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    short = certgen.generate_bundle(lifetime_days=7, now=now)
    for pair in (short.ca, short.cpx, short.envoy):
        assert pair.cert.not_valid_after_utc == now + dt.timedelta(days=7)
        assert pair.cert.not_valid_before_utc < now


def test_generate_writes_pem_files(tmp_path: Path) -> None:
    written = certgen.generate(tmp_path)
    assert sorted(written) == sorted(tmp_path.iterdir())
    bundle = certgen.load_bundle(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["cacert.pem", "cakey.pem", "cpxcert.pem", "cpxkey.pem", "envoycert.pem", "envoykey.pem"]
    bundle.cpx.cert.verify_directly_issued_by(bundle.ca.cert)
    for key in ("cakey.pem", "cpxkey.pem", "envoykey.pem"):
        assert stat.S_IMODE((tmp_path / key).stat().st_mode) == 0o600
    _, ips = _sans(bundle.cpx.cert)
    assert ipaddress.ip_address(ips[0]).is_loopback
    with pytest.raises(FileExistsError, match=r"cacert\.pem"):
        certgen.generate(tmp_path)
    certgen.generate(tmp_path, overwrite=True)
    assert (tmp_path / "cpxcert.pem").read_bytes() != bundle.cpx.cert_pem


def test_kubernetes_secrets(bundle: certgen.Bundle) -> None:
    secrets = certgen.kubernetes_secrets(bundle, namespace="edge", name_suffix="-v2")
    assert [s["metadata"]["name"] for s in secrets] == ["cpxcert-v2", "envoycert-v2"]
    documents = list(yaml.safe_load_all(certgen.secrets_yaml(secrets)))
    assert documents == secrets
    for secret, pair in zip(secrets, (bundle.cpx, bundle.envoy), strict=True):
        assert secret["type"] == "kubernetes.io/tls"
        assert secret["metadata"]["namespace"] == "edge"
        data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
        assert data == {"tls.crt": pair.cert_pem, "tls.key": pair.key_pem, "ca.crt": bundle.ca.cert_pem}
        tlsutil.validate_tls_secret(secret)  # what the core will check when it reads them back
    assert b"cakey" not in certgen.secrets_yaml(secrets).encode()


def test_mutual_tls_handshake(bundle: certgen.Bundle) -> None:
    # OpenSSL's own chain building and EKU checks, both ways: server auth and client auth.
    tls = (bundle.cpx.cert_pem, bundle.cpx.key_pem)
    with EchoServer("cpx", tls=tls, client_ca_pem=bundle.ca.cert_pem) as server:
        response = request(f"{server.url}/", sni="cpx", ca_pem=bundle.ca.cert_pem, client_cert=bundle.envoy)
        assert response.status == 200
        assert response.json()["tls"]["client_subject"] == "commonName=envoy"
        # The cpx certificate is also valid for localhost dialling.
        assert (
            request(
                f"{server.url}/", sni="localhost", ca_pem=bundle.ca.cert_pem, client_cert=bundle.envoy
            ).status
            == 200
        )
