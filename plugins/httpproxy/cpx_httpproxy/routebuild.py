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

import attrs
from cpx import Config, ObjectKey, ServicePortError, SourceView
from cpx.dag import (
    Cluster,
    CookieRewrite,
    CORSPolicy,
    DirectResponse,
    HashPolicy,
    HeadersPolicy,
    InternalRedirectPolicy,
    IPFilter,
    LocalRateLimit,
    MirrorPolicy,
    Redirect,
    RetryPolicy,
    TCPProxy,
    TimeoutPolicy,
)

from cpx_httpproxy import model, policies
from cpx_httpproxy.headers import (
    CONTOUR_NAMESPACE,
    CONTOUR_SERVICE_NAME,
    CONTOUR_SERVICE_PORT,
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
    "unsupported_route_fields",
    "unsupported_vhost_fields",
]

PERMIT_INSECURE_OPTION = "disable_permit_insecure"
_NO_TIMEOUTS = TimeoutPolicy()
_NO_HEADERS = HeadersPolicy()


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
    ip_filter: IPFilter | None = None
    permit_insecure: bool = False
    # (prefix, replacement) pairs, resolved by the processor against the merged prefix with
    # resolve_prefix_rewrite (then expand_prefix_routes over the proxy's routes).
    replace_prefix: tuple[tuple[str, str], ...] = ()


@attrs.frozen(kw_only=True)
class VhostPolicies:
    """A root's virtual-host-wide policies (applied to both its HTTP and HTTPS virtual hosts)."""

    cors: CORSPolicy | None = None
    local_rate_limit: LocalRateLimit | None = None
    ip_filter: IPFilter | None = None


# -- out-of-scope fields ----------------------------------------------------------------------------


def unsupported_route_fields(route: model.Route) -> tuple[str, ...]:
    """Route fields cpx does not implement yet (the processor rejects the proxy with a clear error)."""
    found = []
    if route.rate_limit_policy is not None and route.rate_limit_policy.global_ is not None:
        found.append("rateLimitPolicy.global")
    if route.jwt_verification_policy is not None:
        found.append("jwtVerificationPolicy")
    if route.auth_policy is not None:
        found.append("authPolicy")
    return tuple(found)


def unsupported_vhost_fields(vhost: model.VirtualHost) -> tuple[str, ...]:
    """Virtual host fields cpx does not implement yet."""
    found = []
    if vhost.authorization is not None:
        found.append("authorization")
    if vhost.jwt_providers:
        found.append("jwtProviders")
    if vhost.rate_limit_policy is not None and vhost.rate_limit_policy.global_ is not None:
        found.append("rateLimitPolicy.global")
    return tuple(found)


# -- routes ----------------------------------------------------------------------------------------


def _action_count(route: model.Route) -> int:
    return (
        int(bool(route.services))
        + int(route.request_redirect_policy is not None)
        + int(route.direct_response_policy is not None)
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
) -> tuple[HeadersPolicy, HeadersPolicy, tuple[CookieRewrite, ...]] | None:
    """Request/response header policies and cookie rewrites of a route or a service; None (error
    recorded, with Contour's type and reason for that level) when one is invalid."""
    try:
        request = headers_policy(
            spec.request_headers_policy,
            allow_host_rewrite=True,
            allow_dynamic_host=allow_dynamic_host,
            dynamic=dynamic,
        )
    except HeaderPolicyError as err:
        status.add_error(error_type, "RequestHeadersPolicyInvalid", f"{err} on request headers")
        return None
    try:
        response = headers_policy(spec.response_headers_policy, allow_host_rewrite=False, dynamic=dynamic)
    except HeaderPolicyError as err:
        status.add_error(error_type, response_reason, f"{err} on response headers")
        return None
    try:
        cookies = policies.cookie_rewrites(spec.cookie_rewrite_policies)
    except PolicyError as err:
        # Contour reports cookie rules as a RouteError at both levels.
        status.add_error(
            ROUTE_ERROR, "CookieRewritePoliciesInvalid", f"{err} on {owner} cookie rewrite rules"
        )
        return None
    return request, response, cookies


