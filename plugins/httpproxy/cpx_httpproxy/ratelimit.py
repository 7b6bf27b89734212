"""HTTPProxy global rate limiting (Contour's ``rateLimitPolicy.global``, ``internal/dag/policy.go``
``globalRateLimitPolicy`` and ``internal/envoy/v3/ratelimit.go``).

A virtual host's or route's descriptors become Envoy ``RateLimit`` actions (on the VirtualHost /
the route's RouteAction); a route's ``disabled`` tells the filter to ignore the virtual host's.
The processor attaches frozen values (:data:`HOST_LIMITS`, :data:`ROUTE_LIMITS`) and the
``envoy.filters.http.ratelimit`` filter spec turns them into messages, memoised per value.  The
filter itself is on every connection manager once a rate limit service is configured (options
named after Contour's ``rateLimitService``), as in Contour.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import attrs
from cpx import Config, ConfigError, FilterSite, ObjectKey, SourceView
from cpx.dag import (
    DAG,
    EXTENSION_UPSTREAMS,
    AttachmentKey,
    ExtensionUpstream,
    HeaderMatch,
    Route,
    VirtualHost,
)

from cpx_httpproxy import model
from cpx_httpproxy.conditions import merge_headers
from cpx_httpproxy.configkeys import parse_document
from cpx_httpproxy.kinds import RATE_LIMIT_FILTER, ROUTE_LIMITS_KEY
from cpx_httpproxy.optionspecs import (
    DEFAULT_DOMAIN,
    DEFAULT_POLICY_OPTION,
    DOMAIN_OPTION,
    EXTENSION_SERVICE_OPTION,
    FAIL_OPEN_OPTION,
    RESOURCE_EXHAUSTED_OPTION,
    X_RATELIMIT_HEADERS_OPTION,
)
from cpx_httpproxy.policies import PolicyError
from cpx_httpproxy.proxies import NOT_IMPLEMENTED
from cpx_httpproxy.schema import validate_global_rate_limit_policy
from cpx_httpproxy.status import SPEC_ERROR, ProxyStatus

if TYPE_CHECKING:
    from collections.abc import Callable

    from google.protobuf.message import Message


FILTER_NAME = RATE_LIMIT_FILTER

# -- DAG values --------------------------------------------------------------------------------------


@attrs.frozen
class GenericKey:
    key: str  # "": Envoy's generic_key
    value: str


@attrs.frozen
class RemoteAddress:
    pass


@attrs.frozen
class RequestHeader:
    header_name: str
    key: str


@attrs.frozen
class HeaderValueMatch:
    headers: tuple[HeaderMatch, ...]
    expect_match: bool
    value: str


Entry = GenericKey | RemoteAddress | RequestHeader | HeaderValueMatch
Descriptors = tuple[tuple[Entry, ...], ...]


@attrs.frozen
class HostLimits:
    """A virtual host's global rate limit descriptors."""

    descriptors: Descriptors


@attrs.frozen
class RouteLimits:
    """A route's own descriptors, and whether it ignores its virtual host's (``disabled``)."""

    descriptors: Descriptors = ()
    ignore_virtual_host: bool = False


HOST_LIMITS = AttachmentKey("httpproxy/global-rate-limits", HostLimits)
ROUTE_LIMITS = AttachmentKey(ROUTE_LIMITS_KEY, RouteLimits)


# -- HTTPProxy fields to DAG values ------------------------------------------------------------------


def descriptors(policy: model.GlobalRateLimitPolicy | None) -> Descriptors | None:
    """Contour's globalRateLimitPolicy: None when there is none or it is disabled."""
    if policy is None or policy.disabled:
        return None
    return tuple(tuple(_entry(e) for e in d.entries) for d in policy.descriptors)


def _entry(entry: model.RateLimitDescriptorEntry) -> Entry:
    kinds = [
        kind
        for kind in (
            entry.generic_key,
            entry.request_header,
            entry.request_header_value_match,
            entry.remote_address,
        )
        if kind is not None
    ]
    if len(kinds) != 1:
        raise PolicyError("rate limit descriptor entry must have exactly one field set")
    if entry.generic_key is not None:
        return GenericKey(key=entry.generic_key.key, value=entry.generic_key.value)
    if entry.request_header is not None:
        return RequestHeader(
            header_name=entry.request_header.header_name, key=entry.request_header.descriptor_key
        )
    match = entry.request_header_value_match
    if match is not None:
        headers = merge_headers(model.MatchCondition(header=h) for h in match.headers)
        return HeaderValueMatch(headers=headers, expect_match=match.expect_match, value=match.value)
    return RemoteAddress()


def _has_descriptors(policy: model.RateLimitPolicy | None) -> bool:
    """Contour's rateLimitPolicy returns nothing for a global policy without descriptors."""
    return policy is not None and policy.global_ is not None and bool(policy.global_.descriptors)


