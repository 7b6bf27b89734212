"""Validation of TLS material (with the cryptography library): Kubernetes Secrets, and the xDS
server's own certificate files."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpx import objects as k8s
from cpx.dag.nodes import Secret

if TYPE_CHECKING:
    from cryptography import x509

TLS_SECRET_TYPE = "kubernetes.io/tls"
OPAQUE_SECRET_TYPE = "Opaque"


class SecretError(ValueError):
    """A Secret cannot be used; the message says why (and never contains its data)."""


def _decode(obj: Mapping[str, Any], field: str) -> bytes | None:
    data = obj.get("data") or {}
    if field in data:
        try:
            return base64.b64decode(str(data[field]), validate=True)
        except (binascii.Error, ValueError):
            raise SecretError(f"{field} is not valid base64") from None
    string_data = obj.get("stringData") or {}
    if field in string_data:
        return str(string_data[field]).encode()
    return None


def _load_certs(pem: bytes, what: str) -> list[x509.Certificate]:
    from cryptography import x509  # noqa: PLC0415 (cryptography: ~10 MB, loaded with the first secret)

    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise SecretError(f"{what} is not a PEM-encoded certificate") from None
    if not certs:
        raise SecretError(f"{what} holds no certificate")
    return certs


def _public_bytes(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 (cryptography: ~10 MB, loaded with the first secret)

    return bytes(
        key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def validate_tls_secret(obj: Mapping[str, Any]) -> Secret:
    """Check a ``kubernetes.io/tls`` Secret: certificate and key parse, and the key matches."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 (cryptography: ~10 MB, loaded with the first secret)
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: PLC0415

    where = f"Secret {k8s.namespace_of(obj)}/{k8s.name_of(obj)}"
    secret_type = obj.get("type", "Opaque")
    if secret_type != TLS_SECRET_TYPE:
        raise SecretError(f"{where} is of type {secret_type!r}, not {TLS_SECRET_TYPE!r}")
    try:
        cert_pem = _decode(obj, "tls.crt")
        key_pem = _decode(obj, "tls.key")
    except SecretError as err:
        raise SecretError(f"{where}: {err}") from None
    if not cert_pem:
        raise SecretError(f"{where} has no tls.crt")
    if not key_pem:
        raise SecretError(f"{where} has no tls.key")
    try:
        certs = _load_certs(cert_pem, "tls.crt")
    except SecretError as err:
        raise SecretError(f"{where}: {err}") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        raise SecretError(f"{where}: tls.key is not a PEM-encoded, unencrypted private key") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise SecretError(f"{where}: unsupported private key type")
    if _public_bytes(key.public_key()) != _public_bytes(certs[0].public_key()):
        raise SecretError(f"{where}: tls.key does not match the certificate in tls.crt")
    ca_pem = _decode(obj, "ca.crt") or b""
    return Secret(
        namespace=k8s.namespace_of(obj),
        name=k8s.name_of(obj),
        cert_pem=cert_pem,
        key_pem=key_pem,
        ca_pem=ca_pem,
    )


def _bundle(obj: Mapping[str, Any], field: str) -> bytes:
    """The non-empty ``field`` of a ``kubernetes.io/tls`` or ``Opaque`` Secret (Contour's
    validCASecret and validCRLSecret accept only those types)."""
    where = f"Secret {k8s.namespace_of(obj)}/{k8s.name_of(obj)}"
    secret_type = obj.get("type", OPAQUE_SECRET_TYPE)
    if secret_type not in (TLS_SECRET_TYPE, OPAQUE_SECRET_TYPE):
        raise SecretError(f"{where}: secret type is not {TLS_SECRET_TYPE!r} or {OPAQUE_SECRET_TYPE!r}")
    try:
        pem = _decode(obj, field)
    except SecretError as err:
        raise SecretError(f"{where}: {err}") from None
    if not pem:
        raise SecretError(f"{where} has no {field}")
    return pem


def validate_ca_secret(obj: Mapping[str, Any]) -> Secret:
    """Check a Secret carrying a CA bundle under ``ca.crt``."""
    ca_pem = _bundle(obj, "ca.crt")
    try:
        _load_certs(ca_pem, "ca.crt")
    except SecretError as err:
        raise SecretError(f"Secret {k8s.namespace_of(obj)}/{k8s.name_of(obj)}: {err}") from None
    return Secret(namespace=k8s.namespace_of(obj), name=k8s.name_of(obj), ca_pem=ca_pem)


def validate_crl_secret(obj: Mapping[str, Any]) -> Secret:
    """Check a Secret carrying PEM certificate revocation lists under ``crl.pem``: each parses
    (Envoy refuses the whole listener otherwise)."""
    from cryptography import x509  # noqa: PLC0415 (cryptography: ~10 MB, loaded with the first secret)

    crl_pem = _bundle(obj, "crl.pem")
    blocks = _PEM_BLOCK.findall(crl_pem)
    where = f"Secret {k8s.namespace_of(obj)}/{k8s.name_of(obj)}"
    if not blocks:
        raise SecretError(f"{where}: crl.pem holds no X509 CRL")
    for block in blocks:
        try:
            x509.load_pem_x509_crl(block)
        except ValueError:
            raise SecretError(f"{where}: crl.pem is not a PEM-encoded certificate revocation list") from None
    return Secret(namespace=k8s.namespace_of(obj), name=k8s.name_of(obj), crl_pem=crl_pem)


_PEM_BLOCK = re.compile(rb"-----BEGIN X509 CRL-----.+?-----END X509 CRL-----", re.DOTALL)


def _read(path: str | Path, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise SecretError(f"{flag} {path}: {err.strerror or err}") from None


def check_server_tls_files(ca_file: str | Path, cert_file: str | Path, key_file: str | Path) -> None:
    """Check the xDS server's mTLS files before gRPC reads them (gRPC only says "Failed to bind").

    The CA file and the certificate file hold PEM certificates, the key file an unencrypted PEM
    private key, and that key belongs to the (first) certificate. The error names the files.
    """
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 (cryptography: ~10 MB, loaded with the first secret)

    _load_certs(_read(ca_file, "--xds-cafile"), f"--xds-cafile {ca_file}")
    certs = _load_certs(_read(cert_file, "--xds-cert-file"), f"--xds-cert-file {cert_file}")
    try:
        key = serialization.load_pem_private_key(_read(key_file, "--xds-key-file"), password=None)
    except (ValueError, TypeError):
        raise SecretError(
            f"--xds-key-file {key_file} is not a PEM-encoded, unencrypted private key"
        ) from None
    if _public_bytes(key.public_key()) != _public_bytes(certs[0].public_key()):
        raise SecretError(
            f"--xds-key-file {key_file} does not match the certificate in --xds-cert-file {cert_file}"
        )
