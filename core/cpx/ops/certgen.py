"""Certificates for the xDS connection (``contour certgen``, ``internal/certgen``).

One self-signed CA issues a server certificate for cpx and a client certificate for Envoy, so
that the gRPC connection between them is mutual TLS. Differences from Contour: the cpx
certificate is for server authentication only and Envoy's for client authentication only (Contour
gives both certificates both usages), and the cpx certificate also names ``localhost`` and
``127.0.0.1`` so that the demo and the tests can use it on loopback.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cpx.config import CertgenOptions

DEFAULT_NAMESPACE = CertgenOptions().namespace
DEFAULT_LIFETIME_DAYS = CertgenOptions().lifetime_days
CA_CERT_FILE, CA_KEY_FILE = "cacert.pem", "cakey.pem"
CPX_CERT_FILE, CPX_KEY_FILE = "cpxcert.pem", "cpxkey.pem"
ENVOY_CERT_FILE, ENVOY_KEY_FILE = "envoycert.pem", "envoykey.pem"
# Secret names of Contour's "compact" format, with cpx for contour.
CPX_SECRET, ENVOY_SECRET = "cpxcert", "envoycert"


@attrs.frozen
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes = attrs.field(repr=False)

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> rsa.RSAPrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise TypeError("not an RSA private key")
        return key


@attrs.frozen
class Bundle:
    """What ``certgen`` produces: the CA, cpx's server pair and Envoy's client pair."""

    ca: KeyPair
    cpx: KeyPair
    envoy: KeyPair


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(cert: x509.Certificate, key: rsa.RSAPrivateKey) -> KeyPair:
    return KeyPair(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def _validity(lifetime_days: int, now: dt.datetime | None) -> tuple[dt.datetime, dt.datetime]:
    start = now or dt.datetime.now(dt.UTC)
    # Back-date a little so that a peer whose clock is slightly behind accepts the certificate.
    return start - dt.timedelta(minutes=5), start + dt.timedelta(days=lifetime_days)


def new_ca(
    common_name: str = "cpx CA",
    *,
    lifetime_days: int = DEFAULT_LIFETIME_DAYS,
    now: dt.datetime | None = None,
) -> KeyPair:
    """A self-signed CA certificate that may sign leaf certificates only (path length 0)."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    not_before, not_after = _validity(lifetime_days, now)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _pem(cert, key)


