"""CA bundles from ``caCertificateRefs`` (ConfigMap or Secret, key ``ca.crt``): BackendTLSPolicy's
validation and a Gateway's frontend (client certificate) validation read them alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from cpx import DelegationNotPermittedError, ObjectKey, SecretError, SourceView

CA_KEY = "ca.crt"
INVALID_CA_CERTIFICATE_REF = "InvalidCACertificateRef"
REF_NOT_PERMITTED = "RefNotPermitted"


@attrs.frozen
class CAProblem(Exception):
    """Why one reference gives no CA: its ResolvedRefs reason and message."""

    reason: str
    message: str


def ref_kind(ref: Mapping[str, Any]) -> tuple[str, str]:
    return str(ref.get("group") or ""), str(ref.get("kind") or "")


def ca_bundle(
    source: SourceView, namespace: str, ref: Mapping[str, Any], referrer: ObjectKey, *, kind_reason: str
) -> bytes:
    """The PEM bundle ``ref`` (in ``namespace``) names; a Secret is read through the source view's
    secret-access policy, a ConfigMap in another namespace is the caller's to permit."""
    group, kind = ref_kind(ref)
    name = str(ref.get("name") or "")
    if (group, kind) == ("", "Secret"):
        try:
            return source.lookup_ca_secret(namespace, name, referrer).ca_pem
        except DelegationNotPermittedError:
            raise CAProblem(REF_NOT_PERMITTED, _not_permitted("Secret", namespace, name, referrer)) from None
        except SecretError as err:
            raise CAProblem(INVALID_CA_CERTIFICATE_REF, f"CA Secret {namespace}/{name}: {err}") from None
    if (group, kind) != ("", "ConfigMap"):
        shown = f"{group}/{kind}" if group else kind
        raise CAProblem(
            kind_reason, f"caCertificateRef {shown} {name}: only ConfigMap and Secret are supported"
        )
    config_map = source.get(ObjectKey(group, kind, namespace, name))
    where = f"CA ConfigMap {namespace}/{name}"
    if config_map is None:
        raise CAProblem(INVALID_CA_CERTIFICATE_REF, f"{where} not found")
    pem = (config_map.get("data") or {}).get(CA_KEY)
    if not isinstance(pem, str) or not pem.strip():
        raise CAProblem(INVALID_CA_CERTIFICATE_REF, f"{where} has no {CA_KEY}")
    from cryptography import x509  # noqa: PLC0415 (imported only when a CA is checked: start-up time)

    try:
        x509.load_pem_x509_certificates(pem.encode())
    except ValueError:
        raise CAProblem(
            INVALID_CA_CERTIFICATE_REF, f"{where}: {CA_KEY} is not a PEM certificate bundle"
        ) from None
    return pem.encode() if pem.endswith("\n") else (pem + "\n").encode()


def _not_permitted(kind: str, namespace: str, name: str, referrer: ObjectKey) -> str:
    return (
        f"caCertificateRef {kind} {namespace}/{name} is in another namespace and no ReferenceGrant there "
        f"allows {referrer.kind}s of namespace {referrer.namespace} to refer to it"
    )


def not_permitted(kind: str, namespace: str, name: str, referrer: ObjectKey) -> CAProblem:
    return CAProblem(REF_NOT_PERMITTED, _not_permitted(kind, namespace, name, referrer))
