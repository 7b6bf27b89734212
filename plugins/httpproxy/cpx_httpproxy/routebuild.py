"""One HTTPProxy route (or TCP proxy, or virtual host's policies) to DAG values, with Contour's
validation and status messages (``internal/dag/httpproxy_processor.go`` ``computeRoutes``,
``processHTTPProxyTCPProxy``, ``toCORSPolicy``, ``toIPFilterRules``; ``internal/dag/policy.go``).

The processor (:mod:`cpx_httpproxy.processor`) owns what needs the whole include tree: merging
match conditions, the HTTPS redirect of TLS vhosts, wildcard host matches, prefix rewrites
against the merged prefix, includes and orphans.  It calls :func:`build_route` for every route
of every proxy it reaches; a ``None`` answer means Contour's "route set dropped": the error is
already in that proxy's status and none of the proxy's own routes may be programmed.

Checks run in Contour's order, so the first error recorded is the one Contour records.
Contour-compatible messages are used throughout; where cpx's own words are used (Contour's
wording unknown or cpx refuses something Contour passes to Envoy) a comment says so.
"""

from __future__ import annotations

import operator
from typing import NoReturn

import attrs
from cpx import Config, ObjectKey, ServicePortError, SourceView
from cpx.dag import (
    Attachments,
    Cluster,
    CookieRewrite,
    CORSPolicy,
    DirectResponse,
    Duration,
    HashPolicy,
    HeadersPolicy,
    HealthCheck,
    InternalRedirectPolicy,
    IPFilter,
    LocalRateLimit,
    MirrorPolicy,
    Redirect,
    RetryPolicy,
    TCPProxy,
    TimeoutPolicy,
)

from cpx_httpproxy import jwt, model, policies, ratelimit
from cpx_httpproxy.headers import (
    CONTOUR_NAMESPACE,
    CONTOUR_SERVICE_NAME,
    CONTOUR_SERVICE_PORT,
    NO_HEADERS,
    HeaderPolicyError,
    headers_policy,
)
from cpx_httpproxy.policies import PolicyError, expand_prefix_routes, resolve_prefix_rewrite
from cpx_httpproxy.services import (
    Context,
    ServiceProblem,
    resolve_upstream,
    sni,
    upstream_validation,
    with_protocol,
)
from cpx_httpproxy.status import (
    CORS_ERROR,
    IP_FILTER_ERROR,
    JWT_VERIFICATION_ERROR,
    PREFIX_REPLACE_ERROR,
    ROUTE_ERROR,
    SERVICE_ERROR,
    TCP_PROXY_ERROR,
    VIRTUAL_HOST_ERROR,
    ProxyStatus,
)

__all__ = [
    "RouteParts",
    "VhostPolicies",
    "build_route",
    "build_tcp_proxy",
    "build_vhost_policies",
    "expand_prefix_routes",
    "resolve_prefix_rewrite",
]

PERMIT_INSECURE_OPTION = "disable_permit_insecure"
_NO_TIMEOUTS = TimeoutPolicy()
_NO_HEADERS = HeadersPolicy()
_NO_ATTACHMENTS = Attachments()


@attrs.frozen(kw_only=True)
class RouteParts:
    """Everything of a cpx Route except path/headers/query/https_redirect/origin."""

    clusters: tuple[Cluster, ...] = ()
    redirect: Redirect | None = None
    direct_response: DirectResponse | None = None
    websocket: bool = False
    timeout_policy: TimeoutPolicy = _NO_TIMEOUTS
    retry_policy: RetryPolicy | None = None
    # Left None here: the processor sets it from replace_prefix and the merged prefix.
    prefix_rewrite: str | None = None
    request_headers: HeadersPolicy = _NO_HEADERS
    response_headers: HeadersPolicy = _NO_HEADERS
    mirrors: tuple[MirrorPolicy, ...] = ()
    hash_policies: tuple[HashPolicy, ...] = ()
    internal_redirect: InternalRedirectPolicy | None = None
    cookie_rewrites: tuple[CookieRewrite, ...] = ()
    local_rate_limit: LocalRateLimit | None = None
    global_rate_limit: ratelimit.RouteLimits | None = None
    ip_filter: IPFilter | None = None
    permit_insecure: bool = False
    # (prefix, replacement) pairs, resolved by the processor against the merged prefix with
    # resolve_prefix_rewrite (then expand_prefix_routes over the proxy's routes).
    replace_prefix: tuple[tuple[str, str], ...] = ()
    # Data for the plugin's HTTP filters (the route's own JWT verification policy).
    attachments: Attachments = _NO_ATTACHMENTS


