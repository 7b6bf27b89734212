"""HTTPProxy ``services[]`` to DAG clusters (the services loop of Contour's ``computeRoutes`` and
``processHTTPProxyTCPProxy``, with ``EnsureService``, ``getProtocol``,
``LookupUpstreamValidation`` and ``determineSNI``).
"""

from __future__ import annotations

import attrs
from cpx import Config, DelegationNotPermittedError, ObjectKey, SecretError, SourceView, lookup_service_port
from cpx.dag import HeadersPolicy, ServicePort, UpstreamProtocol, UpstreamValidation

from cpx_httpproxy import model
from cpx_httpproxy.delegation import refusal_message
from cpx_httpproxy.durations import quote
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


def upstream_validation(
    service: model.Service, upstream: ServicePort, ctx: Context
) -> UpstreamValidation | None:
    """Contour's LookupUpstreamValidation, only for services spoken to over TLS (tls, h2)."""
    validation = service.validation
    if validation is None or upstream.protocol not in (UpstreamProtocol.TLS, UpstreamProtocol.H2):
        return None
    namespace, _, name = validation.ca_secret.rpartition("/")
    namespace = namespace or ctx.namespace
    ref = quote(f"{namespace}/{name}")
    problem = f"Service [{service.name}:{service.port}] TLS upstream validation policy error: "
    try:
        ca = ctx.source.lookup_ca_secret(namespace, name, ctx.referrer)
    except DelegationNotPermittedError as err:
        subject = f"service.UpstreamValidation.CACertificate Secret {ref}"
        message = f"{subject} is not configured for certificate delegation"
        ctx.status.add_error(TLS_ERROR, "CACertificateNotDelegated", refusal_message(err, subject, message))
        raise ServiceProblem(ref) from None
    except SecretError as err:
        ctx.status.add_error(
            SERVICE_ERROR, "TLSUpstreamValidation", f"{problem}invalid CA Secret {ref}: {err}"
        )
        raise ServiceProblem(ref) from None
    if not validation.subject_name:
        ctx.status.add_error(
            SERVICE_ERROR, "TLSUpstreamValidation", f"{problem}missing subject alternative name"
        )
        raise ServiceProblem(ref)
    names = validation.subject_names or (validation.subject_name,)
    if names[0] != validation.subject_name:
        ctx.status.add_error(
            SERVICE_ERROR,
            "TLSUpstreamValidation",
            f"{problem}first entry of SubjectNames ({names[0]}) does not match SubjectName "
            f"({validation.subject_name})",
        )
        raise ServiceProblem(ref)
    return UpstreamValidation(ca=ca, subject_names=tuple(names))


def sni(route_request: HeadersPolicy, cluster_request: HeadersPolicy, upstream: ServicePort) -> str:
    """Contour's determineSNI: the service's Host rewrite, else the route's, else the
    ExternalName target ("" for an ordinary Service)."""
    return cluster_request.host_rewrite or route_request.host_rewrite or upstream.external_name or ""
