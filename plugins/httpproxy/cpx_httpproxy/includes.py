"""Walking a root's includes: its routes under the merged conditions of every include above them
(Contour's computeRoutes), and the chain of ``tcpproxy.include`` (processHTTPProxyTCPProxy).

Errors go to the status of the proxy in the chain where they occur.  A bad include is skipped (an
include with conditions that cannot be followed leaves a 502 route in its place); a bad route
drops the route set of the proxy it is in, that is its routes and those of everything it includes.
What one route does is :mod:`cpx_httpproxy.routebuild`'s business.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from cpx import Config, ObjectKey, SourceView, blame
from cpx.dag import Attachments, DirectResponse, PathKind, PathMatch, Route, TCPProxy

from cpx_httpproxy import conditions as cond
from cpx_httpproxy import model, ratelimit, routebuild
from cpx_httpproxy import status as st
from cpx_httpproxy.authorization import with_route_policy
from cpx_httpproxy.jwt import NO_JWT
from cpx_httpproxy.proxies import Proxy, ProxyRegistry
from cpx_httpproxy.status import ProxyStatus

NO_ATTACHMENTS = Attachments()

Conditions = tuple[model.MatchCondition, ...]
# (type, reason, message) of a status error
_Problem = tuple[str, str, str]


@attrs.frozen
class IncludeWalker:
    """Follows includes from a root through the proxies of one build; marks each proxy it reaches
    as no orphan."""

    proxies: ProxyRegistry
    source: SourceView
    config: Config
    # Whether an enabled plugin publishes ExtensionServices (global rate limits need one).
    extension_services: bool = True

    # -- routes ----------------------------------------------------------------------------------
    def routes(
        self,
        proxy: Proxy,
        conditions: Conditions = (),
        visited: tuple[Proxy, ...] = (),
        *,
        enforce_tls: bool,
    ) -> list[Route]:
        """The routes of ``proxy`` and its includes under ``conditions``; an empty list after an
        error means the route set of this proxy (and of everything it includes) is dropped."""
        status = self.proxies.status_of(proxy)
        if proxy in visited:
            path = " -> ".join([p.ref for p in visited] + [proxy.ref])
            status.add_error(
                st.INCLUDE_ERROR, "IncludeCreatesCycle", f"include creates an include cycle: {path}"
            )
            return []
        visited = (*visited, proxy)
        routes: list[Route] = []
        duplicates = cond.IncludeConditionsSeen()
        for include in proxy.spec.includes:
            problem = _include_conditions_problem(include.conditions, duplicates)
            if problem is not None:
                status.add_error(*problem)
                continue
            routes += self._included(proxy, status, include, conditions, visited, enforce_tls=enforce_tls)
        for index, route in enumerate(proxy.spec.routes):
            built = self._route(proxy, status, index, route, conditions, enforce_tls=enforce_tls)
            if built is None:
                return []
            routes.append(built)
        return list(routebuild.expand_prefix_routes(routes))

    def _included(
        self,
        proxy: Proxy,
        status: ProxyStatus,
        include: model.Include,
        conditions: Conditions,
        visited: tuple[Proxy, ...],
        *,
        enforce_tls: bool,
    ) -> list[Route]:
        """The routes of one include of ``proxy``, or its 502 stand-in when it cannot be followed."""
        chain = (*conditions, *include.conditions)
        target_name = (include.namespace or proxy.key.namespace, include.name)
        target = self.proxies.get(target_name)
        if target is None:
            status.add_error(
                st.INCLUDE_ERROR, "IncludeNotFound", f"include {target_name[0]}/{target_name[1]} not found"
            )
            return _bad_gateway(include, chain, proxy.key)
        if target.spec.is_root:
            status.add_error(
                st.INCLUDE_ERROR,
                "RootIncludesRoot",
                f"root httpproxy cannot include another root httpproxy ({target.ref})",
            )
            return _bad_gateway(include, chain, proxy.key)
        with blame(target.key):
            routes = self.routes(target, chain, visited, enforce_tls=enforce_tls)
        self.proxies.reached(target_name)
        return routes

    def _route(
        self,
        proxy: Proxy,
        status: ProxyStatus,
        index: int,
        route: model.Route,
        conditions: Conditions,
        *,
        enforce_tls: bool,
    ) -> Route | None:
        """One route of ``proxy`` under its includes' ``conditions``; None after recording why it
        cannot be served."""
        if not self.extension_services and ratelimit.needs_extension_service(route.rate_limit_policy):
            ratelimit.refuse_without_plugin(status, f"spec.routes[{index}].rateLimitPolicy.global")
            return None
        chain = (*conditions, *route.conditions)
        problem = _route_conditions_problem(route.conditions, chain)
        if problem is not None:
            status.add_error(*problem)
            return None
        matched = cond.merge_path(chain)
        parts = routebuild.build_route(
            route,
            namespace=proxy.key.namespace,
            source=self.source,
            config=self.config,
            status=status,
            referrer=proxy.key,
            path_is_prefix=matched.kind is PathKind.PREFIX,
        )
        if parts is None:
            return None
        made = _dag_route(parts, matched, chain, origin=proxy.key, enforce_tls=enforce_tls)
        return with_route_policy(made, route.auth_policy, proxy.key)

    # -- TCP proxying ----------------------------------------------------------------------------
    def tcp_proxy(self, proxy: Proxy, visited: tuple[Proxy, ...] = ()) -> TCPProxy | None:
        """The TCP proxy of ``proxy``, following ``tcpproxy.include``; None after recording why
        there is none."""
        status = self.proxies.status_of(proxy)
        tcp = proxy.spec.tcpproxy
        if tcp is None:
            # Contour silently serves nothing in this case; say why instead.
            status.add_error(
                st.TCP_PROXY_ERROR,
                "NothingDefined",
                "this HTTPProxy is included as a TCP proxy but has no spec.tcpproxy",
            )
            return None
        visited = (*visited, proxy)
        found = routebuild.build_tcp_proxy(
            tcp,
            namespace=proxy.key.namespace,
            source=self.source,
            config=self.config,
            status=status,
            referrer=proxy.key,
        )
        if not isinstance(found, model.TCPProxyInclude):
            return found
        target = self._tcp_include_target(proxy, status, found, visited)
        if target is None:
            return None
        with blame(target.key):
            return self.tcp_proxy(target, visited)

    def _tcp_include_target(
        self, proxy: Proxy, status: ProxyStatus, include: model.TCPProxyInclude, visited: tuple[Proxy, ...]
    ) -> Proxy | None:
        """The proxy a ``tcpproxy.include`` names, if it may be followed (``visited`` ends with
        ``proxy``)."""
        target_name = (include.namespace or proxy.key.namespace, include.name)
        target = self.proxies.get(target_name)
        if target is None:
            status.add_error(
                st.TCP_PROXY_INCLUDE_ERROR,
                "IncludeNotFound",
                f"include {target_name[0]}/{target_name[1]} not found",
            )
            return None
        if target.spec.is_root:
            status.add_error(
                st.TCP_PROXY_INCLUDE_ERROR,
                "RootIncludesRoot",
                f"root httpproxy cannot include another root httpproxy ({target.ref})",
            )
            return None
        self.proxies.reached(target_name)
        if target in visited:
            path = " -> ".join([p.ref for p in visited] + [target.ref])
            status.add_error(
                st.TCP_PROXY_INCLUDE_ERROR, "IncludeCreatesCycle", f"include creates a cycle: {path}"
            )
            return None
        return target


def _include_conditions_problem(
    conditions: Sequence[model.MatchCondition], seen: cond.IncludeConditionsSeen
) -> _Problem | None:
    """What is wrong with an include's own conditions, in Contour's order (a duplicate of an earlier
    include's conditions too: ``seen`` records them)."""
    problem = cond.include_conditions_error(conditions)
    if problem is not None:
        return st.INCLUDE_ERROR, "PathMatchConditionsNotValid", f"include: {problem}"
    found = _header_and_query_problem(conditions)
    if found is None and seen.duplicate(conditions):
        return st.INCLUDE_ERROR, "DuplicateMatchConditions", "duplicate conditions defined on an include"
    return found


def _route_conditions_problem(own: Conditions, chain: Conditions) -> _Problem | None:
    """What is wrong with a route's path conditions (``own``) or with the header and query
    conditions of the whole ``chain`` (its includes' and its own)."""
    problem = cond.path_conditions_error(own)
    if problem is not None:
        return st.ROUTE_ERROR, "PathMatchConditionsNotValid", f"route: {problem}"
    return _header_and_query_problem(chain)


def _header_and_query_problem(conditions: Sequence[model.MatchCondition]) -> _Problem | None:
    problem = cond.header_conditions_error(conditions)
    if problem is not None:
        return st.ROUTE_ERROR, "HeaderMatchConditionsNotValid", problem
    problem = cond.query_conditions_error(conditions)
    if problem is not None:
        return st.ROUTE_ERROR, "QueryParameterMatchConditionsNotValid", problem
    return None


def _dag_route(
    parts: routebuild.RouteParts,
    matched: PathMatch,
    chain: Conditions,
    *,
    origin: ObjectKey,
    enforce_tls: bool,
) -> Route:
    """The DAG route of what routebuild made of a route, matching the merged ``chain``."""
    prefix_rewrite = parts.prefix_rewrite
    if parts.replace_prefix:
        prefix_rewrite = routebuild.resolve_prefix_rewrite(parts.replace_prefix, matched.value)
    return Route(
        path=matched,
        headers=cond.merge_headers(chain),
        query=cond.merge_query(chain),
        clusters=parts.clusters,
        redirect=parts.redirect,
        direct_response=parts.direct_response,
        https_redirect=enforce_tls and not parts.permit_insecure,
        websocket=parts.websocket,
        timeout_policy=parts.timeout_policy,
        retry_policy=parts.retry_policy,
        prefix_rewrite=prefix_rewrite,
        request_headers=parts.request_headers,
        response_headers=parts.response_headers,
        mirrors=parts.mirrors,
        hash_policies=parts.hash_policies,
        internal_redirect=parts.internal_redirect,
        cookie_rewrites=parts.cookie_rewrites,
        local_rate_limit=parts.local_rate_limit,
        ip_filter=parts.ip_filter,
        origin=origin,
        attachments=_attachments(parts, origin),
    )


def _attachments(parts: routebuild.RouteParts, origin: ObjectKey) -> Attachments:
    if parts.global_rate_limit is None:
        return parts.attachments
    return parts.attachments.set(ratelimit.ROUTE_LIMITS, parts.global_rate_limit, origin=origin)


def _bad_gateway(
    include: model.Include, chain: Sequence[model.MatchCondition], origin: ObjectKey
) -> list[Route]:
    """The 502 route standing in for an include that cannot be followed.

    As in Contour only an include with conditions gets one (one without would shadow every other
    route of the virtual host).  Contour matches on the include's own conditions only; cpx puts
    the whole chain's (the parents' include conditions too), so that the route stays inside the
    path space the include was given.
    """
    if not include.conditions:
        return []
    return [
        Route(
            path=cond.merge_path(chain),
            headers=cond.merge_headers(chain),
            query=cond.merge_query(chain),
            direct_response=DirectResponse(status_code=502),
            origin=origin,
            # Contour's stand-in requires no token even under a default JWT provider.
            attachments=NO_JWT,
        )
    ]
