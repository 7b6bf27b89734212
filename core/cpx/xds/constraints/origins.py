"""Which source objects fed each xDS resource of a DAG: to attribute faults and NACKs to them.

Routes know their origin exactly; a cluster is fed by its Service and by the routes that use it;
a RouteConfiguration or a Listener by everything in it; a secret by its Secret; endpoints by the
Service and its EndpointSlices.  Computed on demand (a NACK, a resource that breaks Envoy's rules),
never on the hot path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cpx.dag.dag import DAG, Listener, VirtualHost
from cpx.dag.nodes import Cluster, CustomNode, Route
from cpx.objects import ObjectKey
from cpx.sources.cache import SourceCache
from cpx.xds import resource
from cpx.xds.caches.clusters import cds_shape
from cpx.xds.caches.routes import FALLBACK_ROUTE_CONFIG
from cpx.xds.envoy.scoped import host_route_config_name, is_exact
from cpx.xds.naming import cluster_name, secret_name

Origins = dict[str, set[ObjectKey]]


def service_key(namespace: str, name: str) -> ObjectKey:
    return ObjectKey("", "Service", namespace, name)


def secret_key(namespace: str, name: str) -> ObjectKey:
    return ObjectKey("", "Secret", namespace, name)


def _route_origins(routes: Iterable[Route]) -> set[ObjectKey]:
    return {route.origin for route in routes if route.origin is not None}


def _vhost_origins(vhosts: Iterable[VirtualHost]) -> set[ObjectKey]:
    found: set[ObjectKey] = set()
    for vhost in vhosts:
        found |= _route_origins(vhost.routes.values())
    return found


def _listener_origins(listener: Listener) -> set[ObjectKey]:
    found = _vhost_origins(listener.virtual_hosts.values()) | _vhost_origins(
        listener.secure_virtual_hosts.values()
    )
    for vhost in listener.secure_virtual_hosts.values():
        for secret in vhost.referenced_secrets():
            found.add(secret_key(secret.namespace, secret.name))
    return found


def _cluster_users(dag: DAG) -> dict[Cluster, set[ObjectKey]]:
    users: dict[Cluster, set[ObjectKey]] = {}
    for listener in dag.listeners.values():
        for vhosts in (listener.virtual_hosts, listener.secure_virtual_hosts):
            for vhost in vhosts.values():
                for route in vhost.routes.values():
                    used = [*route.clusters, *(mirror.cluster for mirror in route.mirrors)]
                    for cluster in used:
                        found = users.setdefault(cluster, set())
                        if route.origin is not None:
                            found.add(route.origin)
    return users


def _add_node_origins(out: Origins, nodes: Iterable[CustomNode]) -> None:
    """Plugins' own nodes are named after their resource and know their origin."""
    for node in nodes:
        found = out.setdefault(node.name, set())
        if node.origin is not None:
            found.add(node.origin)


def resource_origins(dag: DAG, source: SourceCache | None, type_url: str) -> Origins:
    """Resource name -> the objects that fed it, for the core's resource types."""
    of_type = _ORIGINS_BY_TYPE.get(type_url)
    return of_type(dag, source) if of_type is not None else {}


def _route_config_origins(dag: DAG, source: SourceCache | None) -> Origins:
    out: Origins = {}
    for listener in dag.listeners.values():
        if listener.virtual_hosts:
            name = listener.http_route_config_name()
            out.setdefault(name, set()).update(_vhost_origins(listener.virtual_hosts.values()))
            # The scoped route shape: each exact host's own RouteConfiguration (and scope).
            for vhost in listener.virtual_hosts.values():
                if is_exact(vhost.name):
                    own = host_route_config_name(name, vhost.name)
                    out.setdefault(own, set()).update(_vhost_origins([vhost]))
        for vhost in listener.secure_virtual_hosts.values():
            found = _route_origins(vhost.routes.values())
            out.setdefault(listener.secure_route_config_name(vhost.name), set()).update(found)
            if vhost.through_fallback():
                out.setdefault(FALLBACK_ROUTE_CONFIG, set()).update(found)
    return out


def _listener_resource_origins(dag: DAG, source: SourceCache | None) -> Origins:
    out = {listener.name: _listener_origins(listener) for listener in dag.listeners.values()}
    _add_node_origins(out, dag.listener_nodes())
    return out


def _secret_origins(dag: DAG, source: SourceCache | None) -> Origins:
    return {secret_name(secret): {secret_key(secret.namespace, secret.name)} for secret in dag.secrets()}


def _cluster_origins(dag: DAG, source: SourceCache | None) -> Origins:
    out: Origins = {}
    users = _cluster_users(dag)
    for cluster in dag.unique_clusters():
        up = cluster.upstream
        found = out.setdefault(cluster_name(cds_shape(cluster)), set())
        found.add(service_key(up.namespace, up.name))
        found |= users.get(cluster, set())
    _add_node_origins(out, dag.cluster_nodes())
    return out


def _endpoint_origins(dag: DAG, source: SourceCache | None) -> Origins:
    out: Origins = {}
    for cluster in dag.unique_clusters():
        up = cluster.upstream
        found = out.setdefault(up.eds_name, {service_key(up.namespace, up.name)})
        if source is not None:
            found.update(ObjectKey.of(s) for s in source.endpoint_slices(up.namespace, up.name))
    return out


_ORIGINS_BY_TYPE: dict[str, Callable[[DAG, SourceCache | None], Origins]] = {
    resource.ROUTE: _route_config_origins,
    resource.SCOPED_ROUTE: _route_config_origins,  # a scope is named after its RouteConfiguration
    resource.LISTENER: _listener_resource_origins,
    resource.SECRET: _secret_origins,
    resource.CLUSTER: _cluster_origins,
    resource.ENDPOINT: _endpoint_origins,
}
