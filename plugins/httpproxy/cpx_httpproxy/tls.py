"""A root's ``spec.virtualhost.tls``: passthrough or a certificate, protocol versions, the
fallback certificate and client validation (:mod:`cpx_httpproxy.clientcert`), checked in Contour's
order (``httpproxy_processor.go``, computeSecureVirtualHost).

Each failure is recorded on the root's status with Contour's reason and message; the root is then
not served.
"""

from __future__ import annotations

import attrs
from cpx import DelegationNotPermittedError, ObjectKey, SecretError, SourceView
from cpx.dag import DownstreamValidation, Secret

from cpx_httpproxy import model
from cpx_httpproxy import status as st
from cpx_httpproxy.clientcert import resolve_client_validation
from cpx_httpproxy.delegation import refusal_message
from cpx_httpproxy.status import ProxyStatus

TLS_VERSIONS = ("1.2", "1.3")


@attrs.frozen
class ResolvedTLS:
    """What a root's ``virtualhost.tls`` resolved to."""

    passthrough: bool
    secret: Secret | None = None
    min_version: str = "1.2"
    max_version: str = "1.3"
    fallback: Secret | None = None
    client_validation: DownstreamValidation | None = None


@attrs.frozen
class _SecretErrors:
    """The (reason, message) a secret lookup records when delegation is refused, and the reason and
    message prefix when the secret is unusable (the lookup's error follows the prefix); ``subject``
    names the reference when no delegation policy is enabled."""

    subject: str
    not_delegated: tuple[str, str]
    invalid: tuple[str, str]


def _fallback_conflict(
    tls: model.TLS, per_host_feature: tuple[str, str, str] | None
) -> tuple[str, str, str] | None:
    """Why the fallback certificate cannot be enabled beside this host's other TLS settings."""
    if not tls.enable_fallback_certificate:
        return None
    if tls.client_validation is not None:
        message = "Spec.Virtualhost.TLS fallback & client validation are incompatible"
        return (st.TLS_ERROR, "TLSIncompatibleFeatures", message)
    return per_host_feature


def resolve_tls(
    tls: model.TLS,
    *,
    referrer: ObjectKey,
    source: SourceView,
    fallback_certificate: tuple[str, str] | None,
    status: ProxyStatus,
    fallback_conflict: tuple[str, str, str] | None = None,
) -> ResolvedTLS | None:
    """The root's TLS settings; None after recording why they are unusable.  ``fallback_conflict``:
    the (type, reason, message) recorded when the fallback certificate is enabled beside a feature
    it cannot serve (a feature configured per virtual host)."""
    problem = _mode_error(tls)
    if problem is not None:
        status.add_error(st.TLS_ERROR, *problem)
        return None
    if tls.passthrough:
        return ResolvedTLS(passthrough=True)
    namespace, name = _namespaced(tls.secret_name, referrer.namespace)
    ref = f'Spec.VirtualHost.TLS Secret "{tls.secret_name}"'
    errors = _SecretErrors(
        subject=ref,
        not_delegated=("DelegationNotPermitted", f"{ref} certificate delegation not permitted"),
        invalid=("SecretNotValid", f"{ref} is invalid"),
    )
    secret = _lookup(source, namespace, name, referrer, status, errors)
    if secret is None:
        return None
    min_version = _tls_version(tls.minimum_protocol_version, "1.2")
    max_version = _tls_version(tls.maximum_protocol_version, "1.3")
    if max_version < min_version:
        status.add_error(
            st.TLS_ERROR,
            "TLSConfigNotValid",
            "Spec.Virtualhost.TLS the minimum protocol version is greater than the maximum protocol version",
        )
        return None
    conflict = _fallback_conflict(tls, fallback_conflict)
    if conflict is not None:
        status.add_error(*conflict)
        return None
    fallback = None
    if tls.enable_fallback_certificate:
        fallback = _fallback(source, fallback_certificate, referrer, status)
        if fallback is None:
            return None
    client_validation = None
    if tls.client_validation is not None:
        client_validation = resolve_client_validation(
            tls.client_validation, referrer=referrer, source=source, status=status
        )
        if client_validation is None:
            return None
    return ResolvedTLS(
        passthrough=False,
        secret=secret,
        min_version=min_version,
        max_version=max_version,
        fallback=fallback,
        client_validation=client_validation,
    )


def _mode_error(tls: model.TLS) -> tuple[str, str] | None:
    """(reason, message) when passthrough, a secret and the fallback certificate do not combine."""
    if tls.passthrough and tls.enable_fallback_certificate:
        return (
            "TLSIncompatibleFeatures",
            "Spec.VirtualHost.TLS: both Passthrough and enableFallbackCertificate were specified",
        )
    has_secret = bool(tls.secret_name.strip())
    if has_secret and tls.passthrough:
        return "TLSConfigNotValid", "Spec.VirtualHost.TLS: both Passthrough and SecretName were specified"
    if not has_secret and not tls.passthrough:
        return "TLSConfigNotValid", "Spec.VirtualHost.TLS: neither Passthrough nor SecretName were specified"
    if tls.passthrough and tls.client_validation is not None:
        return (
            "TLSIncompatibleFeatures",
            "Spec.VirtualHost.TLS passthrough cannot be combined with tls.clientValidation",
        )
    return None


def _fallback(
    source: SourceView,
    configured: tuple[str, str] | None,
    referrer: ObjectKey,
    status: ProxyStatus,
) -> Secret | None:
    """The ``--fallback-certificate`` Secret, if configured and the root may use it."""
    if configured is None:
        status.add_error(
            st.TLS_ERROR,
            "FallbackNotPresent",
            "Spec.Virtualhost.TLS enabled fallback but the fallback Certificate Secret is not "
            "configured in Contour configuration file",
        )
        return None
    namespace, name = configured
    errors = _SecretErrors(
        subject=f'The fallback certificate Secret "{namespace}/{name}"',
        not_delegated=(
            "FallbackNotDelegated",
            f'Spec.VirtualHost.TLS Secret "{namespace}/{name}" is not configured for certificate delegation',
        ),
        invalid=(
            "FallbackNotValid",
            f'Spec.Virtualhost.TLS Secret "{namespace}/{name}" fallback certificate is invalid',
        ),
    )
    return _lookup(source, namespace, name, referrer, status, errors)


def _lookup(
    source: SourceView,
    namespace: str,
    name: str,
    referrer: ObjectKey,
    status: ProxyStatus,
    errors: _SecretErrors,
) -> Secret | None:
    try:
        return source.lookup_tls_secret(namespace, name, referrer)
    except DelegationNotPermittedError as err:
        reason, message = errors.not_delegated
        status.add_error(st.TLS_ERROR, reason, refusal_message(err, errors.subject, message))
    except SecretError as err:
        reason, prefix = errors.invalid
        status.add_error(st.TLS_ERROR, reason, f"{prefix}: {err}")
    return None


def _namespaced(ref: str, default_namespace: str) -> tuple[str, str]:
    """``name`` or ``namespace/name`` (Contour's k8s.NamespacedNameFrom)."""
    namespace, slash, name = ref.partition("/")
    if not slash:
        return default_namespace, ref
    return namespace or default_namespace, name


def _tls_version(value: str, default: str) -> str:
    """Contour's annotation.TLSVersion: 1.2 or 1.3, anything else the default."""
    return value if value in TLS_VERSIONS else default
