"""External authorization of a root's virtual host (Contour's ``virtualhost.authorization``,
``internal/dag/httpproxy_processor.go`` computeVirtualHostAuthorization, ``internal/envoy/v3``
FilterExternalAuthz and the per-route ``ExtAuthzPerRoute``).

The authorization server is an ExtensionService, which the ``extsvc`` plugin owns: this plugin
never imports it, it reads what that plugin publishes in the DAG registry
``cpx.dag.EXTENSION_UPSTREAMS`` (the lookup is a recorded read, so the incremental processor
re-plans a root when its ExtensionService, or a Service or Secret behind it, changes).

What it produces: :class:`ExternalAuthorization` on the secure virtual host's attachments (the
``envoy.filters.http.ext_authz`` filter of its SNI chain reads it from ``FilterSite.attachments``)
and :class:`RouteAuthorization` on each route (disabled, or the merged context), read by the
filter's per-route config.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from cpx import DurationError, ObjectKey, SourceView, go_quote, parse_timeout
from cpx.dag import DAG, EXTENSION_UPSTREAMS, AttachmentKey, Duration, Route

from cpx_httpproxy import model
from cpx_httpproxy import status as st
from cpx_httpproxy.kinds import EXT_AUTHZ_FILTER as FILTER
from cpx_httpproxy.kinds import ROUTE_AUTHORIZATION_KEY
from cpx_httpproxy.status import ProxyStatus

EXTENSION_API_VERSION = "projectcontour.io/v1alpha1"
EXTENSION_PLUGIN = "extsvc"  # the plugin that owns ExtensionServices (named in messages only)
DEFAULT_MAX_REQUEST_BYTES = 1024  # Contour's defaultMaxRequestBytes


@attrs.frozen(cache_hash=True)
class ExternalAuthorization:
    """The ext_authz filter of one virtual host's chain (Contour's dag.ExternalAuthorization)."""

    cluster: str
    sni: str = ""
    timeout: Duration | None = None  # None: Envoy's default; Duration(None): no timeout
    fail_open: bool = False
    service_type: str = "grpc"  # "grpc" | "http"
    # (max_request_bytes, allow_partial_message, pack_as_bytes), or None: no body sent.
    with_request_body: tuple[int, bool, bool] | None = None
    http_path_prefix: str = ""
    # HTTP servers: (kind, value, ignore_case) name matchers, kind exact|prefix|suffix|contains.
    allowed_authorization_headers: tuple[tuple[str, str, bool], ...] = ()
    allowed_upstream_headers: tuple[tuple[str, str, bool], ...] = ()


@attrs.frozen(cache_hash=True)
class RouteAuthorization:
    """A route's ext_authz override: disabled, or the context entries sent with its checks."""

    disabled: bool = False
    context: tuple[tuple[str, str], ...] = ()


VHOST_AUTHORIZATION = AttachmentKey(FILTER, ExternalAuthorization)
ROUTE_AUTHORIZATION = AttachmentKey(ROUTE_AUTHORIZATION_KEY, RouteAuthorization)
# A route's own authPolicy, attached where the route is built (an included proxy's route too) and
# resolved against its root's settings into ROUTE_AUTHORIZATION.
ROUTE_POLICY = AttachmentKey("httpproxy.authPolicy", model.AuthorizationPolicy)


def not_permitted(vhost: model.VirtualHost, status: ProxyStatus) -> bool:
    """Contour's AuthNotPermitted: an extension reference needs a TLS-terminating root."""
    auth = vhost.authorization
    if vhost.tls is None and auth is not None and auth.extension_ref is not None and auth.extension_ref.name:
        status.add_error(
            st.AUTH_ERROR,
            "AuthNotPermitted",
            "Spec.VirtualHost.Authorization.ExtensionServiceRef can only be defined for root HTTPProxies "
            "that terminate TLS",
        )
        return True
    return False


