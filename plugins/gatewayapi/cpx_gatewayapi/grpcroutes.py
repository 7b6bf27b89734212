"""GRPCRoutes: attachment to Gateway listeners, translation to virtual hosts and routes, status.

They attach as HTTPRoutes do (:mod:`cpx_gatewayapi.routeparents`, the same hostname intersection
and listener isolation) and their rules become routes through :mod:`cpx_gatewayapi.routebuild`
(method matches are path matches, backends speak HTTP/2).  They run after the HTTPRoutes: a
virtual host an HTTPRoute already serves is not merged with gRPC rules (the spec forbids merging
the two kinds), so the GRPCRoute's matches there count as conflicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from cpx import ObjectKey, SourceView, blame
from cpx.dag import DAG, VirtualHost

from cpx_gatewayapi import hostnames, routebuild, routeparents, routestatus, status
from cpx_gatewayapi.kinds import GRPCROUTE
from cpx_gatewayapi.model import GRPCROUTE_KIND, HTTPROUTE_KIND, Attachments, GatewayListener, Resolution
from cpx_gatewayapi.settings import Settings


@attrs.frozen
class _Build:
    """What every GRPCRoute of one build is attached with."""

    dag: DAG
    source: SourceView
    resolution: Resolution
    attachments: Attachments
    settings: Settings
    owners: Mapping[str, Sequence[str | None]]  # per DAG listener, its Gateway listeners' hostnames
    # Per (DAG listener, host, secure), whether HTTPRoutes serve it: they are all placed before
    # the first GRPCRoute, so the answer never changes in a build (looked at once per host).
    http_hosts: dict[tuple[str, str, bool], bool] = attrs.field(factory=dict)


def apply(
    dag: DAG, source: SourceView, resolution: Resolution, attachments: Attachments, settings: Settings
) -> None:
    """Attach every GRPCRoute to the listeners it selects and admits it, add its routes to their
    DAG listeners, count it in ``attachments``, and set its status (``status.parents``)."""
    routes = sorted(source.list(GRPCROUTE), key=routeparents.age)
    if not routes:
        return
    build = _Build(dag, source, resolution, attachments, settings, routeparents.port_hostnames(resolution))
    for rank, obj in enumerate(routes):
        key = ObjectKey.of(obj)
        with blame(key):
            _apply_route(build, obj, key, rank)


def _apply_route(build: _Build, obj: Mapping[str, Any], key: ObjectKey, rank: int) -> None:
    dag, spec = build.dag, obj.get("spec") or {}
    parents = list(routeparents.parents(spec, key.namespace, build.resolution))
    if not parents:
        # None of ours: no entry from us; entries we wrote before go (the merge drops them).
        if status.has_parents_of(obj, build.settings.controller_name):
            dag.set_status(key, status.route_status(()))
        return
    route_hostnames = [str(h) for h in spec.get("hostnames") or () if isinstance(h, str)]
    labels = routeparents.namespace_labels(build.source, key.namespace)
    attached = [
        routeparents.attach(GRPCROUTE_KIND, ref, gateway, key.namespace, labels, route_hostnames)
        for ref, gateway in parents
    ]
    built = routebuild.translate(build.source, obj, key, rank)
    conflicts = 0
    served: set[tuple[str, str, bool, str]] = set()
    if not built.all_dropped:
        for parent in attached:
            for listener, hosts in parent.listeners:
                build.attachments.add(listener)
                conflicts += _serve(build, listener, hosts, built, key, served)
    dag.set_status(key, routestatus.route_status(obj, attached, built, conflicts, served))


def _serve(
    build: _Build,
    listener: GatewayListener,
    hosts: Sequence[str],
    built: routebuild.Translated,
    key: ObjectKey,
    served: set[tuple[str, str, bool, str]],
) -> int:
    """Add the route's rules to ``listener``'s virtual hosts; the number of matches left out
    because another route (or an HTTPRoute on the same host) already has them."""
    dag, owners = build.dag, build.owners
    if listener.dag_listener is None:
        return 0
    mine = listener.hostname or hostnames.ANY
    secure = listener.protocol == "HTTPS"
    routes = [route for rule in built.rules for route in rule.routes]
    conflicts = 0
    for host in hosts:
        if hostnames.owner(owners[listener.dag_listener], host) != mine:
            continue  # a more specific listener on this port owns the name
        if _served_by_httproutes(build, listener.dag_listener, host, secure):
            conflicts += len(routes)
            continue
        vhost = _ensure(dag, listener, host, secure)
        for route in routes:
            match = route.match_key()
            seen = (listener.dag_listener, host, secure, match)
            if seen in served:
                continue  # this route, through another parentRef or listener
            other = vhost.routes.get(match)
            if other is not None and other.origin != key:
                conflicts += 1
                continue
            served.add(seen)
            vhost.routes[match] = route
    return conflicts


def _ensure(dag: DAG, listener: GatewayListener, host: str, secure: bool) -> VirtualHost:
    assert listener.dag_listener is not None
    vhost: VirtualHost
    if secure:
        vhost = dag.ensure_secure_virtual_host(listener.dag_listener, host)
        if vhost.secret is None:  # a host another object serves keeps its certificate
            vhost.secret = listener.secret
            vhost.authority_check = listener.authority_check
    else:
        vhost = dag.ensure_virtual_host(listener.dag_listener, host)
    if host.startswith("*."):
        vhost.single_label_wildcard = False
    return vhost


def _served_by_httproutes(build: _Build, dag_listener: str, host: str, secure: bool) -> bool:
    key = (dag_listener, host, secure)
    found = build.http_hosts.get(key)
    if found is None:
        dag = build.dag
        vhost = (
            dag.get_secure_virtual_host(dag_listener, host)
            if secure
            else dag.get_virtual_host(dag_listener, host)
        )
        routes = vhost.routes.values() if vhost is not None else ()
        found = build.http_hosts[key] = any(
            r.origin is not None and r.origin.kind == HTTPROUTE_KIND for r in routes
        )
    return found
