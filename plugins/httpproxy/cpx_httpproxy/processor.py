"""HTTPProxyProcessor: projectcontour.io/v1 HTTPProxy → virtual hosts and routes (Contour's
``internal/dag/httpproxy_processor.go``).

Every build starts from scratch, as Contour's does:

1. Roots (proxies with ``spec.virtualhost``) are grouped by lower-cased FQDN; every root of an
   FQDN claimed twice gets ``DuplicateVhost`` and is not served.  Every other proxy starts out
   orphaned.
2. Each remaining root, in (namespace, name) order, is checked in Contour's order: FQDN, root
   namespace, emptiness, features cpx does not have, TLS, TCP proxy, routes (walking its includes
   depth-first; each child is no longer an orphan), virtual host policies.  A failure "drops the
   proxy" (nothing of it is programmed); a bad route "drops the route set" of the proxy it is in
   (that proxy's routes and those of its includes); the rest of the tree is still served.
3. Children never reached stay orphaned; every HTTPProxy gets its status and notes.

Errors are recorded on the proxy where they occur (a child's own errors on the child).  What a
route does (services, policies) is :mod:`cpx_httpproxy.routebuild`'s business; this module owns
the tree: roots, includes, conditions, TLS and where routes go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from cpx import (
    STATUS_ADDRESS_OPTION,
    Config,
    ConfigError,
    DelegationNotPermittedError,
    ObjectKey,
    SecretError,
    SourceView,
    blame,
    load_balancer_status,
)
from cpx.dag import DAG, DirectResponse, PathKind, Route, Secret, SecureVirtualHost, TCPProxy

from cpx_httpproxy import conditions as cond
from cpx_httpproxy import model, routebuild
from cpx_httpproxy import status as st
from cpx_httpproxy.kinds import HTTP_LISTENER, HTTPPROXY, HTTPS_LISTENER
from cpx_httpproxy.model import HTTPProxySpec
from cpx_httpproxy.status import ProxyStatus

# Option names (cpx_options in cpx_httpproxy.plugin).
ROOT_NAMESPACES = "root_namespaces"
FALLBACK_CERTIFICATE = "fallback_certificate"
DISABLE_PERMIT_INSECURE = "disable_permit_insecure"

NOT_IMPLEMENTED = "NotImplemented"
TLS_VERSIONS = ("1.2", "1.3")


# -- options -------------------------------------------------------------------------------------


def parse_bool(value: Any, flag: str) -> bool:
    """A boolean option (click's ``type=bool`` already converted ``true``/``false``/``1``/...).

    Anything but a bool is refused, because other code reads these options with a plain
    truth test (the string "false" would read as true).
    """
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise ValueError(f"{flag}: expected true or false, got {value!r}")


def parse_root_namespaces(value: Any) -> tuple[str, ...]:
    """``--root-namespaces``: repeatable, each value comma-separated (Contour's flag is one list)."""
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else list(value)
    names = (part.strip() for v in values for part in str(v).split(","))
    return tuple(dict.fromkeys(n for n in names if n))


def parse_fallback_certificate(value: Any) -> tuple[str, str] | None:
    """``--fallback-certificate namespace/name`` → (namespace, name); None when unset."""
    if value is None or value == "":
        return None
    namespace, slash, name = str(value).strip().partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ValueError(f"--fallback-certificate: expected namespace/name, got {value!r}")
    return namespace, name


@attrs.frozen(kw_only=True)
class Settings:
    """The plugin's options, parsed once (the values Contour's HTTPProxyProcessor holds).

    ``cpx_configure`` builds one to refuse bad values at start-up; the boolean is read from the
    Config by :mod:`cpx_httpproxy.routebuild` itself (a plain truth test, hence the strict check
    here).  ExternalName Services are the core's business (``--enable-external-name-service``).
    """

    root_namespaces: tuple[str, ...] = ()
    fallback_certificate: tuple[str, str] | None = None
    disable_permit_insecure: bool = False

    @classmethod
    def from_config(cls, config: Config) -> Settings:
        """Raises ConfigError naming the flag when a value is unusable."""
        try:
            return cls(
                root_namespaces=parse_root_namespaces(config.option(ROOT_NAMESPACES)),
                fallback_certificate=parse_fallback_certificate(config.option(FALLBACK_CERTIFICATE)),
                disable_permit_insecure=parse_bool(
                    config.option(DISABLE_PERMIT_INSECURE), "--disable-permit-insecure"
                ),
            )
        except ValueError as err:
            raise ConfigError(str(err)) from None


# -- features cpx does not have ------------------------------------------------------------------


def unsupported_vhost_fields(vhost: model.VirtualHost) -> list[str]:
    """Virtual host fields cpx cannot honour yet (routebuild's list plus client certificate
    validation); a root using one is not served."""
    found = [f"spec.virtualhost.{field}" for field in routebuild.unsupported_vhost_fields(vhost)]
    if vhost.tls is not None and vhost.tls.client_validation is not None:
        found.append("spec.virtualhost.tls.clientValidation")
    return found


def _not_supported(status: ProxyStatus, fields: Iterable[str]) -> None:
    for field in fields:
        status.add_error(st.SPEC_ERROR, NOT_IMPLEMENTED, f"{field} is not supported by cpx yet")


# -- the processor -------------------------------------------------------------------------------


@attrs.define(eq=False)
class HTTPProxyProcessor:
    """Adds every accepted HTTPProxy's virtual hosts and routes to the static listeners.

    Holds only its configuration: each run recomputes every proxy (:class:`_Run`).
    """

    config: Config
    settings: Settings
    clock: st.Clock = st.utc_now
    # status.loadBalancer for every proxy, from the core's --ingress-status-address (as Contour).
    load_balancer: Mapping[str, Any] | None = None
    # The status each proxy got last build: objects from files carry none, and without it every
    # rebuild would stamp a new lastTransitionTime (and log every proxy as changed).
    last_rendered: dict[ObjectKey, Mapping[str, Any]] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> HTTPProxyProcessor:
        lb = load_balancer_status(config.option(STATUS_ADDRESS_OPTION.name))
        return cls(config=config, settings=Settings.from_config(config), load_balancer=lb)

    def run(self, dag: DAG, source: SourceView) -> None:
        _Run(self, dag, source).run()


@attrs.frozen
class _Proxy:
    obj: Mapping[str, Any]
    key: ObjectKey
    model: model.HTTPProxy

    @property
    def ref(self) -> str:
        return f"{self.key.namespace}/{self.key.name}"

    @property
    def spec(self) -> HTTPProxySpec:
        return self.model.spec


@attrs.frozen
class _TLS:
    """What a root's ``virtualhost.tls`` resolved to."""

    passthrough: bool
    secret: Secret | None = None
    min_version: str = "1.2"
    max_version: str = "1.3"
    fallback: Secret | None = None


_Name = tuple[str, str]  # (namespace, name)


@attrs.define(eq=False)
class _Run:
    """One build: the state Contour keeps on its processor between Run's start and end."""

    processor: HTTPProxyProcessor
    dag: DAG
    source: SourceView
    proxies: dict[_Name, _Proxy] = attrs.field(factory=dict)
    statuses: dict[_Name, ProxyStatus] = attrs.field(factory=dict)
    orphaned: set[_Name] = attrs.field(factory=set)

    @property
    def settings(self) -> Settings:
        return self.processor.settings

    def run(self) -> None:
        for obj in self.source.list(HTTPPROXY):
            key = ObjectKey.of(obj)
            # A crash in one proxy's translation leaves out that proxy (or the included one it
            # happened in), not the build: see cpx.isolation.
            with blame(key):
                parsed = model.HTTPProxy.from_dict(obj)
            name = (parsed.namespace, parsed.name)
            self.proxies[name] = _Proxy(obj, key, parsed)
            self.statuses[name] = ProxyStatus.for_object(obj)
        for root in self._unique_roots():
            with blame(root.key):
                self._root(root)
        for name in self.orphaned:
            self.statuses[name].orphan()
        clock = self.processor.clock
        last = self.processor.last_rendered
        rendered: dict[ObjectKey, Mapping[str, Any]] = {}
        for name, proxy in self.proxies.items():
            status = self.statuses[name]
            previous = proxy.obj.get("status")
            if not isinstance(previous, Mapping) or not previous:
                previous = last.get(proxy.key)
            computed = status.render(previous, clock=clock)
            if self.processor.load_balancer is not None:
                computed = {**computed, **self.processor.load_balancer}
            rendered[proxy.key] = computed
            self.dag.set_status(proxy.key, computed)
            for note in status.notes():
                self.dag.add_note(proxy.key, note)
        self.processor.last_rendered = rendered

    def _unique_roots(self) -> list[_Proxy]:
        """Roots whose FQDN no other root claims; the others get DuplicateVhost."""
        by_fqdn: dict[str, list[_Proxy]] = {}
        for name, proxy in self.proxies.items():
            vhost = proxy.spec.virtualhost
            if vhost is None:
                self.orphaned.add(name)
                continue
            by_fqdn.setdefault(vhost.fqdn.lower(), []).append(proxy)
        roots = []
        for fqdn, claimants in by_fqdn.items():
            if len(claimants) == 1:
                roots.append(claimants[0])
                continue
            refs = ", ".join(sorted(p.ref for p in claimants))
            message = f'fqdn "{fqdn}" is used in multiple HTTPProxies: {refs}'
            for proxy in claimants:
                self._status(proxy).add_error(st.VIRTUAL_HOST_ERROR, "DuplicateVhost", message)
        return sorted(roots, key=lambda p: (p.key.namespace, p.key.name))

    def _status(self, proxy: _Proxy) -> ProxyStatus:
        return self.statuses[(proxy.key.namespace, proxy.key.name)]

    # -- one root ------------------------------------------------------------------------------
    def _root(self, proxy: _Proxy) -> None:  # noqa: C901, PLR0911, PLR0912  (why: Contour's root checks, in order)
        status = self._status(proxy)
        vhost = proxy.spec.virtualhost
        assert vhost is not None
        host = vhost.fqdn
        if not host.strip():
            status.add_error(
                st.VIRTUAL_HOST_ERROR, "FQDNNotSpecified", "Spec.VirtualHost.Fqdn must be specified"
            )
            return
        roots = self.settings.root_namespaces
        if roots and proxy.key.namespace not in roots:
            status.add_error(
                st.ROOT_NAMESPACE_ERROR,
                "RootProxyNotAllowedInNamespace",
                "root HTTPProxy cannot be defined in this namespace",
            )
            return
        spec = proxy.spec
        if not spec.routes and not spec.includes and spec.tcpproxy is None:
            status.add_error(
                st.SPEC_ERROR,
                "NothingDefined",
                "HTTPProxy.Spec must have at least one Route, Include, or a TCPProxy",
            )
            return
        unsupported = unsupported_vhost_fields(vhost)
        if unsupported:
            _not_supported(status, unsupported)
            return
        if not routebuild.check_vhost_ip_filters(vhost, status):
            return
        for listener in (HTTP_LISTENER, HTTPS_LISTENER):
            if self.dag.get_listener(listener) is None:
                status.add_error(
                    st.LISTENER_ERROR, "ErrorIdentifyingListener", f"listener {listener} not found"
                )
                return

        tls: _TLS | None = None
        if vhost.tls is not None:
            tls = self._tls(proxy, vhost.tls, status)
            if tls is None:
                return

        tcp_proxy: TCPProxy | None = None
        if spec.tcpproxy is not None:
            if tls is None:
                status.add_error(
                    st.TCP_PROXY_ERROR,
                    "TLSMustBeConfigured",
                    "Spec.TCPProxy requires that either Spec.TLS.Passthrough or Spec.TLS.SecretName be set",
                )
                return
            tcp_proxy = self._tcp_proxy(proxy, status, ())
            if tcp_proxy is None:
                return

        routes = self._routes(status, proxy, (), (), enforce_tls=tls is not None)
        policies = routebuild.build_vhost_policies(vhost, status=status)
        if policies is None:
            return

        insecure = self.dag.ensure_virtual_host(HTTP_LISTENER, host)
        insecure.cors = policies.cors
        insecure.local_rate_limit = policies.local_rate_limit
        insecure.ip_filter = policies.ip_filter
        for route in routes:
            insecure.add_route(route)
        if tls is None:
            return
        if tls.passthrough and tcp_proxy is None:
            # Nothing to serve over TLS: without a certificate only a TCP proxy can use the SNI.
            return
        secure = self.dag.ensure_secure_virtual_host(HTTPS_LISTENER, host)
        self._configure_secure(secure, tls, tcp_proxy)
        if tcp_proxy is not None:
            return  # routes are not attached to a TCP-proxying virtual host
        secure.cors = policies.cors
        secure.local_rate_limit = policies.local_rate_limit
        secure.ip_filter = policies.ip_filter
        for route in routes:
            secure.add_route(attrs.evolve(route, https_redirect=False) if route.https_redirect else route)

    def _configure_secure(self, secure: SecureVirtualHost, tls: _TLS, tcp_proxy: TCPProxy | None) -> None:
        secure.passthrough = tls.passthrough
        if tls.secret is not None:
            secure.secret = tls.secret
            secure.tls = attrs.evolve(secure.tls, min_version=tls.min_version, max_version=tls.max_version)
        if tls.fallback is not None:
            secure.fallback_certificate = tls.fallback
        if tcp_proxy is not None:
            secure.tcp_proxy = tcp_proxy

    # -- TLS -----------------------------------------------------------------------------------
    def _tls(self, proxy: _Proxy, tls: model.TLS, status: ProxyStatus) -> _TLS | None:  # noqa: PLR0911  (why: one return per Contour TLS error)
        if tls.passthrough and tls.enable_fallback_certificate:
            status.add_error(
                st.TLS_ERROR,
                "TLSIncompatibleFeatures",
                "Spec.VirtualHost.TLS: both Passthrough and enableFallbackCertificate were specified",
            )
            return None
        has_secret = bool(tls.secret_name.strip())
        if has_secret and tls.passthrough:
            status.add_error(
                st.TLS_ERROR,
                "TLSConfigNotValid",
                "Spec.VirtualHost.TLS: both Passthrough and SecretName were specified",
            )
            return None
        if not has_secret and not tls.passthrough:
            status.add_error(
                st.TLS_ERROR,
                "TLSConfigNotValid",
                "Spec.VirtualHost.TLS: neither Passthrough nor SecretName were specified",
            )
            return None
        if tls.passthrough:
            return _TLS(passthrough=True)

        namespace, name = _namespaced(tls.secret_name, proxy.key.namespace)
        try:
            secret = self.source.lookup_tls_secret(namespace, name, proxy.key)
        except DelegationNotPermittedError:
            status.add_error(
                st.TLS_ERROR,
                "DelegationNotPermitted",
                f'Spec.VirtualHost.TLS Secret "{tls.secret_name}" certificate delegation not permitted',
            )
            return None
        except SecretError as err:
            status.add_error(
                st.TLS_ERROR,
                "SecretNotValid",
                f'Spec.VirtualHost.TLS Secret "{tls.secret_name}" is invalid: {err}',
            )
            return None
        min_version = _tls_version(tls.minimum_protocol_version, "1.2")
        max_version = _tls_version(tls.maximum_protocol_version, "1.3")
        if max_version < min_version:
            status.add_error(
                st.TLS_ERROR,
                "TLSConfigNotValid",
                "Spec.Virtualhost.TLS the minimum protocol version is greater than the maximum protocol "
                "version",
            )
            return None
        fallback = None
        if tls.enable_fallback_certificate:
            fallback = self._fallback_certificate(proxy, status)
            if fallback is None:
                return None
        return _TLS(
            passthrough=False,
            secret=secret,
            min_version=min_version,
            max_version=max_version,
            fallback=fallback,
        )

    def _fallback_certificate(self, proxy: _Proxy, status: ProxyStatus) -> Secret | None:
        configured = self.settings.fallback_certificate
        if configured is None:
            status.add_error(
                st.TLS_ERROR,
                "FallbackNotPresent",
                "Spec.Virtualhost.TLS enabled fallback but the fallback Certificate Secret is not "
                "configured in Contour configuration file",
            )
            return None
        namespace, name = configured
        try:
            return self.source.lookup_tls_secret(namespace, name, proxy.key)
        except DelegationNotPermittedError:
            status.add_error(
                st.TLS_ERROR,
                "FallbackNotDelegated",
                f'Spec.VirtualHost.TLS Secret "{namespace}/{name}" is not configured for certificate '
                "delegation",
            )
        except SecretError as err:
            status.add_error(
                st.TLS_ERROR,
                "FallbackNotValid",
                f'Spec.Virtualhost.TLS Secret "{namespace}/{name}" fallback certificate is invalid: {err}',
            )
        return None

    # -- TCP proxying ----------------------------------------------------------------------------
    def _tcp_proxy(self, proxy: _Proxy, status: ProxyStatus, visited: tuple[_Proxy, ...]) -> TCPProxy | None:
        """The TCP proxy of ``proxy``, following ``tcpproxy.include`` (Contour's
        processHTTPProxyTCPProxy); None after recording why there is none.  Errors go to the
        status of the proxy in the chain where they occur."""
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
            config=self.processor.config,
            status=status,
            referrer=proxy.key,
        )
        if not isinstance(found, model.TCPProxyInclude):
            return found
        target_name = (found.namespace or proxy.key.namespace, found.name)
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
        self.orphaned.discard(target_name)
        if any(p.key == target.key for p in visited):
            path = " -> ".join([p.ref for p in visited] + [target.ref])
            status.add_error(
                st.TCP_PROXY_INCLUDE_ERROR, "IncludeCreatesCycle", f"include creates a cycle: {path}"
            )
            return None
        with blame(target.key):
            return self._tcp_proxy(target, self._status(target), visited)

    # -- routes and includes ---------------------------------------------------------------------
    def _routes(  # noqa: C901, PLR0912, PLR0915  (why: Contour's route checks, in order, as build_route)
        self,
        status: ProxyStatus,
        proxy: _Proxy,
        conditions: tuple[model.MatchCondition, ...],
        visited: tuple[_Proxy, ...],
        *,
        enforce_tls: bool,
    ) -> list[Route]:
        """The routes of ``proxy`` and its includes under ``conditions`` (Contour's computeRoutes).

        ``status`` is the proxy's own; an empty list after an error means the route set of this
        proxy (and of everything it includes) is dropped.
        """
        for seen in visited:
            if seen.key == proxy.key:
                path = " -> ".join([p.ref for p in visited] + [proxy.ref])
                status.add_error(
                    st.INCLUDE_ERROR, "IncludeCreatesCycle", f"include creates an include cycle: {path}"
                )
                return []
        visited = (*visited, proxy)
        routes: list[Route] = []
        origin = proxy.key

        duplicates = cond.IncludeConditionsSeen()
        for include in proxy.spec.includes:
            problem = cond.include_conditions_error(include.conditions)
            if problem is not None:
                status.add_error(st.INCLUDE_ERROR, "PathMatchConditionsNotValid", f"include: {problem}")
                continue
            problem = cond.header_conditions_error(include.conditions)
            if problem is not None:
                status.add_error(st.ROUTE_ERROR, "HeaderMatchConditionsNotValid", problem)
                continue
            problem = cond.query_conditions_error(include.conditions)
            if problem is not None:
                status.add_error(st.ROUTE_ERROR, "QueryParameterMatchConditionsNotValid", problem)
                continue
            if duplicates.duplicate(include.conditions):
                status.add_error(
                    st.INCLUDE_ERROR, "DuplicateMatchConditions", "duplicate conditions defined on an include"
                )
                continue
            chain = (*conditions, *include.conditions)
            target_name = (include.namespace or proxy.key.namespace, include.name)
            target = self.proxies.get(target_name)
            if target is None:
                status.add_error(
                    st.INCLUDE_ERROR,
                    "IncludeNotFound",
                    f"include {target_name[0]}/{target_name[1]} not found",
                )
                routes += _bad_gateway(include, chain, origin)
                continue
            if target.spec.is_root:
                status.add_error(
                    st.INCLUDE_ERROR,
                    "RootIncludesRoot",
                    f"root httpproxy cannot include another root httpproxy ({target.ref})",
                )
                routes += _bad_gateway(include, chain, origin)
                continue
            with blame(target.key):
                routes += self._routes(self._status(target), target, chain, visited, enforce_tls=enforce_tls)
            self.orphaned.discard(target_name)

        for index, route in enumerate(proxy.spec.routes):
            unsupported = routebuild.unsupported_route_fields(route)
            if unsupported:
                _not_supported(status, (f"spec.routes[{index}].{field}" for field in unsupported))
                return []
            problem = cond.path_conditions_error(route.conditions)
            if problem is not None:
                status.add_error(st.ROUTE_ERROR, "PathMatchConditionsNotValid", f"route: {problem}")
                return []
            chain = (*conditions, *route.conditions)
            problem = cond.header_conditions_error(chain)
            if problem is not None:
                status.add_error(st.ROUTE_ERROR, "HeaderMatchConditionsNotValid", problem)
                return []
            problem = cond.query_conditions_error(chain)
            if problem is not None:
                status.add_error(st.ROUTE_ERROR, "QueryParameterMatchConditionsNotValid", problem)
                return []
            matched = cond.merge_path(chain)
            parts = routebuild.build_route(
                route,
                namespace=proxy.key.namespace,
                source=self.source,
                config=self.processor.config,
                status=status,
                referrer=proxy.key,
                path_is_prefix=matched.kind is PathKind.PREFIX,
            )
            if parts is None:
                return []
            prefix_rewrite = parts.prefix_rewrite
            if parts.replace_prefix:
                prefix_rewrite = routebuild.resolve_prefix_rewrite(parts.replace_prefix, matched.value)
            routes.append(
                Route(
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
                )
            )
        return list(routebuild.expand_prefix_routes(routes))


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
        )
    ]


def _namespaced(ref: str, default_namespace: str) -> tuple[str, str]:
    """``name`` or ``namespace/name`` (Contour's k8s.NamespacedNameFrom)."""
    namespace, slash, name = ref.partition("/")
    if not slash:
        return default_namespace, ref
    return namespace or default_namespace, name


def _tls_version(value: str, default: str) -> str:
    """Contour's annotation.TLSVersion: 1.2 or 1.3, anything else the default."""
    return value if value in TLS_VERSIONS else default