def fallback_conflict(vhost: model.VirtualHost, status: ProxyStatus) -> bool:
    """Contour's TLSIncompatibleFeatures: the fallback chain serves routes of many hosts, which
    cannot carry one host's authorization."""
    if vhost.tls is not None and vhost.tls.enable_fallback_certificate and vhost.authorization is not None:
        status.add_error(
            st.TLS_ERROR,
            "TLSIncompatibleFeatures",
            "Spec.Virtualhost.TLS fallback & client authorization are incompatible",
        )
        return True
    return False


@attrs.frozen
class Authorizer:
    """Resolves a root's authorization against the build's DAG registry (and the global one)."""

    dag: DAG
    source: SourceView
    global_auth: model.AuthorizationServer | None = None

    def secure_vhost(
        self, proxy_key: ObjectKey, vhost: model.VirtualHost, status: ProxyStatus
    ) -> tuple[bool, ExternalAuthorization | None]:
        """Contour's computeSecureVirtualHostAuthorization: (ok, the filter's settings)."""
        auth = vhost.authorization
        if auth is not None and auth.extension_ref is not None and auth.extension_ref.name:
            found = self.resolve(auth, proxy_key, status)
            return found is not None, found
        if self.global_auth is not None:
            found = self.resolve(self.global_auth, proxy_key, status)
            return found is not None, found
        return True, None

    def check_global(self, proxy_key: ObjectKey, vhost: model.VirtualHost, status: ProxyStatus) -> None:
        """Contour checks the global server for every root that does not opt out (errors only)."""
        if self.global_auth is not None and not disables_authorization(vhost):
            self.resolve(self.global_auth, proxy_key, status)

    def resolve(
        self, auth: model.AuthorizationServer, proxy_key: ObjectKey, status: ProxyStatus
    ) -> ExternalAuthorization | None:
        """Contour's computeVirtualHostAuthorization; None after recording why not."""
        ref = auth.extension_ref or model.ExtensionServiceReference()
        api_version = ref.api_version or EXTENSION_API_VERSION
        if api_version != EXTENSION_API_VERSION:
            status.add_error(
                st.AUTH_ERROR,
                "AuthBadResourceVersion",
                "Spec.Virtualhost.Authorization.extensionRef specifies an unsupported resource version "
                f"{go_quote(api_version)}",
            )
            return None
        namespace = ref.namespace or proxy_key.namespace
        key = ObjectKey("projectcontour.io", "ExtensionService", namespace, ref.name)
        upstream = self.dag.registries.lookup(EXTENSION_UPSTREAMS, key, self.source)
        if upstream is None or not upstream.valid:
            message = (
                "Spec.Virtualhost.Authorization.ServiceRef extension service "
                f"{go_quote(f'{namespace}/{ref.name}')} not found"
            )
            if not self.dag.registries.published_by_any(EXTENSION_UPSTREAMS):
                message += f" (ExtensionServices need the {EXTENSION_PLUGIN!r} plugin, which is not enabled)"
            status.add_error(st.AUTH_ERROR, "ExtensionServiceNotFound", message)
            return None
        try:
            timeout = parse_timeout(auth.response_timeout)
        except DurationError as err:
            status.add_error(
                st.AUTH_ERROR,
                "AuthResponseTimeoutInvalid",
                f"Spec.Virtualhost.Authorization.ResponseTimeout is invalid: {err}",
            )
            return None
        service_type = "http" if auth.service_type == "http" else "grpc"
        if auth.auth_policy is not None and auth.auth_policy.context and service_type == "http":
            status.add_error(
                st.AUTH_ERROR,
                "AuthContextForHTTP",
                "Spec.Virtualhost.Authorization.AuthPolicy.Context are only applied to grpc service type",
            )
        settings = auth.http_settings or model.HTTPAuthorizationServerSettings()
        allowed = {}
        for field, headers in (
            ("AllowedAuthorizationHeaders", settings.allowed_authorization_headers),
            ("AllowedUpstreamHeaders", settings.allowed_upstream_headers),
        ):
            problem = allowed_headers_problem(headers)
            if problem is not None:
                status.add_error(
                    st.AUTH_ERROR,
                    "AuthBadAllowedHeader",
                    f"Spec.Virtualhost.Authorization.HTTPServerSettings.{field} is invalid: {problem}",
                )
            allowed[field] = () if problem is not None else tuple(_matcher(h) for h in headers)
        body = auth.with_request_body
        return ExternalAuthorization(
            cluster=upstream.cluster_name,
            sni=upstream.sni,
            # No timeout of its own: the ExtensionService's response timeout.
            timeout=timeout if timeout is not None else upstream.response_timeout,
            fail_open=auth.fail_open,
            service_type=service_type,
            with_request_body=None
            if body is None
            else (
                body.max_request_bytes or DEFAULT_MAX_REQUEST_BYTES,
                body.allow_partial_message,
                body.pack_as_bytes,
            ),
            http_path_prefix=settings.path_prefix,
            allowed_authorization_headers=allowed["AllowedAuthorizationHeaders"],
            allowed_upstream_headers=allowed["AllowedUpstreamHeaders"],
        )

    def routes(self, vhost: model.VirtualHost, routes: Mapping[str, Route]) -> dict[str, Route]:
        """Each route with its resolved override (Contour: when the root or the global server
        authorizes); the routes' own policies are dropped either way."""
        configured = vhost.authorization is not None
        if not configured and self.global_auth is None:
            return {k: _without_policy(r) for k, r in routes.items()}
        disabled = self.global_auth is not None and _policy_disabled(self.global_auth)
        parent: tuple[tuple[str, str], ...] = ()
        if configured:
            disabled = disables_authorization(vhost)
            parent = _context(vhost.authorization)
        elif self.global_auth is not None:
            parent = _context(self.global_auth)
        out: dict[str, Route] = {}
        for match_key, route in routes.items():
            policy = route.attachments.get(ROUTE_POLICY)
            route_disabled = policy.disabled if policy is not None else disabled
            context = dict(parent)
            if policy is not None:
                context.update(policy.context)
            decided = RouteAuthorization(disabled=route_disabled, context=tuple(sorted(context.items())))
            attachments = route.attachments.remove(ROUTE_POLICY)
            if decided != RouteAuthorization():
                attachments = attachments.set(ROUTE_AUTHORIZATION, decided)
            out[match_key] = attrs.evolve(route, attachments=attachments)
        return out