@attrs.frozen(kw_only=True)
class VhostPolicies:
    """A root's virtual-host-wide policies (applied to both its HTTP and HTTPS virtual hosts)."""

    cors: CORSPolicy | None = None
    local_rate_limit: LocalRateLimit | None = None
    global_rate_limit: ratelimit.HostLimits | None = None
    ip_filter: IPFilter | None = None


_NO_VHOST_POLICIES = VhostPolicies()


# -- routes ----------------------------------------------------------------------------------------


class _RouteDropped(Exception):
    """Contour's "route set dropped": the error is already in the proxy's status."""


class _drop_on:
    """Turns a ``catch`` error raised inside into the status error (``message`` formatted with the
    error's text) and drops the route set: most route parts fail this way, each with its own words.

    A class, not a contextlib generator: every route enters several, and a generator's set-up
    and tear-down cost more than the rest of a plain route's checks."""

    __slots__ = ("catch", "error_type", "message", "reason", "status")

    def __init__(
        self,
        status: ProxyStatus,
        error_type: str,
        reason: str,
        message: str = "{}",
        catch: type[ValueError] = PolicyError,
    ) -> None:
        self.status = status
        self.error_type, self.reason, self.message = error_type, reason, message
        self.catch = catch

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: object) -> None:
        if err is not None and isinstance(err, self.catch):
            self.status.add_error(self.error_type, self.reason, self.message.format(err))
            raise _RouteDropped from None


@attrs.frozen(kw_only=True)
class _RouteContext:
    """What every part of one route's build reads: the route, its proxy and where errors go."""

    route: model.Route
    proxy: Context
    path_is_prefix: bool

    @property
    def status(self) -> ProxyStatus:
        return self.proxy.status

    def drop(self, error_type: str, reason: str, message: str) -> NoReturn:
        self.status.add_error(error_type, reason, message)
        raise _RouteDropped


@attrs.frozen(kw_only=True)
class _ClusterDefaults:
    """The route-level settings every cluster of the route inherits."""

    route_request_headers: HeadersPolicy  # its Host rewrite may set the upstream SNI
    health_check: HealthCheck | None
    strategy: str  # "" = RoundRobin
    idle_connection_timeout: Duration | None


def build_route(
    route: model.Route,
    *,
    namespace: str,
    source: SourceView,
    config: Config,
    status: ProxyStatus,
    referrer: ObjectKey,
    path_is_prefix: bool = True,
) -> RouteParts | None:
    """The DAG parts of one route of the proxy ``referrer`` (in ``namespace``), or None when the
    route set must be dropped (the error is recorded in ``status``).

    ``path_is_prefix`` says whether the route's merged path condition is a prefix (it is unless
    an exact or regex condition is in the chain); a path rewrite needs one (MustHavePrefix).
    Condition validation (PathMatchConditionsNotValid, header and query conditions) is the
    processor's; Contour checks RouteActionCountNotValid before those.
    """
    proxy = Context(namespace=namespace, source=source, config=config, status=status, referrer=referrer)
    try:
        return _route_parts(_RouteContext(route=route, proxy=proxy, path_is_prefix=path_is_prefix))
    except _RouteDropped:
        return None


# A route's fields besides its match and services: a route with none of them set (most routes)
# gets every policy's "unset" value, so its build skips the checks (see _plain_route_parts).
_POLICY_FIELDS = tuple(
    f.name
    for f in attrs.fields(model.Route)
    if f.name not in ("conditions", "services", "enable_websockets", "permit_insecure")
)
_policies_of = operator.attrgetter(*_POLICY_FIELDS)
_NO_POLICIES = _policies_of(model.Route())


