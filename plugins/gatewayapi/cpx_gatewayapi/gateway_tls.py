"""A Gateway listener's ``tls.certificateRefs``: the certificate it serves, or why it has none.

The Secret is read through the source view (``lookup_tls_secret``), whose cross-namespace policy is
the ``cpx_secret_access_permitted`` hook: this plugin answers it for Gateways with their
ReferenceGrants (:func:`secret_reference`), so a Secret in another namespace is used only where a
grant in that namespace lets the Gateway's namespace refer to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from cpx import DelegationNotPermittedError, ObjectKey, SecretError, SourceView
from cpx.dag import Secret

from cpx_gatewayapi.grants import Reference
from cpx_gatewayapi.kinds import GROUP

INVALID_CERTIFICATE_REF = "InvalidCertificateRef"
REF_NOT_PERMITTED = "RefNotPermitted"


@attrs.frozen
class CertificateProblem:
    """Why a listener has no certificate: the listener's ResolvedRefs reason and message."""

    reason: str
    message: str


def secret_reference(gateway: ObjectKey, namespace: str, name: str, kind: str = "Secret") -> Reference:
    """The ReferenceGrant question for a Gateway's reference to a Secret (or another core kind)."""
    return Reference(
        from_group=GROUP,
        from_kind="Gateway",
        from_namespace=gateway.namespace,
        to_group="",
        to_kind=kind,
        to_namespace=namespace,
        to_name=name,
    )


def resolve_certificate(
    source: SourceView, gateway: ObjectKey, tls: Mapping[str, Any]
) -> Secret | CertificateProblem:
    """The one Secret a Terminate listener serves (cpx, like Contour, supports exactly one)."""
    refs = tls.get("certificateRefs")
    refs = refs if isinstance(refs, list) else []
    if len(refs) != 1:
        return CertificateProblem(
            INVALID_CERTIFICATE_REF,
            f"Listener.TLS.CertificateRefs must hold exactly one Secret reference, not {len(refs)}",
        )
    ref = refs[0] if isinstance(refs[0], Mapping) else {}
    group, kind = str(ref.get("group") or ""), str(ref.get("kind") or "Secret")
    name = str(ref.get("name") or "")
    namespace = str(ref.get("namespace") or gateway.namespace)
    if group != "" or kind != "Secret":
        return CertificateProblem(
            INVALID_CERTIFICATE_REF,
            f'Listener.TLS.CertificateRef "{name}": only Secrets (group "", kind Secret) are supported, '
            f'not group "{group}" kind "{kind}"',
        )
    try:
        return source.lookup_tls_secret(namespace, name, gateway)
    except DelegationNotPermittedError:
        return CertificateProblem(
            REF_NOT_PERMITTED,
            f"Listener.TLS.CertificateRef Secret {namespace}/{name} is in another namespace and no "
            f"ReferenceGrant there allows Gateways of namespace {gateway.namespace} to refer to it",
        )
    except SecretError as err:
        return CertificateProblem(INVALID_CERTIFICATE_REF, f"Listener.TLS.CertificateRef is invalid: {err}")
