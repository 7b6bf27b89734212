"""A root's ``spec.virtualhost.tls.clientValidation`` → the core's DownstreamValidation, with
Contour's reasons and messages (``httpproxy_processor.go``, computeSecureVirtualHost).

The CA (``ca.crt``) and CRL (``crl.pem``) Secrets are looked up through the source view, in the
proxy's namespace or another one the secret-access policy (delegation) permits.
"""

from __future__ import annotations

from collections.abc import Callable

from cpx import DelegationNotPermittedError, ObjectKey, SecretError, SourceView
from cpx.dag import ClientCertificateDetails, DownstreamValidation, Secret

from cpx_httpproxy import model
from cpx_httpproxy import status as st
from cpx_httpproxy.status import ProxyStatus

_INVALID = "ClientValidationInvalid"
_PREFIX = "Spec.VirtualHost.TLS client validation is invalid"

_Lookup = Callable[[str, str, ObjectKey], Secret]


def resolve_client_validation(
    validation: model.DownstreamValidation,
    *,
    referrer: ObjectKey,
    source: SourceView,
    status: ProxyStatus,
) -> DownstreamValidation | None:
    """The validation the root's SNI chain enforces; None after recording why it is unusable."""
    ca = None
    if validation.ca_secret:
        ca = _secret(validation.ca_secret, "CA", source.lookup_ca_secret, referrer, status)
        if ca is None:
            return None
    elif not validation.skip_client_cert_validation:
        status.add_error(st.TLS_ERROR, _INVALID, f"{_PREFIX}: CA Secret must be specified")
        return None
    crl = None
    if validation.crl_secret:
        crl = _secret(validation.crl_secret, "CRL", source.lookup_crl_secret, referrer, status)
        if crl is None:
            return None
        if ca is None:
            # Envoy checks CRLs against the trusted CA and refuses a CRL without one.
            status.add_error(st.TLS_ERROR, _INVALID, f"{_PREFIX}: a CRL Secret requires a CA Secret")
            return None
    forward = validation.forward_client_certificate
    return DownstreamValidation(
        ca=ca,
        crl=crl,
        skip_verification=validation.skip_client_cert_validation,
        optional=validation.optional_client_certificate,
        crl_only_verify_leaf=validation.crl_only_verify_leaf_cert,
        forward_client_certificate=None
        if forward is None
        else ClientCertificateDetails(
            subject=forward.subject, cert=forward.cert, chain=forward.chain, dns=forward.dns, uri=forward.uri
        ),
    )


def _secret(ref: str, what: str, lookup: _Lookup, referrer: ObjectKey, status: ProxyStatus) -> Secret | None:
    namespace, slash, name = ref.partition("/")
    if not slash:
        namespace, name = referrer.namespace, ref
    namespace = namespace or referrer.namespace
    try:
        return lookup(namespace, name, referrer)
    except DelegationNotPermittedError:
        status.add_error(
            st.TLS_ERROR,
            "DelegationNotPermitted",
            f'Spec.VirtualHost.TLS {what} Secret "{ref}" is invalid: certificate delegation not permitted',
        )
    except SecretError as err:
        status.add_error(
            st.TLS_ERROR, _INVALID, f'{_PREFIX}: invalid {what} Secret "{namespace}/{name}": {err}'
        )
    return None