def _route_parts(ctx: _RouteContext) -> RouteParts:
    """Every route field in Contour's order, so that the first error recorded is Contour's;
    raises _RouteDropped at the first one that drops the route set."""
    route, status = ctx.route, ctx.status
    _check_action_count(ctx)
    if _policies_of(route) == _NO_POLICIES:
        return _plain_route_parts(ctx)
    request_headers, response_headers, cookie_rewrites = _header_and_cookie_policies(
        route,
        owner="route",
        error_type=ROUTE_ERROR,
        response_reason="ResponseHeaderPolicyInvalid",  # sic: Contour's route-level reason
        dynamic={CONTOUR_NAMESPACE: ctx.proxy.namespace},
        allow_dynamic_host=True,
        status=status,
    )
    with _drop_on(status, ROUTE_ERROR, "TimeoutPolicyNotValid", "route.timeoutPolicy failed to parse: {}"):
        timeout_policy, idle_connection = policies.timeout_policies(route.timeout_policy)
    with _drop_on(status, ROUTE_ERROR, "RateLimitPolicyNotValid", "route.rateLimitPolicy is invalid: {}"):
        local_rate_limit = policies.local_rate_limit(route.rate_limit_policy)
        global_rate_limit = ratelimit.route_limits(route.rate_limit_policy)
    hash_policies, strategy = policies.request_hash_policies(route.load_balancer_policy, status)
    with _drop_on(status, ROUTE_ERROR, "RequestRedirectPolicy", "route.requestRedirectPolicy is invalid: {}"):
        redirect = policies.redirect(route.request_redirect_policy)
    replace_prefix = _replace_prefix(ctx)
    with _drop_on(status, ROUTE_ERROR, "HealthCheckPolicyInvalid"):
        health_check = policies.http_health_check(route.health_check_policy)
    defaults = _ClusterDefaults(
        route_request_headers=request_headers,
        health_check=health_check,
        strategy=strategy,
        idle_connection_timeout=idle_connection,
    )
    clusters, mirrors = _upstreams(ctx, defaults)
    with _drop_on(status, JWT_VERIFICATION_ERROR, "InvalidJWTVerificationPolicy", catch=jwt.JWTPolicyError):
        attachments = jwt.route_attachments(route)
    ip_filter = _route_ip_filter(ctx)
    return RouteParts(
        clusters=clusters,
        redirect=redirect,
        direct_response=policies.direct_response(route.direct_response_policy),
        websocket=route.enable_websockets,
        timeout_policy=timeout_policy,
        retry_policy=policies.retry_policy(route.retry_policy),
        request_headers=request_headers,
        response_headers=response_headers,
        mirrors=mirrors,
        hash_policies=hash_policies,
        internal_redirect=policies.internal_redirect(route.internal_redirect_policy),
        cookie_rewrites=cookie_rewrites,
        local_rate_limit=local_rate_limit,
        global_rate_limit=global_rate_limit,
        ip_filter=ip_filter,
        permit_insecure=route.permit_insecure and not ctx.proxy.config.option(PERMIT_INSECURE_OPTION, False),
        replace_prefix=replace_prefix,
        attachments=attachments,
    )


_PLAIN_DEFAULTS = _ClusterDefaults(
    route_request_headers=NO_HEADERS, health_check=None, strategy="", idle_connection_timeout=None
)


def _plain_route_parts(ctx: _RouteContext) -> RouteParts:
    """What :func:`_route_parts` gives a route without policies: only its services can fail."""
    route = ctx.route
    clusters, mirrors = _upstreams(ctx, _PLAIN_DEFAULTS)
    return RouteParts(
        clusters=clusters,
        websocket=route.enable_websockets,
        request_headers=NO_HEADERS,
        response_headers=NO_HEADERS,
        mirrors=mirrors,
        permit_insecure=route.permit_insecure and not ctx.proxy.config.option(PERMIT_INSECURE_OPTION, False),
    )


def _check_action_count(ctx: _RouteContext) -> None:
    route = ctx.route
    actions = (
        int(bool(route.services))
        + int(route.request_redirect_policy is not None)
        + int(route.direct_response_policy is not None)
    )
    if actions != 1:
        ctx.drop(
            ROUTE_ERROR,
            "RouteActionCountNotValid",
            "must set exactly one of route.services or route.requestRedirectPolicy "
            "or route.directResponsePolicy",
        )