def issue(  # noqa: PLR0913  (why: one keyword per certificate field)
    ca: KeyPair,
    common_name: str,
    *,
    dns_names: Iterable[str] = (),
    ip_addresses: Iterable[str] = (),
    uris: Iterable[str] = (),
    server: bool = True,
    client: bool = False,
    lifetime_days: int = DEFAULT_LIFETIME_DAYS,
    now: dt.datetime | None = None,
) -> KeyPair:
    """A leaf certificate signed by ``ca`` for the given names and usages (RSA 2048, SHA-256)."""
    key = _new_key()
    ca_cert, ca_key = ca.cert, ca.private_key()
    not_before, not_after = _validity(lifetime_days, now)
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dict.fromkeys(dns_names)]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in dict.fromkeys(ip_addresses)]
    sans += [x509.UniformResourceIdentifier(uri) for uri in dict.fromkeys(uris)]
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(min(not_after, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return _pem(builder.sign(ca_key, hashes.SHA256()), key)


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names a Kubernetes Service answers to (Contour's certgen uses the same four)."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate_bundle(
    *,
    namespace: str = DEFAULT_NAMESPACE,
    lifetime_days: int = DEFAULT_LIFETIME_DAYS,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    now: dt.datetime | None = None,
) -> Bundle:
    """Generate the CA and both leaf certificates in memory.

    ``dns_names``/``ip_addresses`` are added to the cpx certificate (e.g. the address Envoy dials).
    """
    ca = new_ca("cpx CA", lifetime_days=lifetime_days, now=now)
    cpx = issue(
        ca,
        "cpx",
        dns_names=[*service_names("cpx", namespace), "localhost", *dns_names],
        ip_addresses=["127.0.0.1", *ip_addresses],
        server=True,
        lifetime_days=lifetime_days,
        now=now,
    )
    envoy = issue(
        ca,
        "envoy",
        dns_names=service_names("envoy", namespace),
        server=False,
        client=True,
        lifetime_days=lifetime_days,
        now=now,
    )
    return Bundle(ca=ca, cpx=cpx, envoy=envoy)


def write_pem(outdir: str | os.PathLike[str], bundle: Bundle, *, overwrite: bool = False) -> list[Path]:
    """Write the six PEM files to ``outdir`` (keys mode 0600); refuse to replace files unless asked."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        CA_CERT_FILE: bundle.ca.cert_pem,
        CA_KEY_FILE: bundle.ca.key_pem,
        CPX_CERT_FILE: bundle.cpx.cert_pem,
        CPX_KEY_FILE: bundle.cpx.key_pem,
        ENVOY_CERT_FILE: bundle.envoy.cert_pem,
        ENVOY_KEY_FILE: bundle.envoy.key_pem,
    }
    if not overwrite:
        existing = [name for name in files if (out / name).exists()]
        if existing:
            raise FileExistsError(f"{', '.join(existing)} already exist in {out} (use overwrite)")
    written = []
    for name, data in files.items():
        path = out / name
        # Create keys with 0600 from the start rather than chmod-ing a world-readable file.
        mode = 0o600 if name.endswith("key.pem") else 0o644
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(path, mode)
        written.append(path)
    return written


def generate(
    outdir: str | os.PathLike[str],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    lifetime_days: int = DEFAULT_LIFETIME_DAYS,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    overwrite: bool = False,
) -> list[Path]:
    """``cpx certgen <outdir>``: generate a bundle and write it as PEM files; returns their paths."""
    bundle = generate_bundle(
        namespace=namespace, lifetime_days=lifetime_days, dns_names=dns_names, ip_addresses=ip_addresses
    )
    return write_pem(outdir, bundle, overwrite=overwrite)


def load_bundle(outdir: str | os.PathLike[str]) -> Bundle:
    """Read back what :func:`generate` wrote (e.g. to print it as Secrets)."""
    out = Path(outdir)

    def pair(cert: str, key: str) -> KeyPair:
        return KeyPair((out / cert).read_bytes(), (out / key).read_bytes())

    return Bundle(
        ca=pair(CA_CERT_FILE, CA_KEY_FILE),
        cpx=pair(CPX_CERT_FILE, CPX_KEY_FILE),
        envoy=pair(ENVOY_CERT_FILE, ENVOY_KEY_FILE),
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def tls_secret(namespace: str, name: str, pair: KeyPair, ca_pem: bytes | None = None) -> dict[str, Any]:
    """A ``kubernetes.io/tls`` Secret manifest, with ``ca.crt`` when ``ca_pem`` is given."""
    data = {"tls.crt": _b64(pair.cert_pem), "tls.key": _b64(pair.key_pem)}
    if ca_pem is not None:
        data["ca.crt"] = _b64(ca_pem)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "cpx"}},
        "type": "kubernetes.io/tls",
        "data": data,
    }


def kubernetes_secrets(
    bundle: Bundle, *, namespace: str = DEFAULT_NAMESPACE, name_suffix: str = ""
) -> list[dict[str, Any]]:
    """Contour's "compact" Secrets: ``cpxcert`` and ``envoycert``, each carrying the CA as ``ca.crt``.

    The CA key is not exported: nothing in the cluster needs it.
    """
    return [
        tls_secret(namespace, CPX_SECRET + name_suffix, bundle.cpx, bundle.ca.cert_pem),
        tls_secret(namespace, ENVOY_SECRET + name_suffix, bundle.envoy, bundle.ca.cert_pem),
    ]


def secrets_yaml(secrets: Iterable[dict[str, Any]]) -> str:
    """Multi-document YAML of the manifests (``cpx certgen --secrets``)."""
    import yaml  # noqa: PLC0415 (only this output needs PyYAML)

    return yaml.safe_dump_all(list(secrets), sort_keys=False, explicit_start=True)
