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
from cpx.xds.envoy.scoped import FALLBACK_KEY, host_route_config_name, is_exact, scope, scope_key
from cpx.xds.resource import Resource

_ScopeId = tuple[str, str]  # route config name, key


class ScopeCache:
    type_url = resource.SCOPED_ROUTE

    def __init__(self, config: Config) -> None:
        self.scoped = config.route_shape == "scoped"
        self._resources: dict[str, Resource] = {}
        self._built: dict[_ScopeId, Resource] = {}
        self._hosts: dict[str, set[str]] | None = None  # per listener, its virtual host names

    def contents(self) -> Mapping[str, Resource]:
        return self._resources

    def on_change(self, dag: DAG) -> None:
        if not self.scoped:
            return
        # The hosts of each listener (set comparison in C): unchanged hosts, unchanged scopes.
        hosts = {name: listener.virtual_hosts.keys() for name, listener in dag.listeners.items()}
        before = self._hosts
        self._hosts = {name: set(keys) for name, keys in hosts.items()}
        if before is not None and hosts.keys() == before.keys() and all(hosts[n] == before[n] for n in hosts):
            return
        wanted: dict[_ScopeId, None] = {(HTTP_ROUTE_CONFIG, f"{HTTP_ROUTE_CONFIG}/{FALLBACK_KEY}"): None}
        for listener in dag.listeners.values():
            if not listener.virtual_hosts:
                continue
            base = listener.http_route_config_name()
            wanted[(base, f"{base}/{FALLBACK_KEY}")] = None
            for fqdn in listener.virtual_hosts:
                if is_exact(fqdn):
                    wanted[(host_route_config_name(base, fqdn), scope_key(base, fqdn))] = None
        built, previous = {}, self._built
        keys: set[str] = set()
        for ident in wanted:
            if ident[1] in keys:
                continue  # two hosts differing in case only: the RDS cache reports the clash
            keys.add(ident[1])
            res = previous.get(ident)
            if res is None:
                name = ident[0]
                res = Resource.from_message(name, self.type_url, scope(name, name, ident[1]))
            built[ident] = res
        self._built = built
        resources = {res.name: res for res in built.values()}
        if resources != self._resources:
            self._resources = resources