def _header_and_cookie_policies(
    spec: model.Route | model.Service,
    *,
    owner: str,
    error_type: str,
    response_reason: str,
    dynamic: dict[str, str],
    allow_dynamic_host: bool,
    status: ProxyStatus,
) -> tuple[HeadersPolicy, HeadersPolicy, tuple[CookieRewrite, ...]]:
    """Request/response header policies and cookie rewrites of a route or a service; an invalid
    one drops the route set, with Contour's type and reason for that level."""
    if _no_header_or_cookie_policies(spec):
        return NO_HEADERS, NO_HEADERS, ()  # what most routes and services have: nothing to check
    request_message = "{} on request headers"
    with _drop_on(
        status, error_type, "RequestHeadersPolicyInvalid", request_message, catch=HeaderPolicyError
    ):
        request = headers_policy(
            spec.request_headers_policy,
            allow_host_rewrite=True,
            allow_dynamic_host=allow_dynamic_host,
            dynamic=dynamic,
        )
    with _drop_on(status, error_type, response_reason, "{} on response headers", catch=HeaderPolicyError):
        response = headers_policy(spec.response_headers_policy, allow_host_rewrite=False, dynamic=dynamic)
    # Contour reports cookie rules as a RouteError at both levels.
    cookie_message = "{} on " + owner + " cookie rewrite rules"
    with _drop_on(status, ROUTE_ERROR, "CookieRewritePoliciesInvalid", cookie_message):
        cookies = policies.cookie_rewrites(spec.cookie_rewrite_policies)
    return request, response, cookies


def _no_header_or_cookie_policies(spec: model.Route | model.Service) -> bool:
    return (
        spec.request_headers_policy is None
        and spec.response_headers_policy is None
        and not spec.cookie_rewrite_policies
    )


def _replace_prefix(ctx: _RouteContext) -> tuple[tuple[str, str], ...]:
    """The route's (prefix, replacement) pairs; they need a prefix condition and distinct prefixes."""
    pairs = policies.replace_prefix_pairs(ctx.route.path_rewrite_policy)
    if not pairs:
        return pairs
    if not ctx.path_is_prefix:
        ctx.drop(
            PREFIX_REPLACE_ERROR,
            "MustHavePrefix",
            "cannot specify prefix replacements without a prefix condition",
        )
    problem = policies.check_prefix_replacements(pairs)
    if problem is not None:
        ctx.drop(PREFIX_REPLACE_ERROR, *problem)
    return pairs


def _upstreams(
    ctx: _RouteContext, defaults: _ClusterDefaults
) -> tuple[tuple[Cluster, ...], tuple[MirrorPolicy, ...]]:
    """The route's weighted clusters and its mirror (one service at most may be nominated)."""
    clusters: list[Cluster] = []
    mirrors: list[MirrorPolicy] = []
    for service in ctx.route.services:
        cluster = _service_cluster(ctx, service, defaults)
        if cluster is None:
            continue
        if not service.mirror:
            clusters.append(cluster)
            continue
        if mirrors:
            ctx.drop(SERVICE_ERROR, "OnlyOneMirror", "only one service per route may be nominated as mirror")
        # weight is the mirrored percentage; unset (or 0) mirrors everything.
        mirrors.append(MirrorPolicy(cluster=cluster, percent=float(min(service.weight, 100) or 100)))
    return _fit_weights(clusters), tuple(mirrors)


def _service_cluster(
    ctx: _RouteContext, service: model.Service, defaults: _ClusterDefaults
) -> Cluster | None:
    """One service's cluster, or None when its Service is unresolved: only that service is
    skipped (a route left without clusters answers 503)."""
    if not 1 <= service.port <= 65535:
        ctx.drop(
            SERVICE_ERROR,
            "ServicePortInvalid",
            f'service "{service.name}": port must be in the range 1-65535',
        )
    health_port, health_check = _service_health(service, defaults.health_check)
    try:
        upstream = resolve_upstream(service, health_port, ctx.proxy)
    except ServicePortError as err:
        ctx.status.add_error(
            SERVICE_ERROR, "ServiceUnresolvedReference", f"Spec.Routes unresolved service reference: {err}"
        )
        return None
    try:
        upstream = with_protocol(service, upstream, ctx.proxy)
        validation = upstream_validation(service, upstream, ctx.proxy)
    except ServiceProblem:
        raise _RouteDropped from None
    request, response, cookies = _service_header_and_cookie_policies(ctx, service)
    slow_start = None
    if service.slow_start_policy is not None:
        with _drop_on(ctx.status, SERVICE_ERROR, "SlowStartInvalid"):
            slow_start = policies.slow_start(service.slow_start_policy, defaults.strategy)
    return Cluster(
        upstream=upstream,
        weight=service.weight,
        load_balancer_policy=defaults.strategy or policies.ROUND_ROBIN,
        health_check=health_check,
        validation=validation,
        sni=sni(defaults.route_request_headers, request, upstream),
        request_headers=request,
        response_headers=response,
        slow_start=slow_start,
        idle_connection_timeout=defaults.idle_connection_timeout,
        cookie_rewrites=cookies,
    )


