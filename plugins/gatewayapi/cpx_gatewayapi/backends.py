"""backendRefs (and mirror backendRefs) to DAG clusters, with the spec's ResolvedRefs reasons.

Only core Services are backends.  A reference to another namespace needs a ReferenceGrant there.
A bad reference is reported and its weight answered 500 (routebuild); the route stays Accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from cpx import ServicePortError, SourceView, lookup_service_port
from cpx.dag import Cluster, HeadersPolicy, UpstreamProtocol

from cpx_gatewayapi import backendtls, grants
from cpx_gatewayapi.kinds import GROUP
from cpx_gatewayapi.model import GRPCROUTE_KIND, HTTPROUTE_KIND

WEBSOCKET_APP_PROTOCOL = "kubernetes.io/ws"
NO_HEADERS = HeadersPolicy()
# gRPC is HTTP/2: a GRPCRoute backend speaks h2c, or h2 where the Service port says TLS.
_WEBSOCKET_APP_PROTOCOLS = (WEBSOCKET_APP_PROTOCOL, "kubernetes.io/wss")
_GRPC_PROTOCOLS = {UpstreamProtocol.HTTP1: UpstreamProtocol.H2C, UpstreamProtocol.TLS: UpstreamProtocol.H2}

# The route kinds whose backends a BackendTLSPolicy applies to (Envoy originates their TLS; a
# TLSRoute or TCPRoute proxies bytes, passthrough TLS included).
_BACKEND_TLS_KINDS = (HTTPROUTE_KIND, GRPCROUTE_KIND)

# ResolvedRefs reasons.
INVALID_KIND = "InvalidKind"
BACKEND_NOT_FOUND = "BackendNotFound"
REF_NOT_PERMITTED = "RefNotPermitted"
UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"  # an appProtocol the route kind cannot use (GEP-1911)


@attrs.frozen
class BackendProblem(Exception):
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class Backend:
    cluster: Cluster
    websocket: bool  # appProtocol kubernetes.io/ws


def resolve(
    source: SourceView,
    ref: Mapping[str, Any],
    route_kind: str,
    route_namespace: str,
    request_headers: HeadersPolicy = NO_HEADERS,
    response_headers: HeadersPolicy = NO_HEADERS,
) -> Backend:
    """The cluster ``ref`` names, or BackendProblem with the ResolvedRefs reason."""
    group, kind = str(ref.get("group") or ""), str(ref.get("kind") or "Service")
    name = str(ref.get("name") or "")
    if (group, kind) != ("", "Service"):
        shown = f"{group}/{kind}" if group else kind
        raise BackendProblem(INVALID_KIND, f"{shown} {name} is not a supported backend kind (Service only)")
    namespace = str(ref.get("namespace") or route_namespace)
    reference = grants.Reference(
        from_group=GROUP,
        from_kind=route_kind,
        from_namespace=route_namespace,
        to_group="",
        to_kind="Service",
        to_namespace=namespace,
        to_name=name,
    )
    if not grants.permitted(source, reference):
        raise BackendProblem(
            REF_NOT_PERMITTED,
            f"Backend ref to Service {namespace}/{name} not permitted by any ReferenceGrant",
        )
    port = ref.get("port")
    if not isinstance(port, int):
        raise BackendProblem(BACKEND_NOT_FOUND, f"Service {namespace}/{name}: port is required")
    try:
        upstream = lookup_service_port(source, namespace, name, port)
    except ServicePortError as err:
        raise BackendProblem(BACKEND_NOT_FOUND, f"Service {namespace}/{name}: {err}") from None
    app_protocol = _app_protocol(source, namespace, name, port)
    if route_kind == GRPCROUTE_KIND:
        if app_protocol in _WEBSOCKET_APP_PROTOCOLS:
            raise BackendProblem(
                UNSUPPORTED_PROTOCOL,
                f"Service {namespace}/{name} port {port}: appProtocol {app_protocol} cannot carry gRPC",
            )
        upstream = attrs.evolve(upstream, protocol=_GRPC_PROTOCOLS.get(upstream.protocol, upstream.protocol))
    cluster = Cluster(
        upstream=upstream,
        weight=weight(ref),
        request_headers=request_headers,
        response_headers=response_headers,
    )
    if route_kind in _BACKEND_TLS_KINDS:
        cluster = backendtls.apply(source, cluster)
    return Backend(cluster=cluster, websocket=app_protocol == WEBSOCKET_APP_PROTOCOL)


def weight(ref: Mapping[str, Any]) -> int:
    """A backendRef's weight (the CRD's default: 1)."""
    value = ref.get("weight")
    return value if isinstance(value, int) and value >= 0 else 1


def _app_protocol(source: SourceView, namespace: str, name: str, port: int) -> str | None:
    service = source.lookup_service(namespace, name)  # found just before
    for spec in (service.get("spec") or {}).get("ports") or []:
        if isinstance(spec, Mapping) and spec.get("port") == port:
            value = spec.get("appProtocol")
            return str(value) if value else None
    return None
