"""HTTPProxyProcessor: projectcontour.io/v1 HTTPProxy → virtual hosts and routes (Contour's
``internal/dag/httpproxy_processor.go``).

Every build gives the result of one from scratch, as Contour's does (but reuses what each root
built last time when nothing it read changed: :mod:`cpx_httpproxy.incremental`):

1. Roots (proxies with ``spec.virtualhost``) are grouped by lower-cased FQDN; every root of an
   FQDN claimed twice gets ``DuplicateVhost`` and is not served.  Every other proxy starts out
   orphaned.
2. Each remaining root, in (namespace, name) order, is checked in Contour's order: FQDN, root
   namespace, emptiness, features cpx does not have, TLS, TCP proxy, routes (walking its includes
   depth-first; each child is no longer an orphan), virtual host policies.  A failure "drops the
   proxy" (nothing of it is programmed); a bad route "drops the route set" of the proxy it is in
   (that proxy's routes and those of its includes); the rest of the tree is still served.
3. Children never reached stay orphaned; every HTTPProxy gets its status and notes.

Errors are recorded on the proxy where they occur (a child's own errors on the child).  This
module holds the options and runs a build; the parts are modules of their own:

- :mod:`cpx_httpproxy.proxies`: the proxies of a build, duplicate FQDNs, orphans, statuses;
- :mod:`cpx_httpproxy.roots`: one root's checks and virtual hosts, with :mod:`cpx_httpproxy.tls`
  for its TLS settings;
- :mod:`cpx_httpproxy.includes`: includes, condition merging, cycles, TCP proxy include chains;
- :mod:`cpx_httpproxy.routebuild`: what one route does (services, policies).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs
from cpx import (
    STATUS_ADDRESS_OPTION,
    Config,
    ConfigError,
    ObjectKey,
    SourceView,
    StatusClock,
    load_balancer_status,
    utc_now,
)
from cpx.dag import DAG, EXTENSION_UPSTREAMS

from cpx_httpproxy import globalauth, model, ratelimit
from cpx_httpproxy import status as st
from cpx_httpproxy.authorization import VHOST_AUTHORIZATION, Authorizer
from cpx_httpproxy.includes import IncludeWalker
from cpx_httpproxy.incremental import Memo, RootScope, build_root
from cpx_httpproxy.kinds import HTTP_LISTENER, HTTPS_LISTENER
from cpx_httpproxy.proxies import ProxyRegistry, Published
from cpx_httpproxy.roots import RootBuilder

log = logging.getLogger(__name__)

# Option names (cpx_options in cpx_httpproxy.plugin).
ROOT_NAMESPACES = "root_namespaces"
FALLBACK_CERTIFICATE = "fallback_certificate"
DISABLE_PERMIT_INSECURE = "disable_permit_insecure"


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
    global_auth: model.AuthorizationServer | None = None  # --global-ext-auth-*
    # The rate limit service (Contour's rateLimitService) and its default global policy.
    rate_limit_service: ratelimit.ServiceSettings | None = None
    default_global_rate_limit: model.GlobalRateLimitPolicy | None = None

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
                global_auth=globalauth.from_config(config),
                rate_limit_service=ratelimit.service_settings(config),
                default_global_rate_limit=(
                    ratelimit.default_policy(config) if ratelimit.service_settings(config) else None
                ),
            )
        except ValueError as err:
            raise ConfigError(str(err)) from None


# -- the processor -------------------------------------------------------------------------------


@attrs.define(eq=False)
class HTTPProxyProcessor:
    """Adds every accepted HTTPProxy's virtual hosts and routes to the static listeners.

    Incremental (:mod:`cpx_httpproxy.incremental`): a root is built again only when it, a proxy
    its include tree looked up, or a Service/Secret/... it read changed, or when it just became
    a unique root; every other root's result is replayed.  DuplicateVhost, orphans and statuses
    are worked out afresh every build, so the result is always that of a build from scratch.
    """

    config: Config
    settings: Settings
    clock: StatusClock = utc_now
    # status.loadBalancer for every proxy, from the core's --ingress-status-address (as Contour).
    load_balancer: Mapping[str, Any] | None = None
    # The status each proxy got last build (kept, or reused, by the next one).
    published: Published | None = None
    memo: Memo = attrs.field(factory=Memo)
    # How many roots the last build built (not replayed): for tests and benchmarks.
    built: int = 0
    # Why the rate limit service could not be used last build ("" when it could): logged on change.
    rate_limit_problem: str = ""

    @classmethod
    def from_config(cls, config: Config) -> HTTPProxyProcessor:
        lb = load_balancer_status(config.option(STATUS_ADDRESS_OPTION.name))
        return cls(config=config, settings=Settings.from_config(config), load_balancer=lb)

    def run(self, dag: DAG, source: SourceView) -> None:
        """One build: roots first (each walking its includes, or replayed), then every proxy's
        status."""
        try:
            self._attach_rate_limit_service(dag, source)
            registry = self._build(dag, source)
            self.published = registry.publish(
                dag,
                clock=self.clock,
                last=self.published,
                changed=self.memo.changed,
                load_balancer=self.load_balancer,
            )
        except BaseException:
            # A half-applied update must not leak into the next build (nor its changes be lost
            # to the statuses published from them): the next build starts from scratch.
            self.memo.reset()
            raise

    def _attach_rate_limit_service(self, dag: DAG, source: SourceView) -> None:
        """The configured rate limit service's upstream, for the filter on every connection manager."""
        settings = self.settings.rate_limit_service
        if settings is None:
            return
        upstream, problem = ratelimit.service_upstream(dag, source, settings)
        if problem != self.rate_limit_problem:
            if problem:
                log.warning("global rate limiting is off: %s", problem)
            else:
                log.info(
                    "global rate limiting uses ExtensionService %s/%s", settings.namespace, settings.name
                )
            self.rate_limit_problem = problem
        if upstream is not None:
            dag.attachments = dag.attachments.set(ratelimit.SERVICE_UPSTREAM, upstream)

    def _build(self, dag: DAG, source: SourceView) -> ProxyRegistry:
        memo = self.memo
        listeners = all(dag.get_listener(name) is not None for name in (HTTP_LISTENER, HTTPS_LISTENER))
        todo = memo.update(source, listeners)
        registry = ProxyRegistry(proxies=memo.proxies)
        claims = memo.claims
        registry.duplicates({fqdn: claims.by_fqdn[fqdn].values() for fqdn in claims.duplicated})
        self.built = 0
        if todo:
            builder = self._root_builder(dag, source, registry)
            for name in todo:
                memo.keep(name, build_root(builder, claims.roots[name], source))
                self.built += 1
        memo.replay.apply(memo.results, registry, dag, claims.non_roots)
        self._global_authorization(dag, source)
        # What the reused results read is what this build depends on, rebuilt or not.
        source.depend_on(memo.reads)
        return registry

    def _global_authorization(self, dag: DAG, source: SourceView) -> None:
        """Contour puts the global ext_authz filter on the plain HTTP listener too; cpx only while
        its ExtensionService is valid (Envoy would refuse a filter on an unknown cluster)."""
        auth = self.settings.global_auth
        listener = dag.get_listener(HTTP_LISTENER)
        if auth is None or listener is None:
            return
        # Errors go to no object: the roots that use the global server report them.
        found = Authorizer(dag, source, auth).resolve(auth, ObjectKey("", "", "", ""), st.ProxyStatus())
        if found is not None:
            listener.attachments = listener.attachments.set(VHOST_AUTHORIZATION, found)

    def _root_builder(self, dag: DAG, source: SourceView, registry: ProxyRegistry) -> RootBuilder:
        return RootBuilder(
            dag,
            source,
            IncludeWalker(
                RootScope(proxies=registry.proxies),
                source,
                self.config,
                extension_services=dag.registries.published_by_any(EXTENSION_UPSTREAMS),
            ),
            root_namespaces=self.settings.root_namespaces,
            fallback_certificate=self.settings.fallback_certificate,
            global_auth=self.settings.global_auth,
            default_global_rate_limit=self.settings.default_global_rate_limit,
        )
