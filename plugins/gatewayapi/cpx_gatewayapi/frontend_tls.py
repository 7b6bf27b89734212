"""A Gateway's ``spec.tls.frontend``: client certificate validation on its HTTPS listeners.

The ``perPort`` entry of a listener's port, else ``default``, gives the CA (``caCertificateRefs``:
ConfigMaps or Secrets with ``ca.crt``, in another namespace only with a ReferenceGrant there) and
the mode: ``AllowValidOnly`` requires a certificate the CA verifies; ``AllowInsecureFallback``
asks for one but accepts any, or none (the backend is left to decide).  The result is the core's
:class:`cpx.dag.DownstreamValidation` on the listener's secure virtual hosts.

Invalid references make the listener ResolvedRefs=False (``InvalidCACertificateRef``,
``InvalidCACertificateKind``, ``RefNotPermitted``); when no reference gives a CA the listener is
Accepted=False ``NoValidCACertificate`` and is not programmed, so no connection reaches its hosts
without the validation asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from cpx import ObjectKey, SourceView
from cpx.dag import DownstreamValidation, Secret

from cpx_gatewayapi import grants
from cpx_gatewayapi.cabundles import CAProblem, ca_bundle, not_permitted, ref_kind
from cpx_gatewayapi.gateway_tls import secret_reference
from cpx_gatewayapi.kinds import GATEWAY
from cpx_gatewayapi.model import Verdict

INSECURE_FALLBACK = "AllowInsecureFallback"
INVALID_CA_CERTIFICATE_KIND = "InvalidCACertificateKind"
NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"


@attrs.frozen
class FrontendValidation:
    """A listener's client validation, or why it has none: ``problem`` (ResolvedRefs=False) and,
    when no CA at all could be read, ``validation`` None (Accepted=False)."""

    validation: DownstreamValidation | None
    problem: Verdict | None = None


def frontend_config(gateway: Mapping[str, Any], port: int) -> Mapping[str, Any] | None:
    """The ``validation`` that applies to a listener port: its ``perPort`` entry's, else ``default``'s."""
    frontend = _frontend(gateway)
    for entry in frontend.get("perPort") or ():
        if isinstance(entry, Mapping) and entry.get("port") == port:
            return _mapping(_mapping(entry, "tls"), "validation") or None
    return _mapping(_mapping(frontend, "default"), "validation") or None


def resolve_frontend(
    source: SourceView, gateway: ObjectKey, validation: Mapping[str, Any]
) -> FrontendValidation:
    refs = [ref for ref in validation.get("caCertificateRefs") or () if isinstance(ref, Mapping)]
    bundles: list[bytes] = []
    problem: Verdict | None = None
    for ref in refs:
        try:
            bundles.append(_bundle(source, gateway, ref))
        except CAProblem as err:
            problem = problem or Verdict(False, err.reason, err.message)
    if not bundles:
        message = problem.message if problem else "validation.caCertificateRefs is empty"
        return FrontendValidation(None, problem or Verdict(False, "InvalidCACertificateRef", message))
    names = "+".join(str(ref.get("name") or "") for ref in refs)
    ca = Secret(
        namespace=gateway.namespace, name=f"{gateway.name}/frontend/{names}", ca_pem=b"".join(bundles)
    )
    insecure = validation.get("mode") == INSECURE_FALLBACK
    return FrontendValidation(
        DownstreamValidation(ca=ca, skip_verification=insecure, optional=insecure), problem
    )


def not_accepted(problem: Verdict) -> Verdict:
    """A listener's Accepted when none of its CA references gives a CA."""
    return Verdict(False, NO_VALID_CA_CERTIFICATE, f"No valid CA certificate: {problem.message}")


def insecure_fallback(gateway: Mapping[str, Any]) -> bool:
    """Whether the default or a per-port validation is AllowInsecureFallback."""
    return any(validation.get("mode") == INSECURE_FALLBACK for validation in _validations(gateway))


def references_config_map(obj: Mapping[str, Any], source: SourceView) -> bool:
    """Whether a Gateway's frontend validation names this ConfigMap (a rebuild trigger)."""
    key = ObjectKey.of(obj)
    for gateway in source.list(GATEWAY):
        namespace = str((gateway.get("metadata") or {}).get("namespace") or "")
        for validation in _validations(gateway):
            for ref in validation.get("caCertificateRefs") or ():
                if (
                    isinstance(ref, Mapping)
                    and ref_kind(ref) == ("", "ConfigMap")
                    and ref.get("name") == key.name
                    and (ref.get("namespace") or namespace) == key.namespace
                ):
                    return True
    return False


def _bundle(source: SourceView, gateway: ObjectKey, ref: Mapping[str, Any]) -> bytes:
    namespace = str(ref.get("namespace") or gateway.namespace)
    group, kind = ref_kind(ref)
    name = str(ref.get("name") or "")
    if (group, kind) == ("", "ConfigMap") and not grants.permitted(
        source, secret_reference(gateway, namespace, name, kind="ConfigMap")
    ):
        raise not_permitted("ConfigMap", namespace, name, gateway)
    return ca_bundle(source, namespace, ref, gateway, kind_reason=INVALID_CA_CERTIFICATE_KIND)


def _validations(gateway: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The default and every per-port ``validation`` of a Gateway."""
    frontend = _frontend(gateway)
    configs = [_mapping(frontend, "default")]
    configs += [
        _mapping(entry, "tls") for entry in frontend.get("perPort") or () if isinstance(entry, Mapping)
    ]
    return [_mapping(config, "validation") for config in configs]


def _frontend(gateway: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(_mapping(gateway, "spec"), "tls"), "frontend")


def _mapping(obj: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    value = obj.get(field)
    return value if isinstance(value, Mapping) else {}
