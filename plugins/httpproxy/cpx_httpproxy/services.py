"""HTTPProxy ``services[]`` to DAG clusters (the services loop of Contour's ``computeRoutes`` and
``processHTTPProxyTCPProxy``, with ``EnsureService``, ``getProtocol``,
``LookupUpstreamValidation`` and ``determineSNI``).
"""

from __future__ import annotations

import attrs
from cpx import (
    Config,
    DelegationNotPermittedError,
    ObjectKey,
    SecretError,
    SourceView,
    go_quote,
    lookup_service_port,
)
from cpx.dag import HeadersPolicy, ServicePort, UpstreamProtocol, UpstreamValidation

from cpx_httpproxy import model
from cpx_httpproxy.delegation import refusal_message
from cpx_httpproxy.status import SERVICE_ERROR, TLS_ERROR, ProxyStatus

PROTOCOLS = {"h2": UpstreamProtocol.H2, "h2c": UpstreamProtocol.H2C, "tls": UpstreamProtocol.TLS}


class ServiceProblem(ValueError):
    """A service that makes Contour drop the route set (the error is already recorded)."""


@attrs.frozen(kw_only=True)
class Context:
    """What resolving a proxy's services needs: where it lives and where errors go."""

    namespace: str
    source: SourceView
    config: Config
    status: ProxyStatus
    referrer: ObjectKey


def resolve_upstream(service: model.Service, health_port: int, ctx: Context) -> ServicePort:
    """Contour's EnsureService: the Service port (and the health port, when another one) must
    exist; ExternalName Services only as the core allows (``--enable-external-name-service``).
    Raises ServicePortError."""
    upstream = lookup_service_port(ctx.source, ctx.namespace, service.name, service.port)
    if health_port and health_port != service.port:
        lookup_service_port(ctx.source, ctx.namespace, service.name, health_port)
    return upstream


def with_protocol(service: model.Service, upstream: ServicePort, ctx: Context) -> ServicePort:
    """Contour's getProtocol: ``protocol`` overrides the Service's own (h2, h2c or tls only)."""
    if not service.protocol:
        return upstream
    protocol = PROTOCOLS.get(service.protocol)
    if protocol is None:
        ctx.status.add_error(
            SERVICE_ERROR, "UnsupportedProtocol", f"unsupported protocol: {service.protocol}"
        )
        raise ServiceProblem(service.protocol)
    if protocol is upstream.protocol:
        return upstream
    return attrs.evolve(upstream, protocol=protocol)


class ValidationProblem(ValueError):
    """An upstream validation policy Contour's LookupUpstreamValidation refuses (its words)."""


def ca_secret_ref(validation: model.UpstreamValidation, namespace: str) -> tuple[str, str]:
    """(namespace, name) of the CA Secret (``name`` or ``namespace/name``)."""
    ca_namespace, _, name = validation.ca_secret.rpartition("/")
    return ca_namespace or namespace, name


def lookup_validation(
    validation: model.UpstreamValidation, namespace: str, source: SourceView, referrer: ObjectKey
) -> UpstreamValidation:
    """Contour's LookupUpstreamValidation: DelegationNotPermittedError, or ValidationProblem."""
    ca_namespace, name = ca_secret_ref(validation, namespace)
    try:
        ca = source.lookup_ca_secret(ca_namespace, name, referrer)
    except DelegationNotPermittedError:
        raise
    except SecretError as err:
        raise ValidationProblem(f"invalid CA Secret {go_quote(f'{ca_namespace}/{name}')}: {err}") from None
    if not validation.subject_name:
        raise ValidationProblem("missing subject alternative name")
    names = validation.subject_names or (validation.subject_name,)
    if names[0] != validation.subject_name:
        raise ValidationProblem(
            f"first entry of SubjectNames ({names[0]}) does not match SubjectName ({validation.subject_name})"
        )
    return UpstreamValidation(ca=ca, subject_names=tuple(names))


def upstream_validation(
    service: model.Service, upstream: ServicePort, ctx: Context
) -> UpstreamValidation | None:
    """Contour's LookupUpstreamValidation, only for services spoken to over TLS (tls, h2)."""
    validation = service.validation
    if validation is None or upstream.protocol not in (UpstreamProtocol.TLS, UpstreamProtocol.H2):
        return None
    ref = go_quote("/".join(ca_secret_ref(validation, ctx.namespace)))
    try:
        return lookup_validation(validation, ctx.namespace, ctx.source, ctx.referrer)
    except DelegationNotPermittedError as err:
        subject = f"service.UpstreamValidation.CACertificate Secret {ref}"
        message = f"{subject} is not configured for certificate delegation"
        ctx.status.add_error(TLS_ERROR, "CACertificateNotDelegated", refusal_message(err, subject, message))
        raise ServiceProblem(ref) from None
    except ValidationProblem as err:
        problem = f"Service [{service.name}:{service.port}] TLS upstream validation policy error: "
        ctx.status.add_error(SERVICE_ERROR, "TLSUpstreamValidation", f"{problem}{err}")
        raise ServiceProblem(ref) from None


def sni(route_request: HeadersPolicy, cluster_request: HeadersPolicy, upstream: ServicePort) -> str:
    """Contour's determineSNI: the service's Host rewrite, else the route's, else the
    ExternalName target ("" for an ordinary Service)."""
    return cluster_request.host_rewrite or route_request.host_rewrite or upstream.external_name or ""
