"""The core's own HTTP filters, contributed through ``cpx_http_filters`` like any plugin's.

In Contour's order: the misdirected-request (421) Lua check on secure SNI chains, Contour's
default filters (the response compressor, gRPC-Web, gRPC statistics), CORS, local rate limit,
the cookie-rewrite Lua filter, RBAC (IP filters), and the router.  The policy filters are inert
at the connection manager; virtual hosts, routes and weighted clusters switch them on
with ``typed_per_filter_config`` (the Envoy messages come from :mod:`cpx.xds.envoy.filters`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from google.protobuf.message import Message

from cpx.dag.dag import VirtualHost
from cpx.dag.nodes import Cluster, Route
from cpx.records import FilterSite, HttpFilterSpec, RouteSite
from cpx.xds.contributions import Contributions, UsesContributions
from cpx.xds.envoy import filters as envoy
from cpx.xds.httpfilters import order_http_filters

C = TypeVar("C", bound=UsesContributions)


def _misdirected(site: FilterSite) -> Message | None:
    if site.secure and site.authority_check is not None:
        return envoy.authority_check_lua(site.authority_check)
    # Only an SNI chain selected one host; "*" and the fallback chain serve many.
    if not site.secure or site.virtual_host is None or site.virtual_host == "*":
        return None
    return envoy.misdirected_request_lua(site.virtual_host)


def _stat_prefix(fqdn: str) -> str:
    """Contour's local rate limit stat prefix, for virtual host and route buckets alike."""
    return "vhost." + fqdn


def _vhost_cors(vhost: VirtualHost) -> Message | None:
    return None if vhost.cors is None else envoy.cors_policy_cached(vhost.cors)


def _route_cors(route: Route) -> Message | None:
    return None if route.cors is None else envoy.cors_policy_cached(route.cors)


def _vhost_rate_limit(vhost: VirtualHost) -> Message | None:
    limit = vhost.local_rate_limit
    return None if limit is None else envoy.local_rate_limit_cached(limit, _stat_prefix(vhost.name))


def _route_rate_limit(route: Route, site: RouteSite) -> Message | None:
    # A route's rate limit and IP filter replace the virtual host's, whatever the route does.
    limit = route.local_rate_limit
    return None if limit is None else envoy.local_rate_limit_cached(limit, _stat_prefix(site.virtual_host))


def _vhost_ip_filter(vhost: VirtualHost) -> Message | None:
    return None if vhost.ip_filter is None else envoy.ip_filter_cached(vhost.ip_filter)


def _route_ip_filter(route: Route) -> Message | None:
    return None if route.ip_filter is None else envoy.ip_filter_cached(route.ip_filter)


def _route_cookies(route: Route, site: RouteSite) -> Message | None:
    # Only where the route proxies; clusters with rules of their own override it on their entries.
    if not route.cookie_rewrites or not route.forwards(site.secure):
        return None
    return envoy.cookie_rewrite_cached(envoy.merge_cookie_rewrites(route.cookie_rewrites))


def _cluster_cookies(route: Route, cluster: Cluster) -> Message | None:
    if not cluster.cookie_rewrites:
        return None
    # The cluster's rules merged over the route's (Contour's cookieRewriteConfig).
    rules = envoy.merge_cookie_rewrites(route.cookie_rewrites, cluster.cookie_rewrites)
    return envoy.cookie_rewrite_cached(rules)


def http_filters(compression: str = envoy.DEFAULT_COMPRESSION) -> Iterator[HttpFilterSpec]:
    """The core's filters; ``compression`` is Contour's algorithm ("disabled": no compressor)."""
    yield HttpFilterSpec(
        name=envoy.LUA_FILTER,
        config=_misdirected,
        description="answers 421 to requests for another host than the SNI chain's",
    )
    # Contributed even when disabled (off every chain then), so constraints naming it still hold.
    compressor = envoy.compressor_filter(compression)
    yield HttpFilterSpec(
        name=envoy.COMPRESSOR_FILTER,
        config=lambda site: compressor,
        after=(envoy.LUA_FILTER,),
        description=f"response compression: {compression}",
    )
    yield HttpFilterSpec(
        name=envoy.GRPC_WEB_FILTER,
        config=lambda site: envoy.grpc_web_filter(),
        after=(envoy.COMPRESSOR_FILTER,),
        description="gRPC-Web requests to gRPC (HTTP/2) upstreams",
    )
    yield HttpFilterSpec(
        name=envoy.GRPC_STATS_FILTER,
        config=lambda site: envoy.grpc_stats_filter(),
        after=(envoy.GRPC_WEB_FILTER,),
        description="gRPC call statistics",
    )
    yield HttpFilterSpec(
        name=envoy.CORS_FILTER,
        config=lambda site: envoy.cors_filter(),
        after=(envoy.GRPC_STATS_FILTER,),
        per_virtual_host=_vhost_cors,
        per_route=_route_cors,
        route_fields=("cors",),
        description="CORS, per virtual host or route",
    )
    yield HttpFilterSpec(
        name=envoy.LOCAL_RATELIMIT_FILTER,
        config=lambda site: envoy.local_rate_limit_filter(),
        after=(envoy.CORS_FILTER,),
        per_virtual_host=_vhost_rate_limit,
        per_route_at=_route_rate_limit,
        route_fields=("local_rate_limit",),
        description="local (per-Envoy) rate limits, per virtual host or route",
    )
    # Named apart from the 421 filter: Envoy looks per-route configs up by filter name first.
    yield HttpFilterSpec(
        name=envoy.COOKIE_REWRITE_FILTER,
        config=lambda site: envoy.cookie_rewrite_filter(),
        after=(envoy.LOCAL_RATELIMIT_FILTER,),
        per_route_at=_route_cookies,
        per_weighted_cluster=_cluster_cookies,
        route_fields=("cookie_rewrites",),  # the route's and its clusters'
        description="Set-Cookie attribute rewrites, per route or service",
    )
    yield HttpFilterSpec(
        name=envoy.RBAC_FILTER,
        config=lambda site: envoy.rbac_filter_config(),
        after=(envoy.COOKIE_REWRITE_FILTER,),
        per_virtual_host=_vhost_ip_filter,
        per_route=_route_ip_filter,
        route_fields=("ip_filter",),
        description="IP allow/deny lists, per virtual host or route",
    )
    yield HttpFilterSpec(
        name=envoy.ROUTER_FILTER,
        config=lambda site: envoy.router_filter(),
        description="Envoy's router (always last)",
    )


def builtin_contributions() -> Contributions:
    """The core's filters alone, ordered: for caches used without a plugin host (unit tests)."""
    return Contributions(http_filters=order_http_filters([("core", spec) for spec in http_filters()]))


def with_builtin_filters(cache: C) -> C:
    """``cache`` bound to :func:`builtin_contributions` (what ``SnapshotHandler.create`` binds)."""
    cache.bind_contributions(builtin_contributions())
    return cache