_MATCH_KINDS = ("exact", "prefix", "suffix", "contains")


def allowed_headers_problem(headers: tuple[model.HTTPAuthorizationHeaderMatcher, ...]) -> str | None:
    """Contour's ExternalAuthAllowedHeadersValid: exactly one match kind per header."""
    for header in headers:
        count = sum(1 for kind in _MATCH_KINDS if getattr(header, kind))
        if count == 0:
            return "one of prefix, suffix, exact or contains is required for each allowedHeader"
        if count > 1:
            return "only one of prefix, suffix, exact, and contains should be set in the allowedHeader"
    return None


def _matcher(header: model.HTTPAuthorizationHeaderMatcher) -> tuple[str, str, bool]:
    kind = next(kind for kind in _MATCH_KINDS if getattr(header, kind))
    return kind, str(getattr(header, kind)), header.ignore_case


def _without_policy(route: Route) -> Route:
    if not route.attachments or ROUTE_POLICY not in route.attachments:  # most routes have none
        return route
    return attrs.evolve(route, attachments=route.attachments.remove(ROUTE_POLICY))


def _policy_disabled(auth: model.AuthorizationServer) -> bool:
    return auth.auth_policy is not None and auth.auth_policy.disabled


def _context(auth: model.AuthorizationServer | None) -> tuple[tuple[str, str], ...]:
    if auth is None or auth.auth_policy is None:
        return ()
    return tuple(auth.auth_policy.context)


def disables_authorization(vhost: model.VirtualHost) -> bool:
    """Contour's VirtualHost.DisableAuthorization."""
    return vhost.authorization is not None and _policy_disabled(vhost.authorization)


def with_route_policy(route: Route, policy: model.AuthorizationPolicy | None, origin: ObjectKey) -> Route:
    """The DAG route carrying its own ``authPolicy`` until its root resolves it."""
    if policy is None:
        return route
    return attrs.evolve(route, attachments=route.attachments.set(ROUTE_POLICY, policy, origin=origin))