def route_limits(policy: model.RateLimitPolicy | None) -> RouteLimits | None:
    """A route's global rate limits (raises PolicyError with Contour's message)."""
    if policy is None or policy.global_ is None:
        return None
    found = descriptors(policy.global_) if _has_descriptors(policy) else None
    ignore = policy.global_.disabled  # Contour's rateLimitPerRoute: VhRateLimitsIgnore
    if not found and not ignore:
        return None
    return RouteLimits(descriptors=found or (), ignore_virtual_host=ignore)


def host_limits(policy: model.RateLimitPolicy | None, default: Descriptors | None) -> HostLimits | None:
    """Contour's computeVirtualHostRateLimitPolicy: the proxy's own descriptors, else the default
    global policy unless the proxy opts out (``global.disabled``)."""
    own = descriptors(policy.global_) if policy is not None and _has_descriptors(policy) else None
    if own is not None:
        return HostLimits(own)
    opted_out = policy is not None and policy.global_ is not None and policy.global_.disabled
    if default is None or opted_out:
        return None
    return HostLimits(default)


# -- options -----------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ServiceSettings:
    """The rate limit service and its filter settings (Contour's RateLimitServiceConfig)."""

    namespace: str
    name: str
    domain: str = DEFAULT_DOMAIN
    fail_open: bool = False
    x_ratelimit_headers: bool = False
    resource_exhausted: bool = False


def service_settings(config: Config) -> ServiceSettings | None:
    """The configured rate limit service, or None (ConfigError for a malformed reference)."""
    ref = config.option(EXTENSION_SERVICE_OPTION)
    if not ref:
        return None
    namespace, sep, name = str(ref).partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ConfigError(f"--rate-limit-service-extension-service must be namespace/name, not {str(ref)!r}")
    return ServiceSettings(
        namespace=namespace,
        name=name,
        domain=config.option(DOMAIN_OPTION, DEFAULT_DOMAIN) or DEFAULT_DOMAIN,
        fail_open=bool(config.option(FAIL_OPEN_OPTION, False)),
        x_ratelimit_headers=bool(config.option(X_RATELIMIT_HEADERS_OPTION, False)),
        resource_exhausted=bool(config.option(RESOURCE_EXHAUSTED_OPTION, False)),
    )


def default_policy(config: Config) -> model.GlobalRateLimitPolicy | None:
    """The default global policy option, parsed and schema-checked (ConfigError naming the
    option when unusable).  A mapping is taken as it is (Contour's configuration file gives one)."""
    given = config.option(DEFAULT_POLICY_OPTION)
    if not given:
        return None
    flag = "--rate-limit-default-global-policy"
    data = parse_document(given, flag, validate_global_rate_limit_policy, "defaultGlobalRateLimitPolicy")
    return model.GlobalRateLimitPolicy.from_dict(data)


# -- Envoy messages ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _rate_limits(found: Descriptors) -> list[Message]:
    from cpx.xds import header_matcher  # noqa: PLC0415
    from envoy.config.route.v3 import route_components_pb2 as rc  # noqa: PLC0415 - protobuf on use

    out = []
    for entries in found:
        limit = rc.RateLimit()
        for entry in entries:
            action = limit.actions.add()
            if isinstance(entry, GenericKey):
                action.generic_key.descriptor_value = entry.value
                action.generic_key.descriptor_key = entry.key
            elif isinstance(entry, RequestHeader):
                action.request_headers.header_name = entry.header_name
                action.request_headers.descriptor_key = entry.key
            elif isinstance(entry, HeaderValueMatch):
                action.header_value_match.descriptor_value = entry.value
                action.header_value_match.expect_match.value = entry.expect_match
                action.header_value_match.headers.extend(header_matcher(h) for h in entry.headers)
            else:
                action.remote_address.SetInParent()
        out.append(limit)
    return out


@functools.lru_cache(maxsize=1024)
def _host_fields(limits: HostLimits) -> Message:
    from envoy.config.route.v3 import route_components_pb2 as rc  # noqa: PLC0415

    return rc.VirtualHost(rate_limits=_rate_limits(limits.descriptors))


@functools.lru_cache(maxsize=1024)
def _route_action(limits: RouteLimits) -> Message | None:
    from envoy.config.route.v3 import route_components_pb2 as rc  # noqa: PLC0415

    return rc.RouteAction(rate_limits=_rate_limits(limits.descriptors)) if limits.descriptors else None


@functools.cache
def _ignore_host_limits() -> Message:
    from envoy.extensions.filters.http.ratelimit.v3 import rate_limit_pb2  # noqa: PLC0415

    return rate_limit_pb2.RateLimitPerRoute(vh_rate_limits=rate_limit_pb2.RateLimitPerRoute.IGNORE)