def build_route(  # noqa: C901, PLR0911, PLR0912, PLR0915  (why: every HTTPProxy route field, in Contour's order)
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
    if _action_count(route) != 1:
        status.add_error(
            ROUTE_ERROR,
            "RouteActionCountNotValid",
            "must set exactly one of route.services or route.requestRedirectPolicy "
            "or route.directResponsePolicy",
        )
        return None

    route_policies = _header_and_cookie_policies(
        route,
        owner="route",
        error_type=ROUTE_ERROR,
        response_reason="ResponseHeaderPolicyInvalid",  # sic: Contour's route-level reason
        dynamic={CONTOUR_NAMESPACE: namespace},
        allow_dynamic_host=True,
        status=status,
    )
    if route_policies is None:
        return None
    request_headers, response_headers, cookie_rewrites = route_policies
    try:
        timeout_policy, idle_connection = policies.timeout_policies(route.timeout_policy)
    except PolicyError as err:
        status.add_error(ROUTE_ERROR, "TimeoutPolicyNotValid", f"route.timeoutPolicy failed to parse: {err}")
        return None
    try:
        local_rate_limit = policies.local_rate_limit(route.rate_limit_policy)
    except PolicyError as err:
        status.add_error(ROUTE_ERROR, "RateLimitPolicyNotValid", f"route.rateLimitPolicy is invalid: {err}")
        return None
    hash_policies, strategy = policies.request_hash_policies(route.load_balancer_policy, status)
    try:
        redirect = policies.redirect(route.request_redirect_policy)
    except PolicyError as err:
        status.add_error(
            ROUTE_ERROR, "RequestRedirectPolicy", f"route.requestRedirectPolicy is invalid: {err}"
        )
        return None

    replace_prefix = policies.replace_prefix_pairs(route.path_rewrite_policy)
    if replace_prefix:
        if not path_is_prefix:
            status.add_error(
                PREFIX_REPLACE_ERROR,
                "MustHavePrefix",
                "cannot specify prefix replacements without a prefix condition",
            )
            return None
        problem = policies.check_prefix_replacements(replace_prefix)
        if problem is not None:
            status.add_error(PREFIX_REPLACE_ERROR, *problem)
            return None

    try:
        health_check = policies.http_health_check(route.health_check_policy)
    except PolicyError as err:
        status.add_error(ROUTE_ERROR, "HealthCheckPolicyInvalid", str(err))
        return None

    ctx = Context(namespace=namespace, source=source, config=config, status=status, referrer=referrer)
    clusters: list[Cluster] = []
    mirrors: list[MirrorPolicy] = []
    for service in route.services:
        if not 1 <= service.port <= 65535:
            status.add_error(
                SERVICE_ERROR,
                "ServicePortInvalid",
                f'service "{service.name}": port must be in the range 1-65535',
            )
            return None
        health_port = (
            service.health_port if health_check is not None and service.health_port > 0 else service.port
        )
        try:
            upstream = resolve_upstream(service, health_port, ctx)
        except ServicePortError as err:
            # Only this service is skipped: a route left without clusters answers 503.
            status.add_error(
                SERVICE_ERROR,
                "ServiceUnresolvedReference",
                f"Spec.Routes unresolved service reference: {err}",
            )
            continue
        try:
            upstream = with_protocol(service, upstream, ctx)
            validation = upstream_validation(service, upstream, ctx)
        except ServiceProblem:
            return None
        service_policies = _header_and_cookie_policies(
            service,
            owner="service",
            error_type=SERVICE_ERROR,
            response_reason="ResponseHeadersPolicyInvalid",
            dynamic={
                CONTOUR_NAMESPACE: namespace,
                CONTOUR_SERVICE_NAME: service.name,
                CONTOUR_SERVICE_PORT: str(service.port),
            },
            allow_dynamic_host=False,
            status=status,
        )
        if service_policies is None:
            return None
        cluster_request, cluster_response, cluster_cookies = service_policies
        try:
            slow_start = policies.slow_start(service.slow_start_policy, strategy)
        except PolicyError as err:
            status.add_error(SERVICE_ERROR, "SlowStartInvalid", str(err))
            return None
        check = health_check
        if check is not None and health_port != service.port:
            check = attrs.evolve(check, port=health_port)
        cluster = Cluster(
            upstream=upstream,
            weight=service.weight,
            load_balancer_policy=strategy or policies.ROUND_ROBIN,
            health_check=check,
            validation=validation,
            sni=sni(request_headers, cluster_request, upstream),
            request_headers=cluster_request,
            response_headers=cluster_response,
            slow_start=slow_start,
            idle_connection_timeout=idle_connection,
            cookie_rewrites=cluster_cookies,
        )
        if service.mirror:
            if mirrors:
                status.add_error(
                    SERVICE_ERROR, "OnlyOneMirror", "only one service per route may be nominated as mirror"
                )
                return None
            # weight is the mirrored percentage; unset (or 0) mirrors everything.
            mirrors.append(MirrorPolicy(cluster=cluster, percent=float(min(service.weight, 100) or 100)))
        else:
            clusters.append(cluster)

    try:
        ip_filter = policies.ip_filter(route.ip_allow_policy, route.ip_deny_policy, status)
    except PolicyError:
        return None  # the IPFilterError is recorded

    return RouteParts(
        clusters=_fit_weights(clusters),
        redirect=redirect,
        direct_response=policies.direct_response(route.direct_response_policy),
        websocket=route.enable_websockets,
        timeout_policy=timeout_policy,
        retry_policy=policies.retry_policy(route.retry_policy),
        request_headers=request_headers,
        response_headers=response_headers,
        mirrors=tuple(mirrors),
        hash_policies=hash_policies,
        internal_redirect=policies.internal_redirect(route.internal_redirect_policy),
        cookie_rewrites=cookie_rewrites,
        local_rate_limit=local_rate_limit,
        ip_filter=ip_filter,
        permit_insecure=route.permit_insecure and not config.option(PERMIT_INSECURE_OPTION, False),
        replace_prefix=replace_prefix,
    )


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
        health_port = (
            service.health_port if health_check is not None and service.health_port > 0 else service.port
        )
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
        check = health_check
        if check is not None and health_port != service.port:
            check = attrs.evolve(check, port=health_port)
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


def build_vhost_policies(vhost: model.VirtualHost, *, status: ProxyStatus) -> VhostPolicies | None:
    """CORS, local rate limit and IP filters of a root's virtual host, or None when the proxy must
    be dropped (error recorded).  Contour checks them after the routes, in this order; the
    allow-and-deny conflict (:func:`check_vhost_ip_filters`) it checks before TLS, so a processor
    that wants Contour's exact order calls that first; it is repeated here for safety."""
    if not check_vhost_ip_filters(vhost, status):
        return None
    try:
        cors = policies.cors_policy(vhost.cors_policy)
    except PolicyError as err:
        status.add_error(CORS_ERROR, "PolicyDidNotParse", f"Spec.VirtualHost.CORSPolicy: {err}")
        return None
    try:
        local_rate_limit = policies.local_rate_limit(vhost.rate_limit_policy)
    except PolicyError as err:
        status.add_error(
            VIRTUAL_HOST_ERROR,
            "RateLimitPolicyNotValid",
            f"Spec.VirtualHost.RateLimitPolicy is invalid: {err}",
        )
        return None
    try:
        ip_filter = policies.ip_filter(vhost.ip_allow_policy, vhost.ip_deny_policy, status)
    except PolicyError as err:
        status.add_error(
            IP_FILTER_ERROR,
            "IPFilterPolicyNotValid",
            f"Spec.VirtualHost.IPAllowFilterPolicy or Spec.VirtualHost.IPDenyFilterPolicy is invalid: {err}",
        )
        return None
    return VhostPolicies(cors=cors, local_rate_limit=local_rate_limit, ip_filter=ip_filter)
