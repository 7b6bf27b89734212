"""The ``envoy.filters.http.ext_authz`` filter this plugin contributes (Contour's
FilterExternalAuthz and routeAuthzDisabled / routeAuthzContext), from the attachments
:mod:`cpx_httpproxy.authorization` puts on secure virtual hosts and routes.

The filter sits after RBAC (Contour's order) and only on chains whose virtual host authorizes;
elsewhere it is left off, so configurations without authorization do not change.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from cpx import FilterSite, RouteSite
from cpx.dag import Route

from cpx_httpproxy.authorization import (
    ROUTE_AUTHORIZATION,
    VHOST_AUTHORIZATION,
    ExternalAuthorization,
    RouteAuthorization,
)

if TYPE_CHECKING:
    from google.protobuf.message import Message

_DISABLED = RouteAuthorization(disabled=True)


def filter_config(site: FilterSite) -> Message | None:
    auth = site.attachments.get(VHOST_AUTHORIZATION)
    return None if auth is None else _ext_authz(auth)


@functools.lru_cache(maxsize=1024)
def _ext_authz(auth: ExternalAuthorization) -> Message:
    from cpx.xds import timeout  # noqa: PLC0415 - protobuf on first use
    from envoy.config.core.v3 import config_source_pb2, grpc_service_pb2, http_uri_pb2  # noqa: PLC0415
    from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2  # noqa: PLC0415
    from envoy.type.v3 import http_status_pb2  # noqa: PLC0415
    from google.protobuf.duration_pb2 import Duration  # noqa: PLC0415

    config = ext_authz_pb2.ExtAuthz(
        # An authorization server that cannot change routing would be pointless.
        clear_route_cache=True,
        failure_mode_allow=auth.fail_open,
        status_on_error=http_status_pb2.HttpStatus(code=http_status_pb2.Forbidden),
        transport_api_version=config_source_pb2.V3,
        include_peer_certificate=True,
    )
    if auth.service_type == "http":
        uri = http_uri_pb2.HttpUri(uri="http://dummy/", cluster=auth.cluster)
        # Envoy requires a timeout here: Contour's httpURITimeout gives 0 when none is set.
        uri.timeout.CopyFrom(timeout(auth.timeout) if auth.timeout is not None else Duration())
        config.http_service.server_uri.CopyFrom(uri)
        if auth.http_path_prefix:
            config.http_service.path_prefix = auth.http_path_prefix
        for kind, value, ignore_case in auth.allowed_authorization_headers:
            config.allowed_headers.patterns.add(ignore_case=ignore_case, **{kind: value})
        upstream = config.http_service.authorization_response.allowed_upstream_headers
        for kind, value, ignore_case in auth.allowed_upstream_headers:
            upstream.patterns.add(ignore_case=ignore_case, **{kind: value})
    else:
        service = grpc_service_pb2.GrpcService()
        service.envoy_grpc.cluster_name = auth.cluster
        # Contour's grpcService: the SNI, else the cluster name with dots for slashes.
        service.envoy_grpc.authority = auth.sni or auth.cluster.replace("/", ".")
        if auth.timeout is not None:
            service.timeout.CopyFrom(timeout(auth.timeout))
        config.grpc_service.CopyFrom(service)
    if auth.with_request_body is not None:
        max_bytes, partial, as_bytes = auth.with_request_body
        config.with_request_body.max_request_bytes = max_bytes
        config.with_request_body.allow_partial_message = partial
        config.with_request_body.pack_as_bytes = as_bytes
    return config


def per_route(route: Route, site: RouteSite) -> Message | None:
    decided = route.attachments.get(ROUTE_AUTHORIZATION)
    if decided is None:
        return None
    if route.https_redirect and not site.secure:
        decided = _DISABLED  # a redirect to HTTPS is never authorized (Contour)
    return _per_route(decided)


@functools.lru_cache(maxsize=1024)
def _per_route(decided: RouteAuthorization) -> Message | None:
    from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2  # noqa: PLC0415

    if decided.disabled:
        return ext_authz_pb2.ExtAuthzPerRoute(disabled=True)
    if decided.context:
        settings = ext_authz_pb2.CheckSettings(context_extensions=dict(decided.context))
        return ext_authz_pb2.ExtAuthzPerRoute(check_settings=settings)
    return None
