"""One root HTTPProxy → its virtual hosts (Contour's computeHTTPProxy).

A root is checked in Contour's order: FQDN, root namespace, emptiness, features cpx does not have,
IP filters, listeners, TLS, TCP proxy, routes (its includes walked by
:class:`~cpx_httpproxy.includes.IncludeWalker`), virtual host policies.  A failure drops the
root: nothing of it is programmed.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from cpx import ObjectKey, SourceView
from cpx.dag import DAG, Attachments, Route, SecureVirtualHost, TCPProxy, VirtualHost

from cpx_httpproxy import authorization, jwt, model, ratelimit, routebuild
from cpx_httpproxy import status as st
from cpx_httpproxy.authorization import VHOST_AUTHORIZATION, Authorizer, ExternalAuthorization
from cpx_httpproxy.includes import IncludeWalker
from cpx_httpproxy.kinds import HTTP_LISTENER, HTTPS_LISTENER
from cpx_httpproxy.proxies import Proxy
from cpx_httpproxy.status import ProxyStatus
from cpx_httpproxy.tls import ResolvedTLS, resolve_tls

_NO_ATTACHMENTS = Attachments()


@attrs.frozen(eq=False)
class Served:
    """What an accepted root puts in the DAG: computed once by :meth:`RootBuilder.plan`, added
    by :func:`serve` (again in later builds while the root's inputs do not change)."""

    host: str
    # By match key, as VirtualHost.add_route would leave them (a later route with the same
    # match replaces an earlier one); over HTTPS a route is served, not redirected to HTTPS.
    routes: dict[str, Route]
    secure_routes: dict[str, Route]
    policies: routebuild.VhostPolicies
    tls: ResolvedTLS | None
    tcp_proxy: TCPProxy | None
    jwt_providers: jwt.Providers | None = None
    origin: ObjectKey | None = None
    authorization: ExternalAuthorization | None = None  # the secure virtual host's


@attrs.frozen
class RootBuilder:
    """Checks each root and works out its virtual hosts (plain and, with TLS, secure)."""

    dag: DAG
    source: SourceView
    walker: IncludeWalker
    root_namespaces: tuple[str, ...]
    fallback_certificate: tuple[str, str] | None
    global_auth: model.AuthorizationServer | None = None  # --global-ext-auth-*
    default_global_rate_limit: model.GlobalRateLimitPolicy | None = None
    # Holds nothing per root: one serves every root of the build.
    authorizer: Authorizer = attrs.field(init=False)
    # The first static listener the DAG lacks (None: it has both); the same for every root.
    missing_listener: str | None = attrs.field(init=False)

    @authorizer.default
    def _authorizer(self) -> Authorizer:
        return Authorizer(self.dag, self.source, self.global_auth)

    @missing_listener.default
    def _missing_listener(self) -> str | None:
        return next((n for n in (HTTP_LISTENER, HTTPS_LISTENER) if self.dag.get_listener(n) is None), None)

    def build(self, proxy: Proxy) -> None:
        """Check ``proxy`` and add what it serves to the DAG."""
        served = self.plan(proxy)
        if served is not None:
            serve(self.dag, served)

    def plan(self, proxy: Proxy) -> Served | None:
        """What ``proxy`` serves; None (its errors recorded) when it is not served."""
        status = self.walker.proxies.status_of(proxy)
        vhost = proxy.spec.virtualhost
        assert vhost is not None
        if not self._acceptable(proxy, vhost, status):
            return None
        tls: ResolvedTLS | None = None
        if vhost.tls is not None:
            tls = resolve_tls(
                vhost.tls,
                referrer=proxy.key,
                source=self.source,
                fallback_certificate=self.fallback_certificate,
                status=status,
                fallback_conflict=jwt.fallback_conflict(vhost),
            )
            if tls is None:
                return None
        errors = len(status.errors)
        providers = jwt.resolve_providers(vhost, referrer=proxy.key, source=self.source, status=status)
        if len(status.errors) > errors:
            return None
        authorizer = self.authorizer
        ok, vhost_auth = _secure_authorization(authorizer, proxy, vhost, tls, status)
        if not ok:
            return None
        tcp_proxy: TCPProxy | None = None
        if proxy.spec.tcpproxy is not None:
            tcp_proxy = self._tcp_proxy(proxy, tls, status)
            if tcp_proxy is None:
                return None
        routes = self.walker.routes(proxy, enforce_tls=tls is not None)
        if tls is not None and tcp_proxy is None:  # Contour checks where routes go over TLS
            required = jwt.require_on_routes(routes, providers, origin=proxy.key, status=status)
            if required is None:
                return None
            routes = required
        policies = routebuild.build_vhost_policies(
            vhost, status=status, default_global_rate_limit=self.default_global_rate_limit
        )
        if policies is None:
            return None
        authorizer.check_global(proxy.key, vhost, status)
        by_key = authorizer.routes(vhost, {route.match_key(): route for route in routes})
        secure = by_key
        if tls is not None:  # only TLS roots redirect, and only they serve over HTTPS
            secure = {
                k: attrs.evolve(r, https_redirect=False) if r.https_redirect else r for k, r in by_key.items()
            }
        return Served(vhost.fqdn, by_key, secure, policies, tls, tcp_proxy, providers, proxy.key, vhost_auth)

    # -- the checks before TLS, in Contour's order -----------------------------------------------
    def _acceptable(self, proxy: Proxy, vhost: model.VirtualHost, status: ProxyStatus) -> bool:
        """Each check records its error and answers False when the root cannot be served."""
        return (
            _has_fqdn(proxy, vhost, status)
            and self._in_root_namespace(proxy, vhost, status)
            and _defines_something(proxy, vhost, status)
            and jwt.permitted(vhost, status)
            and not authorization.not_permitted(vhost, status)
            and self._has_extension_services(vhost, status)
            and _valid_ip_filters(proxy, vhost, status)
            and self._has_listeners(proxy, vhost, status)
        )

    def _has_extension_services(self, vhost: model.VirtualHost, status: ProxyStatus) -> bool:
        if self.walker.extension_services or not ratelimit.needs_extension_service(vhost.rate_limit_policy):
            return True
        ratelimit.refuse_without_plugin(status, "spec.virtualhost.rateLimitPolicy.global")
        return False

    def _in_root_namespace(self, proxy: Proxy, vhost: model.VirtualHost, status: ProxyStatus) -> bool:
        roots = self.root_namespaces
        if roots and proxy.key.namespace not in roots:
            status.add_error(
                st.ROOT_NAMESPACE_ERROR,
                "RootProxyNotAllowedInNamespace",
                "root HTTPProxy cannot be defined in this namespace",
            )
            return False
        return True

    def _has_listeners(self, proxy: Proxy, vhost: model.VirtualHost, status: ProxyStatus) -> bool:
        listener = self.missing_listener
        if listener is not None:
            status.add_error(st.LISTENER_ERROR, "ErrorIdentifyingListener", f"listener {listener} not found")
            return False
        return True

    # -- what is served --------------------------------------------------------------------------
    def _tcp_proxy(self, proxy: Proxy, tls: ResolvedTLS | None, status: ProxyStatus) -> TCPProxy | None:
        if tls is None:
            status.add_error(
                st.TCP_PROXY_ERROR,
                "TLSMustBeConfigured",
                "Spec.TCPProxy requires that either Spec.TLS.Passthrough or Spec.TLS.SecretName be set",
            )
            return None
        return self.walker.tcp_proxy(proxy)


def _secure_authorization(
    authorizer: Authorizer,
    proxy: Proxy,
    vhost: model.VirtualHost,
    tls: ResolvedTLS | None,
    status: ProxyStatus,
) -> tuple[bool, ExternalAuthorization | None]:
    """Whether the root may be served, and its secure virtual host's external authorization."""
    if tls is None or tls.secret is None:
        return True, None
    if authorization.fallback_conflict(vhost, status):
        return False, None
    return authorizer.secure_vhost(proxy.key, vhost, status)


def serve(dag: DAG, served: Served) -> None:
    """Add a root's virtual hosts to ``dag``."""
    add_plain(dag, served)
    serve_secure(dag, served)


def add_plain(dag: DAG, served: Served, made: VirtualHost | None = None) -> None:
    """Add a root's plain virtual host to ``dag``: ``made`` (the caller's frozen
    :func:`new_plain` of it, kept between builds) or a new one when the listener has no host of
    that name yet, else its policies and routes go into that host."""
    vhost = dag.get_virtual_host(HTTP_LISTENER, served.host)
    if vhost is None:
        dag.add_virtual_hosts(HTTP_LISTENER, {served.host: made or new_plain(served)})
    else:
        _apply(vhost, served.policies, served.routes)


def new_plain(served: Served) -> VirtualHost:
    policies = served.policies
    return VirtualHost(
        served.host,
        dict(served.routes),
        policies.cors,
        policies.local_rate_limit,
        policies.ip_filter,
        attachments=_host_attachments(_NO_ATTACHMENTS, policies),
    )


def _host_attachments(attachments: Attachments, policies: routebuild.VhostPolicies) -> Attachments:
    """The host's attachments with the root's global rate limits (or without any)."""
    if policies.global_rate_limit is None:
        if not attachments or ratelimit.HOST_LIMITS not in attachments:
            return attachments  # what every new host has: nothing to remove
        return attachments.remove(ratelimit.HOST_LIMITS)
    return attachments.set(ratelimit.HOST_LIMITS, policies.global_rate_limit)


def serve_secure(dag: DAG, served: Served) -> None:
    """Add a root's secure virtual host, if it has one, to ``dag`` (after :func:`add_plain`)."""
    tls, tcp_proxy = served.tls, served.tcp_proxy
    if tls is None:
        return
    if tls.passthrough and tcp_proxy is None:
        # Nothing to serve over TLS: without a certificate only a TCP proxy can use the SNI.
        return
    secure = dag.ensure_secure_virtual_host(HTTPS_LISTENER, served.host)
    _configure_secure(secure, tls, tcp_proxy)
    if served.authorization is not None:
        secure.attachments = secure.attachments.set(VHOST_AUTHORIZATION, served.authorization)
    if tcp_proxy is not None:
        return  # routes are not attached to a TCP-proxying virtual host
    _apply(secure, served.policies, served.secure_routes)
    providers = served.jwt_providers
    if providers is not None:
        secure.attachments = secure.attachments.set(jwt.JWT_PROVIDERS, providers, origin=served.origin)
        for cluster in providers.clusters():
            dag.add_cluster_node(cluster)


def _has_fqdn(proxy: Proxy, vhost: model.VirtualHost, status: ProxyStatus) -> bool:
    if not vhost.fqdn.strip():
        status.add_error(st.VIRTUAL_HOST_ERROR, "FQDNNotSpecified", "Spec.VirtualHost.Fqdn must be specified")
        return False
    return True


def _defines_something(proxy: Proxy, vhost: model.VirtualHost, status: ProxyStatus) -> bool:
    spec = proxy.spec
    if not spec.routes and not spec.includes and spec.tcpproxy is None:
        status.add_error(
            st.SPEC_ERROR,
            "NothingDefined",
            "HTTPProxy.Spec must have at least one Route, Include, or a TCPProxy",
        )
        return False
    return True


def _valid_ip_filters(proxy: Proxy, vhost: model.VirtualHost, status: ProxyStatus) -> bool:
    return routebuild.check_vhost_ip_filters(vhost, status)


def _apply(vhost: VirtualHost, policies: routebuild.VhostPolicies, routes: Mapping[str, Route]) -> None:
    vhost.cors = policies.cors
    vhost.local_rate_limit = policies.local_rate_limit
    vhost.ip_filter = policies.ip_filter
    vhost.attachments = _host_attachments(vhost.attachments, policies)
    vhost.routes.update(routes)


def _configure_secure(secure: SecureVirtualHost, tls: ResolvedTLS, tcp_proxy: TCPProxy | None) -> None:
    secure.passthrough = tls.passthrough
    if tls.secret is not None:
        secure.secret = tls.secret
        secure.tls = attrs.evolve(secure.tls, min_version=tls.min_version, max_version=tls.max_version)
    if tls.fallback is not None:
        secure.fallback_certificate = tls.fallback
    if tls.client_validation is not None:
        secure.downstream_validation = tls.client_validation
    if tcp_proxy is not None:
        secure.tcp_proxy = tcp_proxy
