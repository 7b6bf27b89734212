"""The SRDS cache: the scopes of the scoped route shape (:mod:`cpx.xds.envoy.scoped`).

Per listener with plain virtual hosts: one ScopedRouteConfiguration per exact host, keyed
``<listener>/<host>`` and naming the host's RouteConfiguration ``<listener>/<fqdn>``, and one for
the listener's wildcard and default hosts, keyed ``<listener>/*`` and naming ``<listener>``.  The
RDS cache (:mod:`cpx.xds.caches.routes`) publishes those RouteConfigurations from the same DAG.
With ``--route-shape single`` there are no scopes.

A scope depends on nothing but two names, so each is built once and kept while its host exists.
"""

from __future__ import annotations

from collections.abc import Mapping

from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.xds import resource
from cpx.xds.caches.routes import HTTP_ROUTE_CONFIG
from cpx.xds.envoy.common import embedded
from cpx.xds.envoy.scoped import FALLBACK_KEY, host_route_config_name, is_exact, scope_key
from cpx.xds.resource import Resource, content_version

_ScopeId = tuple[str, str]  # route config name, key


class ScopeCache:
    type_url = resource.SCOPED_ROUTE

    def __init__(self, config: Config) -> None:
        self.scoped = config.route_shape == "scoped"
        self._resources: dict[str, Resource] = {}
        self._built: dict[_ScopeId, Resource] = {}
        self._names: dict[str, list[str]] | None = None  # per listener, its virtual host names
        self._mixed_case: set[str] = set()  # the listeners with a host name not in lower case

    def contents(self) -> Mapping[str, Resource]:
        return self._resources

    def on_change(self, dag: DAG) -> None:
        if not self.scoped:
            return
        # The hosts of each listener (compared in C): unchanged hosts, unchanged scopes.  The
        # names in order first: mostly the very same strings, cheaper than building sets.
        names = {name: list(listener.virtual_hosts) for name, listener in dag.listeners.items()}
        previous, self._names = self._names, names
        if names == previous:
            return
        if previous is None or names.keys() != previous.keys():
            self._rebuild(dag)
            return
        hosts = {name: set(fqdns) for name, fqdns in names.items()}
        before = {name: set(fqdns) for name, fqdns in previous.items()}
        came: list[tuple[str, str]] = []
        went: list[tuple[str, str]] = []
        for name, keys in hosts.items():
            if keys != before[name]:
                came += ((name, fqdn) for fqdn in keys - before[name])
                went += ((name, fqdn) for fqdn in before[name] - keys)
        if not (came or went):
            return
        if (
            any(fqdn != fqdn.lower() for _, fqdn in came)
            or any(name in self._mixed_case for name, _ in came + went)
            or any(not before[name] for name, _ in came)
            or any(not hosts[name] for name, _ in went)
        ):
            # Hosts differing in case only share a scope; a listener's first plain host brings its
            # fallback scope, its last one takes it away.
            self._rebuild(dag)
            return
        built, resources = dict(self._built), dict(self._resources)
        for name, fqdn in went:
            if is_exact(fqdn):
                ident = self._ident(dag, name, fqdn)
                del resources[built.pop(ident).name]
        for name, fqdn in came:
            if is_exact(fqdn):
                ident = self._ident(dag, name, fqdn)
                res = built[ident] = self._scope(ident)
                resources[res.name] = res
        self._built, self._resources = built, resources

    def _rebuild(self, dag: DAG) -> None:
        wanted: dict[_ScopeId, None] = {(HTTP_ROUTE_CONFIG, f"{HTTP_ROUTE_CONFIG}/{FALLBACK_KEY}"): None}
        for listener in dag.listeners.values():
            if not listener.virtual_hosts:
                continue
            base = listener.http_route_config_name()
            wanted[(base, f"{base}/{FALLBACK_KEY}")] = None
            for fqdn in listener.virtual_hosts:
                if is_exact(fqdn):
                    wanted[(host_route_config_name(base, fqdn), scope_key(base, fqdn))] = None
        self._mixed_case = {
            listener.name
            for listener in dag.listeners.values()
            if any(f != f.lower() for f in listener.virtual_hosts)
        }
        built, previous = {}, self._built
        keys: set[str] = set()
        for ident in wanted:
            if ident[1] in keys:
                continue  # two hosts differing in case only: the RDS cache reports the clash
            keys.add(ident[1])
            res = previous.get(ident)
            built[ident] = res if res is not None else self._scope(ident)
        self._built = built
        resources = {res.name: res for res in built.values()}
        if resources != self._resources:
            self._resources = resources

    @staticmethod
    def _ident(dag: DAG, listener: str, fqdn: str) -> _ScopeId:
        base = dag.listeners[listener].http_route_config_name()
        return (host_route_config_name(base, fqdn), scope_key(base, fqdn))

    def _scope(self, ident: _ScopeId) -> Resource:
        name = ident[0]
        body = scope_body(name, name, ident[1])
        return Resource(name, self.type_url, body, content_version(body))


def scope_body(name: str, route_config: str, key: str) -> bytes:
    """``scope(name, route_config, key)`` serialised, concatenated rather than built: a start-up
    makes one per host, and three nested messages cost more than their bytes."""
    fragment = embedded(_STRING_KEY, key.encode())  # a oneof member: written even when empty
    return b"".join(
        (
            _string(_NAME, name),
            _string(_ROUTE_CONFIGURATION_NAME, route_config),
            embedded(_KEY, embedded(_FRAGMENTS, fragment)),  # messages are written even when empty
        )
    )


def _string(number: int, value: str) -> bytes:
    """A string field as deterministic serialisation writes it: absent when empty."""
    return embedded(number, value.encode()) if value else b""


# Field numbers of ScopedRouteConfiguration, its Key and the Key's Fragment.
_NAME, _ROUTE_CONFIGURATION_NAME, _KEY = 1, 2, 3
_FRAGMENTS = 1
_STRING_KEY = 1
