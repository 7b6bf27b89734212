"""TLS material signed by a per-process test CA, and an HTTP(S) client that splits SNI from address.

httpx and urllib derive SNI and ``Host`` from the URL; tests of virtual hosts need to dial
``127.0.0.1:<port>`` while presenting ``foo.example.com``, hence the small http.client wrapper.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import http.client
import ipaddress
import json
import ssl
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from cpx.ops import certgen
from cpx.ops.echoserver import load_pem_chain


@functools.cache
def default_ca() -> certgen.KeyPair:
    """The CA behind every certificate this module issues (generated once per process)."""
    return certgen.new_ca("cpx test CA", lifetime_days=30)


def issue_cert(hosts: Iterable[str], *, client: bool = False, uris: Iterable[str] = ()) -> certgen.KeyPair:
    """A certificate for ``hosts`` (DNS names or IPs, wildcards allowed) and ``uris`` (URI SANs, e.g.
    SPIFFE IDs), signed by :func:`default_ca`."""
    hosts = list(hosts)
    ips = [h for h in hosts if _is_ip(h)]
    names = [h for h in hosts if not _is_ip(h)]
    return certgen.issue(
        default_ca(),
        names[0] if names else ips[0],
        dns_names=names,
        ip_addresses=ips,
        uris=uris,
        client=client,
        lifetime_days=30,
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def make_tls_secret(namespace: str, name: str, hosts: Iterable[str]) -> tuple[dict[str, Any], str]:
    """A ``kubernetes.io/tls`` Secret for ``hosts`` and the PEM of the CA that signed it."""
    pair = issue_cert(hosts)
    return certgen.tls_secret(namespace, name, pair), default_ca().cert_pem.decode()


def make_ca_secret(namespace: str, name: str, ca_pem: str | bytes | None = None) -> dict[str, Any]:
    """An Opaque Secret holding only ``ca.crt`` (upstream and client certificate validation)."""
    pem = ca_pem if ca_pem is not None else default_ca().cert_pem
    return _opaque_secret(namespace, name, "ca.crt", pem.encode() if isinstance(pem, str) else pem)


def _opaque_secret(namespace: str, name: str, key: str, data: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {key: base64.b64encode(data).decode()},
    }


def make_crl(ca: certgen.KeyPair, revoked: Iterable[certgen.KeyPair] = (), *, days: int = 30) -> bytes:
    """A PEM certificate revocation list of ``ca`` revoking ``revoked`` (by serial number)."""
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.cert.subject)
        .last_update(now - dt.timedelta(minutes=5))
        .next_update(now + dt.timedelta(days=days))
    )
    for pair in revoked:
        entry = x509.RevokedCertificateBuilder().serial_number(pair.cert.serial_number).revocation_date(now)
        builder = builder.add_revoked_certificate(entry.build())
    crl = builder.sign(ca.private_key(), hashes.SHA256())
    return crl.public_bytes(serialization.Encoding.PEM)


def make_crl_secret(namespace: str, name: str, crl_pem: bytes) -> dict[str, Any]:
    """An Opaque Secret holding ``crl.pem`` (client certificate revocation)."""
    return _opaque_secret(namespace, name, "crl.pem", crl_pem)


@attrs.frozen
class Response:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes
    raw_headers: list[tuple[str, str]] = attrs.field(factory=list, repr=False)
    peer_cert_der: bytes | None = attrs.field(default=None, repr=False)

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)

    def peer_dns_names(self) -> list[str]:
        """DNS SANs of the certificate the server presented (which vhost's cert Envoy chose)."""
        if self.peer_cert_der is None:
            return []
        cert = x509.load_der_x509_certificate(self.peer_cert_der)
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return []
        return san.get_values_for_type(x509.DNSName)


class _TLSConnection(http.client.HTTPConnection):
    """HTTP over TLS to ``host:port`` with an independent SNI (``None`` sends none)."""

    def __init__(
        self, host: str, port: int, *, context: ssl.SSLContext, sni: str | None, timeout: float
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._tls_context = context
        self._sni = sni

    def connect(self) -> None:
        super().connect()
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self._sni)


def client_tls_context(
    ca_pem: str | bytes | None, *, check_hostname: bool, client_cert: certgen.KeyPair | None = None
) -> ssl.SSLContext:
    """Verify against ``ca_pem`` (no verification when None), optionally presenting a client cert."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca_pem is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.load_verify_locations(cadata=ca_pem.decode() if isinstance(ca_pem, bytes) else ca_pem)
        ctx.check_hostname = check_hostname
    if client_cert is not None:
        load_pem_chain(ctx, client_cert.cert_pem, client_cert.key_pem)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def request(  # noqa: PLR0913  (why: one keyword per request knob of the TLS client)
    url: str,
    *,
    method: str = "GET",
    host_header: str | None = None,
    sni: str | None = None,
    ca_pem: str | bytes | None = None,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    client_cert: certgen.KeyPair | None = None,
    timeout: float = 5.0,
) -> Response:
    """One HTTP/1.1 request to the address in ``url``; ``Host`` is ``host_header`` (else SNI, else
    the URL's host). For https, the server certificate is checked against ``ca_pem`` and ``sni``."""
    parts = urlsplit(url)
    address, port = parts.hostname or "127.0.0.1", parts.port
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        ctx = client_tls_context(ca_pem, check_hostname=sni is not None, client_cert=client_cert)
        conn = _TLSConnection(address, port or 443, context=ctx, sni=sni, timeout=timeout)
    else:
        conn = http.client.HTTPConnection(address, port or 80, timeout=timeout)
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host_header or sni or parts.netloc)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        data = response.read()
        peer = conn.sock.getpeercert(binary_form=True) if isinstance(conn.sock, ssl.SSLSocket) else None
        raw = response.getheaders()
        merged: dict[str, str] = {}
        for name, value in raw:
            key = name.lower()
            merged[key] = f"{merged[key]}, {value}" if key in merged else value
        return Response(response.status, merged, data, raw, peer)
    finally:
        conn.close()


def https_get(
    url: str,
    sni: str | None,
    ca_pem: str | bytes | None,
    host_header: str | None = None,
    **kwargs: Any,
) -> Response:
    """GET over TLS to the address in ``url`` presenting ``sni`` (see :func:`request`)."""
    return request(url, sni=sni, ca_pem=ca_pem, host_header=host_header, **kwargs)


def http_get(url: str, host_header: str | None = None, **kwargs: Any) -> Response:
    """GET over plain HTTP with an explicit ``Host`` (see :func:`request`)."""
    return request(url, host_header=host_header, **kwargs)


def self_signed(key: Any, hosts: Sequence[str], *, days: int = 30) -> certgen.KeyPair:
    """A self-signed certificate for ``hosts`` (the first is the CN) over any ``cryptography``
    private key: the odd keys (1024-bit RSA, EC curves) Envoy's rules are tested with."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certgen.KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem)


def weak_tls_secret(namespace: str, name: str, host: str) -> dict[str, Any]:
    """A well-formed, self-signed kubernetes.io/tls Secret whose RSA key (1024 bits) Envoy refuses."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    return certgen.tls_secret(namespace, name, self_signed(key, [host]))