def _service_header_and_cookie_policies(
    ctx: _RouteContext, service: model.Service
) -> tuple[HeadersPolicy, HeadersPolicy, tuple[CookieRewrite, ...]]:
    if _no_header_or_cookie_policies(service):
        return NO_HEADERS, NO_HEADERS, ()  # most services: no need for the dynamic values below
    return _header_and_cookie_policies(
        service,
        owner="service",
        error_type=SERVICE_ERROR,
        response_reason="ResponseHeadersPolicyInvalid",
        dynamic={
            CONTOUR_NAMESPACE: ctx.proxy.namespace,
            CONTOUR_SERVICE_NAME: service.name,
            CONTOUR_SERVICE_PORT: str(service.port),
        },
        allow_dynamic_host=False,
        status=ctx.status,
    )


def _route_ip_filter(ctx: _RouteContext) -> IPFilter | None:
    try:
        return policies.ip_filter(ctx.route.ip_allow_policy, ctx.route.ip_deny_policy, ctx.status)
    except PolicyError:
        raise _RouteDropped from None  # the IPFilterError is recorded


def _service_health(service: model.Service, check: HealthCheck | None) -> tuple[int, HealthCheck | None]:
    """The port health checks go to (the service's healthPort, when checks are on and it is set)
    and the check aimed at it."""
    if check is None or service.health_port <= 0 or service.health_port == service.port:
        return service.port, check
    return service.health_port, attrs.evolve(check, port=service.health_port)


# -- TCP proxying ------------------------------------------------------------------------------------


def build_tcp_proxy(
    tcp: model.TCPProxy,
    *,
    namespace: str,
    source: SourceView,
    config: Config,
    status: ProxyStatus,
    referrer: ObjectKey,
) -> TCPProxy | model.TCPProxyInclude | None:
    """One proxy's ``spec.tcpproxy`` (Contour's processHTTPProxyTCPProxy without the include walk).

    Returns the TCPProxy for a proxy with services; the include to follow for a proxy that
    delegates (the processor resolves it, checks IncludeNotFound / RootIncludesRoot / cycles
    and calls this again for the target); None when the proxy must be dropped (error recorded).
    A Cookie or RequestHash strategy is reset to RoundRobin with a TCPProxyError warning.
    """
    delegate = tcp.delegate
    if tcp.services and delegate is not None:
        status.add_error(
            TCP_PROXY_ERROR,
            "NoServicesAndInclude",
            "cannot specify services and include in the same httpproxy",
        )
        return None
    strategy = policies.tcp_load_balancer_strategy(tcp.load_balancer_policy, status)
    if not tcp.services:
        if delegate is None:
            status.add_error(
                TCP_PROXY_ERROR, "NothingDefined", "either services or inclusion must be specified"
            )
            return None
        return delegate
    health_check = policies.tcp_health_check(tcp.health_check_policy)
    ctx = Context(namespace=namespace, source=source, config=config, status=status, referrer=referrer)
    clusters = []
    for service in tcp.services:
        health_port, check = _service_health(service, health_check)
        try:
            upstream = resolve_upstream(service, health_port, ctx)
        except ServicePortError as err:
            status.add_error(
                TCP_PROXY_ERROR,
                "ServiceUnresolvedReference",
                f"Spec.TCPProxy unresolved service reference: {err}",
            )
            return None
        try:
            upstream = with_protocol(service, upstream, ctx)
            validation = upstream_validation(service, upstream, ctx)
        except ServiceProblem:
            return None
        clusters.append(
            Cluster(
                upstream=upstream,
                weight=service.weight,
                load_balancer_policy=strategy or policies.ROUND_ROBIN,
                health_check=check,
                validation=validation,
                sni=upstream.external_name or "",
            )
        )
    return TCPProxy(clusters=_fit_weights(clusters))


