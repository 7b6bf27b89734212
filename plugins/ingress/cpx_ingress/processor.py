"""IngressProcessor: networking.k8s.io/v1 Ingress → virtual hosts and routes (Contour's ingress_processor.go).

Two passes, as in Contour: first every Ingress's ``tls`` entries create secure virtual hosts (so
the set of TLS hosts is complete), then every rule's paths become routes on ``ingress_http`` and,
when the rule's host is one of those secure hosts, on ``ingress_https`` too.  Where Contour only
logs, cpx also leaves a Note on the Ingress; one bad path, Service or Secret never affects the
other routes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import re2
from cpx.config import Config
from cpx.dag.dag import DAG, Note
from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route
from cpx.objects import ObjectKey
from cpx.servicecluster import ServicePortError, lookup_service_port
from cpx.source import SourceCache
from cpx.tlsutil import SecretError

from cpx_ingress import status
from cpx_ingress.annotations import IngressAnnotations, unsupported_annotations
from cpx_ingress.kinds import HTTP_LISTENER, HTTPS_LISTENER, INGRESS

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


def path_match(path: str, path_type: str) -> PathMatch:
    """The route match for an Ingress path and pathType."""
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


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@attrs.frozen(kw_only=True)
class IngressPath:
    """One HTTPIngressPath with its host and where it sits in the Ingress (for Notes)."""

    field: str  # e.g. spec.rules[0].http.paths[1]
    backend_field: str  # e.g. spec.rules[0].http.paths[1].backend
    host: str  # "" for any host
    path: Mapping[str, Any]


def ingress_paths(ingress: Mapping[str, Any]) -> Iterator[IngressPath]:
    """Every path of an Ingress, the default backend first.

    Contour turns ``spec.defaultBackend`` into a synthetic first rule with no host and one path with
    neither path nor pathType (so: `*`, string prefix `/`); later rules can override it.
    """
    spec = _mapping(ingress.get("spec"))
    if spec.get("defaultBackend") is not None:
        field = "spec.defaultBackend"
        yield IngressPath(field=field, backend_field=field, host="", path={"backend": spec["defaultBackend"]})
    for i, item in enumerate(_list(spec.get("rules"))):
        rule = _mapping(item)
        host = str(rule.get("host") or "")
        for j, path in enumerate(_list(_mapping(rule.get("http")).get("paths"))):
            field = f"spec.rules[{i}].http.paths[{j}]"
            yield IngressPath(field=field, backend_field=f"{field}.backend", host=host, path=_mapping(path))


@attrs.define(eq=False)
class _IngressBuild:
    """One Ingress during one build: the short-lived state Contour keeps on its processor."""

    dag: DAG
    source: SourceCache
    ingress: Mapping[str, Any]
    key: ObjectKey
    annotations: IngressAnnotations

    @classmethod
    def start(cls, dag: DAG, source: SourceCache, ingress: Mapping[str, Any]) -> _IngressBuild:
        build = cls(dag, source, ingress, ObjectKey.of(ingress), IngressAnnotations.from_ingress(ingress))
        for note in build.annotations.problems:
            dag.add_note(build.key, note)
        return build

    def note(self, type_: str, reason: str, message: str, severity: str = "error") -> None:
        # The core logs notes (once, when they change) and puts them in status; no log here.
        note = Note(type=type_, reason=reason, message=message, severity=severity)
        if note not in self.dag.notes.get(self.key, ()):  # e.g. one Service behind many paths
            self.dag.add_note(self.key, note)

    # -- pass 1: secure virtual hosts ------------------------------------------------------------
    def secure_virtual_hosts(self) -> None:
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
            namespace = self.annotations.tls_cert_namespace or self.key.namespace
            name = str(tls["secretName"])
            try:
                secret = self.source.lookup_tls_secret(namespace, name, self.key)
            except SecretError as err:
                delegated = namespace == self.key.namespace or self.source.secret_policy(
                    namespace, name, self.key, self.source
                )
                self.note(
                    "TLSError",
                    "SecretNotValid" if delegated else "DelegationNotPermitted",
                    f"{field}.secretName: {err}; {', '.join(hosts)} served over HTTP only",
                )
                continue
            for host in hosts:
                svhost = self.dag.ensure_secure_virtual_host(HTTPS_LISTENER, host)
                svhost.secret = secret
                svhost.tls = attrs.evolve(
                    svhost.tls,
                    min_version=self.annotations.min_tls_version,
                    max_version=self.annotations.max_tls_version,
                )

    # -- pass 2: routes ----------------------------------------------------------------------------
    def routes(self) -> None:
        for item in ingress_paths(self.ingress):
            route = self.route(item)
            if route is None:
                continue
            # A `*.example.com` vhost matches exactly one label: the core's route translation adds
            # Contour's `:authority` regex to every route of such a vhost, whichever kind made it.
            vhost_name = item.host or "*"
            if self.annotations.creates_http_routes:
                self.dag.ensure_virtual_host(HTTP_LISTENER, vhost_name).add_route(route)
            # Pass 1 created a secure vhost for this host only if it has a valid Secret.
            svhost = self.dag.get_secure_virtual_host(HTTPS_LISTENER, vhost_name)
            if svhost is not None and vhost_name != "*":
                # Over TLS already: the HTTPS route proxies even when HTTP redirects.
                svhost.add_route(attrs.evolve(route, https_redirect=False))

    def route(self, item: IngressPath) -> Route | None:
        value = str(item.path.get("path") or "/")
        path_type = str(item.path.get("pathType") or "ImplementationSpecific")
        try:
            match = path_match(value, path_type)
        except PathError as err:
            self.note("RouteError", "PathMatchConditionsNotValid", f"{item.field}: {err}; path not served")
            return None
        a = self.annotations
        return Route(
            path=match,
            clusters=self.clusters(item.backend_field, _mapping(item.path.get("backend"))),
            https_redirect=a.force_ssl_redirect,
            websocket=value in a.websocket_paths,
            timeout_policy=a.timeout_policy,
            retry_policy=a.retry_policy,
            origin=str(self.key),
        )

    def clusters(self, field: str, backend: Mapping[str, Any]) -> tuple[Cluster, ...]:
        """The backend's cluster, or none (the route answers 503) when it cannot be resolved."""
        service = _mapping(backend.get("service"))
        if not service:
            self.note(
                "ServiceError",
                "UnsupportedBackend",
                f"{field}: only Service backends are supported; the route answers 503",
            )
            return ()
        port_spec = _mapping(service.get("port"))
        port: int | str = port_spec.get("name") or port_spec.get("number") or 0
        name = str(service.get("name") or "")

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
                f"{field}.service: unresolved service reference: {err}; the route answers 503",
            )
            return ()
        return (Cluster(upstream=upstream),)


