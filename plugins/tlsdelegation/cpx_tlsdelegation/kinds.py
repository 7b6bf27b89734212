"""The kind this plugin owns."""

from __future__ import annotations

from cpx import GroupVersionKind

TLS_CERTIFICATE_DELEGATION = GroupVersionKind(
    group="projectcontour.io",
    version="v1",
    kind="TLSCertificateDelegation",
    plural="tlscertificatedelegations",
)