def _fit_weights(clusters: list[Cluster]) -> tuple[Cluster, ...]:
    """The clusters with weights whose sum fits Envoy's uint32 (scaled down only when it does not)."""
    if len(clusters) == 1 and 0 <= clusters[0].weight <= policies.UINT32_MAX:
        return (clusters[0],)  # most routes have one service: nothing to fit
    weights = policies.fit_weights([c.weight for c in clusters])
    return tuple(
        c if c.weight == w else attrs.evolve(c, weight=w) for c, w in zip(clusters, weights, strict=True)
    )


# -- virtual host ------------------------------------------------------------------------------------


def check_vhost_ip_filters(vhost: model.VirtualHost, status: ProxyStatus) -> bool:
    """Contour's early check (before TLS): a root cannot have both allow and deny lists."""
    if vhost.ip_allow_policy and vhost.ip_deny_policy:
        # Contour's message, typo included.
        status.add_error(
            IP_FILTER_ERROR,
            "IncompatibleIPAddressFilters",
            "Spec.VirtualHost.IPAllowFilterPolicy and Spec.VirtualHost.IPDepnyFilterPolicy "
            "cannot both be defined.",
        )
        return False
    return True


def build_vhost_policies(
    vhost: model.VirtualHost,
    *,
    status: ProxyStatus,
    default_global_rate_limit: model.GlobalRateLimitPolicy | None = None,
) -> VhostPolicies | None:
    """CORS, rate limits and IP filters of a root's virtual host, or None when the proxy must
    be dropped (error recorded); ``default_global_rate_limit`` is the rate limit service's
    default global policy (Contour's computeVirtualHostRateLimitPolicy).  Contour checks them
    after the routes, in this order; the allow-and-deny conflict (:func:`check_vhost_ip_filters`)
    it checks before TLS, so a processor that wants Contour's exact order calls that first; it is
    repeated here for safety."""
    if (
        vhost.cors_policy is None
        and vhost.rate_limit_policy is None
        and not (vhost.ip_allow_policy or vhost.ip_deny_policy)
        and default_global_rate_limit is None
    ):
        return _NO_VHOST_POLICIES  # what most roots have: nothing to check
    if not check_vhost_ip_filters(vhost, status):
        return None
    try:
        cors = policies.cors_policy(vhost.cors_policy)
    except PolicyError as err:
        status.add_error(CORS_ERROR, "PolicyDidNotParse", f"Spec.VirtualHost.CORSPolicy: {err}")
        return None
    try:
        local_rate_limit = policies.local_rate_limit(vhost.rate_limit_policy)
        own = ratelimit.host_limits(vhost.rate_limit_policy, None)
    except PolicyError as err:
        status.add_error(
            VIRTUAL_HOST_ERROR,
            "RateLimitPolicyNotValid",
            f"Spec.VirtualHost.RateLimitPolicy is invalid: {err}",
        )
        return None
    global_rate_limit = own
    if own is None:  # the proxy's own global policy wins over the default
        try:
            default = ratelimit.descriptors(default_global_rate_limit)
        except PolicyError as err:
            status.add_error(
                VIRTUAL_HOST_ERROR,
                "RateLimitPolicyNotValid",
                f"Default Global RateLimit Policy is invalid: {err}",
            )
            return None
        global_rate_limit = ratelimit.host_limits(vhost.rate_limit_policy, default)
    try:
        ip_filter = policies.ip_filter(vhost.ip_allow_policy, vhost.ip_deny_policy, status)
    except PolicyError as err:
        status.add_error(
            IP_FILTER_ERROR,
            "IPFilterPolicyNotValid",
            f"Spec.VirtualHost.IPAllowFilterPolicy or Spec.VirtualHost.IPDenyFilterPolicy is invalid: {err}",
        )
        return None
    return VhostPolicies(
        cors=cors, local_rate_limit=local_rate_limit, global_rate_limit=global_rate_limit, ip_filter=ip_filter
    )