@attrs.define(eq=False)
class IngressProcessor:
    """Adds the routes of every accepted Ingress to the static listeners.

    Holds only configuration and a memo of which unsupported annotations were already logged;
    everything about one build lives in that build's ``_IngressBuild`` objects.
    """

    load_balancer: Mapping[str, Any] | None = None
    _logged_annotations: dict[ObjectKey, tuple[str, ...]] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> IngressProcessor:
        return cls(load_balancer=status.load_balancer_status(config.option("ingress_status_address")))

    def run(self, dag: DAG, source: SourceCache) -> None:
        if dag.get_listener(HTTP_LISTENER) is None or dag.get_listener(HTTPS_LISTENER) is None:
            log.error("listeners %s/%s missing: Ingress routes not built", HTTP_LISTENER, HTTPS_LISTENER)
            return
        ingresses = list(source.list(INGRESS))
        self._log_unsupported_annotations(ingresses)
        builds = [_IngressBuild.start(dag, source, ingress) for ingress in ingresses]
        for build in builds:
            build.secure_virtual_hosts()
        for build in builds:
            build.routes()
        if self.load_balancer is not None:
            for build in builds:
                dag.set_status(build.key, status.computed_status(self.load_balancer))

    def _log_unsupported_annotations(self, ingresses: Sequence[Mapping[str, Any]]) -> None:
        """Log each object's unsupported annotations once (again only when they change)."""
        seen: dict[ObjectKey, tuple[str, ...]] = {}
        for ingress in ingresses:
            key = ObjectKey.of(ingress)
            names = tuple(unsupported_annotations(ingress))
            seen[key] = names
            if names and self._logged_annotations.get(key) != names:
                for name in names:
                    log.warning("%s: ignoring invalid or unsupported annotation %s", key, name)
        self._logged_annotations = {k: v for k, v in seen.items() if v}
