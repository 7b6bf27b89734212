"""IngressProcessor: networking.k8s.io/v1 Ingress → virtual hosts and routes (Contour's ingress_processor.go).

Two passes, as in Contour: first every Ingress's ``tls`` entries create secure virtual hosts (so
the set of TLS hosts is complete), then every rule's paths become routes on ``ingress_http`` and,
when the rule's host is one of those secure hosts, on ``ingress_https`` too.  Where Contour only
logs, cpx also leaves a Note on the Ingress; one bad path, Service or Secret never affects the
other routes.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Iterator, Mapping
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

import attrs
import re2

from cpx import (
    Config,
    DelegationNotEnabledError,
    DelegationNotPermittedError,
    Lookups,
    ObjectKey,
    ReadIndex,
    SecretError,
    ServicePortError,
    SourceView,
    blame,
    lookup_service_port,
)
from cpx.dag import (
    DAG,
    Cluster,
    Note,
    PathKind,
    PathMatch,
    Route,
    Secret,
    SecureVirtualHost,
    TLSParams,
    VirtualHost,
)
from cpx_ingress import status
from cpx_ingress.annotations import IngressAnnotations, unsupported_annotations
from cpx_ingress.kinds import HTTP_LISTENER, HTTPS_LISTENER, INGRESS

# A cross-namespace Secret when no enabled plugin judges such references: not the user's mistake.
DELEGATION_NOT_ENABLED = "TLS certificate delegation is not enabled (the tlsdelegation plugin is not enabled)"

log = logging.getLogger("cpx.ingress")

# An ImplementationSpecific path containing any of these is a regex (Contour's heuristic).
REGEX_CHARS = frozenset("^+*[]%")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a user's bad regex is reported as a Note, not on stderr


class PathError(ValueError):
    """An Ingress path that cannot become a route match."""


def validate_regex(pattern: str) -> None:
    """Raise PathError unless RE2 (Envoy's engine) accepts the pattern; Python's re is not RE2."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as err:
        detail = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else str(err)
        raise PathError(f'invalid regex "{pattern}": {detail}') from None


@functools.lru_cache(maxsize=4096)
def path_match(path: str, path_type: str) -> PathMatch:
    """The route match for an Ingress path and pathType (memoised: Ingresses repeat the same few
    paths, and a regex is checked by RE2 once)."""
    if path_type == "Prefix":
        stripped = path.rstrip("/")
        # "/" alone (all paths) is a plain string prefix; otherwise match whole segments.
        if not stripped:
            return PathMatch(kind=PathKind.PREFIX, value="/")
        return PathMatch(kind=PathKind.SEGMENT_PREFIX, value=stripped)
    if path_type == "Exact":
        return PathMatch(kind=PathKind.EXACT, value=path)
    if path_type == "ImplementationSpecific":
        if REGEX_CHARS.intersection(path):
            validate_regex(path)
            return PathMatch(kind=PathKind.REGEX, value=path)
        return PathMatch(kind=PathKind.PREFIX, value=path)
    raise PathError(f'unsupported pathType "{path_type}"')


@functools.lru_cache(maxsize=4096)
def _match_and_key(path: str, path_type: str) -> tuple[PathMatch, str]:
    """``path_match`` and the match key of a route with only that match (Ingress routes have no
    header or query conditions), memoised together: the key is a string built per call."""
    match = path_match(path, path_type)
    return match, Route(path=match).match_key()


def _mapping(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # the usual case, without the ABC's slower isinstance
        return value
    return value if isinstance(value, Mapping) else {}


def _service_key(backend: Mapping[str, Any]) -> tuple[str, int | str]:
    """(Service name, port name or number) of a path's backend: how its resolved clusters are kept."""
    service = backend.get("service")
    if type(service) is not dict:  # the usual dict skips the call (this runs for every path)
        service = _mapping(service)
    port_spec = service.get("port")
    if type(port_spec) is not dict:
        port_spec = _mapping(port_spec)
    return str(service.get("name") or ""), port_spec.get("name") or port_spec.get("number") or 0


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class IngressPath(NamedTuple):
    """One HTTPIngressPath with its host and where it sits in the Ingress (for Notes).

    Made only for a path that gets a Note (or resolves a Service): a build reads the paths as
    written, and where a path sits is spelled out only for the Note."""

    rule: int  # its rule's index in spec.rules; -1 for spec.defaultBackend
    position: int  # its index in the rule's paths
    host: str  # "" for any host
    path: Mapping[str, Any]

    @property
    def field(self) -> str:
        """E.g. ``spec.rules[0].http.paths[1]``."""
        if self.rule < 0:
            return "spec.defaultBackend"
        return f"spec.rules[{self.rule}].http.paths[{self.position}]"

    @property
    def backend_field(self) -> str:
        """E.g. ``spec.rules[0].http.paths[1].backend``."""
        return "spec.defaultBackend" if self.rule < 0 else f"{self.field}.backend"


def ingress_rules(ingress: Mapping[str, Any]) -> Iterator[tuple[int, str, list[Any]]]:
    """(rule index, host, its paths as written) per rule, the default backend first.

    Contour turns ``spec.defaultBackend`` into a synthetic first rule with no host and one path with
    neither path nor pathType (so: `*`, string prefix `/`); later rules can override it.
    """
    spec = _mapping(ingress.get("spec"))
    if spec.get("defaultBackend") is not None:
        yield -1, "", [{"backend": spec["defaultBackend"]}]
    for i, item in enumerate(_list(spec.get("rules"))):
        rule = _mapping(item)
        yield i, str(rule.get("host") or ""), _list(_mapping(rule.get("http")).get("paths"))


@attrs.frozen(eq=False)
class _Result:
    """What one Ingress contributes to a build, computed from it and what it looked up.

    Replayed unchanged into every build until the Ingress or one of the recorded lookups (its
    Services and Secrets, found or not) changes in the source cache.
    """

    lookups: Lookups  # what computing it read (volatile: something unrecorded, e.g. a secret policy)
    notes: tuple[Note, ...]
    # Pass 1: (host, secret, min TLS version, max TLS version) for every valid spec.tls host.
    tls: tuple[tuple[str, Secret, str, str], ...]
    # Pass 2: (vhost name, match key, HTTP route or None, HTTPS route or None) per path, in order.
    paths: tuple[tuple[str, str, Route | None, Route | None], ...]
    status: dict[str, Any] | None

    def route_hosts(self) -> set[str]:
        return {p[0] for p in self.paths}

    def tls_hosts(self) -> set[str]:
        return {t[0] for t in self.tls}


@attrs.define(eq=False)
class _IngressBuild:
    """One Ingress being translated: the short-lived state Contour keeps on its processor."""

    source: SourceView
    ingress: Mapping[str, Any]
    key: ObjectKey
    annotations: IngressAnnotations
    notes: list[Note]
    # Resolved backends by (Service name, port): an Ingress's paths mostly share a few Services,
    # and a resolved one is the same cluster (and the same warnings) for every path using it.
    resolved: dict[tuple[str, int | str], tuple[Cluster, ...]] = attrs.field(factory=dict)

    @classmethod
    def start(
        cls, source: SourceView, ingress: Mapping[str, Any], key: ObjectKey | None = None
    ) -> _IngressBuild:
        annotations = IngressAnnotations.from_ingress(ingress)
        key = key if key is not None else ObjectKey.of(ingress)
        return cls(source, ingress, key, annotations, list(annotations.problems))

    def note(self, type_: str, reason: str, message: str, severity: str = "error") -> None:
        # The core logs notes (once, when they change) and puts them in status; no log here.
        note = Note(type=type_, reason=reason, message=message, severity=severity)
        if note not in self.notes:  # e.g. one Service behind many paths
            self.notes.append(note)

    # -- pass 1: secure virtual hosts ------------------------------------------------------------
    def secure_virtual_hosts(self) -> list[tuple[str, Secret, str, str]]:
        found: list[tuple[str, Secret, str, str]] = []
        spec = _mapping(self.ingress.get("spec"))
        for i, item in enumerate(_list(spec.get("tls"))):
            tls = _mapping(item)
            hosts = [str(h) for h in _list(tls.get("hosts")) if h and h != "*"]
            if not hosts:
                continue
            field = f"spec.tls[{i}]"
            if not tls.get("secretName"):
                self.note(
                    "TLSError",
                    "SecretNotValid",
                    f"{field}: no secretName; {', '.join(hosts)} served over HTTP only",
                )
                continue
            # networking/v1 refuses a namespace/ in secretName: another namespace is the annotation's.
            namespace = self.annotations.tls_cert_namespace or self.key.namespace
            name = str(tls["secretName"])
            served_http_only = f"{', '.join(hosts)} served over HTTP only"
            try:
                secret = self.source.lookup_tls_secret(namespace, name, self.key)
            except DelegationNotEnabledError:
                self.note(
                    "TLSError",
                    "DelegationNotPermitted",
                    f"{field}.secretName: Secret {namespace}/{name} is in another namespace and "
                    f"{DELEGATION_NOT_ENABLED}; {served_http_only}",
                )
                continue
            except DelegationNotPermittedError:
                self.note(
                    "TLSError",
                    "DelegationNotPermitted",
                    f"{field}.secretName: Secret {namespace}/{name} certificate delegation not permitted; "
                    f"{served_http_only}",
                )
                continue
            except SecretError as err:
                self.note("TLSError", "SecretNotValid", f"{field}.secretName: {err}; {served_http_only}")
                continue
            a = self.annotations
            found.extend((host, secret, a.min_tls_version, a.max_tls_version) for host in hosts)
        return found

    # -- pass 2: routes ----------------------------------------------------------------------------
    def routes(self) -> list[tuple[str, str, Route | None, Route | None]]:
        """(vhost name, match key, HTTP route or None, HTTPS route or None) per servable path.

        Written as one loop with the Ingress's route settings read once: it runs for every path
        of a full build, where calls and attribute reads per path add up."""
        found: list[tuple[str, str, Route | None, Route | None]] = []
        append = found.append
        a = self.annotations
        creates_http_routes = a.creates_http_routes
        https_redirect, websocket_paths = a.force_ssl_redirect, a.websocket_paths
        timeout_policy, retry_policy, origin = a.timeout_policy, a.retry_policy, self.key
        resolved = self.resolved
        for rule, host, paths in ingress_rules(self.ingress):
            # A `*.example.com` vhost matches exactly one label: the core's route translation adds
            # Contour's `:authority` regex to every route of such a vhost, whichever kind made it.
            vhost_name = host or "*"
            for position, item in enumerate(paths):
                path = item if type(item) is dict else _mapping(item)
                value = str(path.get("path") or "/")
                path_type = str(path.get("pathType") or "ImplementationSpecific")
                try:
                    match, match_key = _match_and_key(value, path_type)
                except PathError as err:
                    message = f"{IngressPath(rule, position, host, path).field}: {err}; path not served"
                    self.note("RouteError", "PathMatchConditionsNotValid", message)
                    continue
                backend = path.get("backend")
                if type(backend) is not dict:
                    backend = _mapping(backend)
                # Most paths name a Service an earlier path resolved; `clusters` resolves (and notes)
                # the rest.
                clusters = resolved.get(_service_key(backend))
                if clusters is None:
                    clusters = self.clusters(IngressPath(rule, position, host, path), backend)
                route = Route(
                    path=match,
                    clusters=clusters,
                    https_redirect=https_redirect,
                    websocket=value in websocket_paths,
                    timeout_policy=timeout_policy,
                    retry_policy=retry_policy,
                    origin=origin,
                )
                http_route = route if creates_http_routes else None
                https_route = None
                if vhost_name != "*":
                    # Over TLS already: the HTTPS route proxies even when HTTP redirects.
                    https_route = attrs.evolve(route, https_redirect=False) if https_redirect else route
                append((vhost_name, match_key, http_route, https_route))
        return found

    def clusters(self, item: IngressPath, backend: Mapping[str, Any]) -> tuple[Cluster, ...]:
        """The backend's cluster, or none (the route answers 503) when it cannot be resolved."""
        service = _mapping(backend.get("service"))
        if not service:
            self.note(
                "ServiceError",
                "UnsupportedBackend",
                f"{item.backend_field}: only Service backends are supported; the route answers 503",
            )
            return ()
        name, port = _service_key(backend)
        found = self.resolved.get((name, port))
        if found is not None:
            return found

        def warn(message: str) -> None:
            self.note("ServiceError", "IgnoredAnnotation", message, "warning")

        try:
            upstream = lookup_service_port(
                source=self.source, namespace=self.key.namespace, name=name, port=port, warn=warn
            )
        except ServicePortError as err:
            self.note(
                "ServiceError",
                "ServiceUnresolvedReference",
                f"{item.backend_field}.service: unresolved service reference: {err}; the route answers 503",
            )
            return ()
        clusters = self.resolved[(name, port)] = (Cluster(upstream=upstream),)
        return clusters


@attrs.frozen(eq=False)
class _Host:
    """The merged contribution of every Ingress to one host name, in Ingress order."""

    http: dict[str, Route]  # match key -> route (a later Ingress with the same match wins)
    https: dict[str, Route]
    # From the last Ingress (in (namespace, name) order) with a valid spec.tls entry for the host.
    secret: Secret | None = None
    tls: TLSParams | None = None


@attrs.define(eq=False)
class IngressProcessor:
    """Adds the routes of every accepted Ingress to the static listeners.

    Incremental: each Ingress's contribution (:class:`_Result`) is kept with the lookups it made
    and recomputed only when the Ingress or one of those Services/Secrets changed (the source
    cache's change log says which); per host, the merged routes are kept too and re-merged only
    for the hosts a changed Ingress touches.  Every build still gets fresh, private containers
    (other processors may edit them) holding the same route objects, and the memo's lookups are
    declared again (``depend_on``) so that changes to those Services and Secrets keep triggering
    rebuilds.
    Semantics are Contour's two passes: TLS hosts from every Ingress first, then the routes; a
    later Ingress (by namespace/name) with an identical match overwrites an earlier one.
    """

    load_balancer: Mapping[str, Any] | None = None
    _logged_annotations: dict[ObjectKey, tuple[str, ...]] = attrs.field(factory=dict)
    _source: weakref.ref[SourceView] | None = None
    _revision: int = -1
    _results: dict[ObjectKey, _Result] = attrs.field(factory=dict)
    # What each memoised result read, and the inverse: which Ingresses a change invalidates.
    _reads: ReadIndex = attrs.field(factory=ReadIndex)
    # Host -> Ingresses with paths / valid TLS for it; the merged result per host.
    _route_users: dict[str, set[ObjectKey]] = attrs.field(factory=dict)
    _tls_users: dict[str, set[ObjectKey]] = attrs.field(factory=dict)
    _hosts: dict[str, _Host] = attrs.field(factory=dict)
    # The merged hosts as frozen virtual hosts, installed as they are into every build that has
    # no other processor's hosts: an unchanged host is the same object to the caches each time.
    _plain: dict[str, VirtualHost] = attrs.field(factory=dict)
    _secure: dict[str, SecureVirtualHost] = attrs.field(factory=dict)
    _notes: dict[ObjectKey, tuple[Note, ...]] = attrs.field(factory=dict)
    _statuses: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> IngressProcessor:
        return cls(load_balancer=status.load_balancer_status(config.option("ingress_status_address")))

    def run(self, dag: DAG, source: SourceView) -> None:
        if dag.get_listener(HTTP_LISTENER) is None or dag.get_listener(HTTPS_LISTENER) is None:
            log.error("listeners %s/%s missing: Ingress routes not built", HTTP_LISTENER, HTTPS_LISTENER)
            return
        try:
            self._update(source)
        except BaseException:
            self._reset()  # a half-applied update must not leak into the next build
            raise
        self._install(dag, source)

    # -- keeping the memo current -------------------------------------------------------------
    def _reset(self) -> None:
        self._source, self._revision = None, -1
        for table in (
            self._results,
            self._route_users,
            self._tls_users,
            self._hosts,
            self._plain,
            self._secure,
        ):
            table.clear()
        self._reads.clear()
        self._notes.clear()
        self._statuses.clear()

    def _dirty(self, source: SourceView) -> set[ObjectKey] | None:
        """Ingresses to recompute, or None for all of them."""
        if self._source is None or self._source() is not source:
            return None
        changes = source.changes_since(self._revision)
        if changes is None:
            return None
        dirty = set(self._reads.volatile)
        ingress_kind = INGRESS.group_kind
        for change in changes:
            if change.group_kind == ingress_kind:
                dirty.add(change)
            dirty.update(self._reads.referencing(change))
        return dirty

    def _update(self, source: SourceView) -> None:
        dirty = self._dirty(source)
        revision = source.revision
        if dirty is None:
            self._reset()
            self._source = weakref.ref(source)
            keys = [ObjectKey.of(obj) for obj in source.list(INGRESS)]
        else:
            keys = sorted(dirty, key=_ORDER)
        touched: set[str] = set()
        for key in keys:
            old = self._results.pop(key, None)
            if old is not None:
                self._forget(key, old, touched)
            obj = source.get(key)
            if obj is None:
                self._logged_annotations.pop(key, None)
                continue
            with blame(key):  # one Ingress's crash leaves out that Ingress, not the build
                result = self._compute(obj, key, source)
            self._results[key] = result
            self._remember(key, result, touched)
        new_plain = [host for host in touched if host not in self._plain]
        new_secure = [host for host in touched if host not in self._secure]
        for host in touched:
            self._merge(host)
        if any(host in self._plain for host in new_plain):
            _sorted_by_name(self._plain)
        if any(host in self._secure for host in new_secure):
            _sorted_by_name(self._secure)
        if dirty is None:
            logged = self._logged_annotations
            self._logged_annotations = {k: v for k, v in logged.items() if k in self._results}
        self._revision = revision

    def _compute(self, obj: Mapping[str, Any], key: ObjectKey, source: SourceView) -> _Result:
        names = tuple(unsupported_annotations(obj))
        if names and self._logged_annotations.get(key) != names:
            for name in names:
                log.warning("%s: ignoring invalid or unsupported annotation %s", key, name)
        if names:
            self._logged_annotations[key] = names
        else:
            self._logged_annotations.pop(key, None)
        with source.recording() as lookups:
            build = _IngressBuild.start(source, obj, key)
            tls = build.secure_virtual_hosts()
            paths = build.routes()
        return _Result(
            lookups=lookups,
            notes=tuple(build.notes),
            tls=tuple(tls),
            paths=tuple(paths),
            status=status.computed_status(self.load_balancer) if self.load_balancer is not None else None,
        )

    def _remember(self, key: ObjectKey, result: _Result, touched: set[str]) -> None:
        self._reads.add(key, result.lookups)
        for host in result.route_hosts():
            self._route_users.setdefault(host, set()).add(key)
            touched.add(host)
        for host in result.tls_hosts():
            self._tls_users.setdefault(host, set()).add(key)
            touched.add(host)
        if result.notes:
            self._notes[key] = result.notes
        if result.status is not None:
            self._statuses[key] = result.status

    def _forget(self, key: ObjectKey, result: _Result, touched: set[str]) -> None:
        self._reads.discard(key)
        by_host = ((self._route_users, result.route_hosts()), (self._tls_users, result.tls_hosts()))
        for table, hosts in by_host:
            for host in hosts:
                keys = table.get(host)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del table[host]
                touched.add(host)
        self._notes.pop(key, None)
        self._statuses.pop(key, None)

    def _merge(self, host: str) -> None:
        """Recompute one host from its Ingresses, in (namespace, name) order as Contour does."""
        http: dict[str, Route] = {}
        https: dict[str, Route] = {}
        for key in sorted(self._route_users.get(host, ()), key=_ORDER):
            for vhost_name, match_key, http_route, https_route in self._results[key].paths:
                if vhost_name != host:
                    continue
                if http_route is not None:
                    http[match_key] = http_route
                if https_route is not None:
                    https[match_key] = https_route
        secret = tls = None
        tls_keys = self._tls_users.get(host)
        if tls_keys:
            for entry in self._results[max(tls_keys, key=_ORDER)].tls:
                if entry[0] == host:
                    secret, tls = entry[1], _tls_params(entry[2], entry[3])
        if not (http or https or secret):
            self._hosts.pop(host, None)
            self._plain.pop(host, None)
            self._secure.pop(host, None)
            return
        merged = self._hosts[host] = _Host(http=http, https=https, secret=secret, tls=tls)
        self._freeze(host, merged)

    def _freeze(self, host: str, merged: _Host) -> None:
        """Keep the host's virtual hosts, frozen (a changed host keeps its place in the dicts)."""
        if merged.http:
            self._plain[host] = VirtualHost(host, merged.http).freeze()
        else:
            self._plain.pop(host, None)
        if merged.secret is not None:
            tls = merged.tls or TLSParams()
            secure = SecureVirtualHost(host, merged.https, secret=merged.secret, tls=tls)
            self._secure[host] = secure.freeze()
        else:
            self._secure.pop(host, None)

    # -- filling this build's DAG ------------------------------------------------------------------
    def _install(self, dag: DAG, source: SourceView) -> None:
        http_listener, https_listener = dag.listeners[HTTP_LISTENER], dag.listeners[HTTPS_LISTENER]
        # What the memoised results read is what this build depends on, recomputed or not.
        source.depend_on(self._reads)
        if http_listener.virtual_hosts or https_listener.secure_virtual_hosts:
            self._install_merging(dag)
        else:
            dag.add_virtual_hosts(HTTP_LISTENER, self._plain)
            dag.add_secure_virtual_hosts(HTTPS_LISTENER, self._secure)
        for key, notes in self._notes.items():
            dag.notes.setdefault(key, []).extend(notes)
        dag.statuses.update((key, value) for key, value in self._statuses.items())

    def _install_merging(self, dag: DAG) -> None:
        """An earlier processor already made virtual hosts: add to them as Contour's passes do."""
        for host, merged in self._hosts.items():
            if merged.secret is not None:
                svhost = dag.ensure_secure_virtual_host(HTTPS_LISTENER, host)
                svhost.secret = merged.secret
                assert merged.tls is not None
                svhost.tls = attrs.evolve(
                    svhost.tls, min_version=merged.tls.min_version, max_version=merged.tls.max_version
                )
        for host, merged in self._hosts.items():
            if merged.http:
                vhost = dag.ensure_virtual_host(HTTP_LISTENER, host)
                vhost.routes.update(merged.http)
            secure = dag.get_secure_virtual_host(HTTPS_LISTENER, host)
            if secure is not None and host != "*":
                secure.routes.update(merged.https)


def _sorted_by_name(hosts: dict[str, _V]) -> None:
    """Put ``hosts`` in name order, the DAG's: its sort then finds them sorted (in linear time).
    A changed host keeps its place in a dict, so only new hosts call for this."""
    ordered = sorted(hosts.items())
    hosts.clear()
    hosts.update(ordered)


_V = TypeVar("_V", bound=VirtualHost)

# Ingress order (namespace, name) as a C-comparable tuple: ObjectKey's own ordering is Python code.
_ORDER = attrgetter("namespace", "name")
_TLS_PARAMS: dict[tuple[str, str], TLSParams] = {}


def _tls_params(min_version: str, max_version: str) -> TLSParams:
    """Shared TLSParams values, so that unchanged hosts hand the same object to LDS."""
    found = _TLS_PARAMS.get((min_version, max_version))
    if found is None:
        found = _TLS_PARAMS[(min_version, max_version)] = TLSParams(
            min_version=min_version, max_version=max_version
        )
    return found