def virtual_host_fields(vhost: VirtualHost) -> Message | None:
    limits = vhost.attachments.get(HOST_LIMITS)
    return None if limits is None else _host_fields(limits)


def route_action(route: Route) -> Message | None:
    limits = route.attachments.get(ROUTE_LIMITS)
    return None if limits is None else _route_action(limits)


def per_route(route: Route) -> Message | None:
    limits = route.attachments.get(ROUTE_LIMITS)
    return _ignore_host_limits() if limits is not None and limits.ignore_virtual_host else None


# -- the rate limit service ---------------------------------------------------------------------------

# The configured service's ExtensionService as its plugin published it, valid and speaking gRPC:
# set on the DAG by the processor every build (absent: the filter is left off, see service_upstream).
SERVICE_UPSTREAM = AttachmentKey("httpproxy/rate-limit-service", ExtensionUpstream)
EXTENSION_SERVICE_GROUP = "projectcontour.io"
EXTENSION_SERVICE_KIND = "ExtensionService"
GRPC_PROTOCOLS = ("h2", "h2c")


def service_key(settings: ServiceSettings) -> ObjectKey:
    return ObjectKey(EXTENSION_SERVICE_GROUP, EXTENSION_SERVICE_KIND, settings.namespace, settings.name)


def service_upstream(
    dag: DAG, source: SourceView, settings: ServiceSettings
) -> tuple[ExtensionUpstream | None, str]:
    """The rate limit service's upstream through the ExtensionService contract (a read of it, so
    that a change rebuilds), or None and why it cannot be used.  Contour refuses to start without
    it; cpx keeps serving without the filter (a filter naming a missing cluster would make Envoy
    refuse every listener) and says why in its log."""
    ref = f"{settings.namespace}/{settings.name}"
    if not dag.registries.published_by_any(EXTENSION_UPSTREAMS):
        return None, f"ExtensionService {ref}: the extsvc plugin is not enabled"
    upstream = dag.registries.lookup(EXTENSION_UPSTREAMS, service_key(settings), source)
    if upstream is None:
        return None, f"ExtensionService {ref} not found"
    if not upstream.valid:
        return None, f"ExtensionService {ref} is invalid (see its status)"
    if upstream.protocol not in GRPC_PROTOCOLS:
        return None, f"ExtensionService {ref} speaks {upstream.protocol}, not gRPC (h2 or h2c)"
    return upstream, ""


@functools.lru_cache(maxsize=64)
def filter_config(settings: ServiceSettings, upstream: ExtensionUpstream) -> Message:
    """Contour's GlobalRateLimitFilter: the call timeout is the ExtensionService's response
    timeout (unset: Envoy's 20 ms), the gRPC authority its SNI or the cluster name."""
    from cpx.xds import timeout  # noqa: PLC0415
    from envoy.config.core.v3 import config_source_pb2  # noqa: PLC0415
    from envoy.extensions.filters.http.ratelimit.v3 import rate_limit_pb2  # noqa: PLC0415

    headers = rate_limit_pb2.RateLimit.DRAFT_VERSION_03 if settings.x_ratelimit_headers else 0
    config = rate_limit_pb2.RateLimit(
        domain=settings.domain,
        failure_mode_deny=not settings.fail_open,
        enable_x_ratelimit_headers=headers,
        rate_limited_as_resource_exhausted=settings.resource_exhausted,
    )
    if upstream.response_timeout is not None:
        config.timeout.CopyFrom(timeout(upstream.response_timeout))
    service = config.rate_limit_service
    service.transport_api_version = config_source_pb2.ApiVersion.V3
    service.grpc_service.envoy_grpc.cluster_name = upstream.cluster_name
    service.grpc_service.envoy_grpc.authority = upstream.sni or upstream.cluster_name.replace("/", ".")
    return config


def site_config(settings: ServiceSettings) -> Callable[[FilterSite], Message | None]:
    """The filter's ``config``: on every connection manager while the configured service is
    usable (:mod:`cpx_httpproxy.filterspecs` has the rest of the filter's record)."""

    def at(site: FilterSite) -> Message | None:
        upstream = site.dag_attachments.get(SERVICE_UPSTREAM)
        return None if upstream is None else filter_config(settings, upstream)

    return at


# -- without the extsvc plugin --------------------------------------------------------------------------


def needs_extension_service(policy: model.RateLimitPolicy | None) -> bool:
    return policy is not None and policy.global_ is not None


def refuse_without_plugin(status: ProxyStatus, field: str) -> None:
    """The global policy names no service itself, but only an ExtensionService can provide one."""
    status.add_error(
        SPEC_ERROR,
        NOT_IMPLEMENTED,
        f"{field} needs the rate limit service's ExtensionService, and the extsvc plugin is not enabled",
    )
