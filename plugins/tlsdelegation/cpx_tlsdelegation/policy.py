"""Contour's delegationPermitted (internal/dag/cache.go), as the answer to the core's
secret-access policy hook."""

from __future__ import annotations

from cpx import ObjectKey, SourceView, namespace_of

from cpx_tlsdelegation.kinds import TLS_CERTIFICATE_DELEGATION
from cpx_tlsdelegation.model import delegations

# Gateway API decides with its own ReferenceGrant, not TLSCertificateDelegation (Contour's
# gatewayapi_processor.go looks listener certificates up with LookupTLSSecretInsecure).
GATEWAY_API_GROUP = "gateway.networking.k8s.io"


def permitted(
    source: SourceView, secret_namespace: str, secret_name: str, referrer: ObjectKey
) -> bool | None:
    """Whether a delegation in the Secret's namespace names it for the referrer's namespace; None for
    Gateway API referrers (not ours to judge)."""
    if referrer.group == GATEWAY_API_GROUP:
        return None
    # Read through the view (a listing): the referrer is re-translated when delegations change.
    for obj in source.list(TLS_CERTIFICATE_DELEGATION):
        if namespace_of(obj) != secret_namespace:
            continue
        for delegation in delegations(obj):
            if delegation.secret_name == secret_name and delegation.permits(referrer.namespace):
                return True
    return False
