"""HTTPRoutes: attachment to Gateway listeners, translation to virtual hosts and routes, status.

Per parentRef (gateway.networking.k8s.io route status steps): the listeners it selects (sectionName
and/or port, else NoMatchingParent), those admitting the kind and the route's namespace (else
NotAllowedByListeners), those whose hostnames intersect the route's (else
NoMatchingListenerHostname).  Each listener left counts the route (``attachedRoutes``, programmed
or not) and, when programmed, serves its rules on a virtual host per effective hostname.  A broad
listener (wildcard or no hostname) leaves the hostnames a more specific listener on the same port
owns to that listener's routes (listener isolation, Contour's computeHosts).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from cpx import ObjectKey, SourceView, blame
from cpx.dag import DAG, Route, VirtualHost

from cpx_gatewayapi import hostnames, routebuild, routeparents, routestatus, status
from cpx_gatewayapi.kinds import HTTPROUTE
from cpx_gatewayapi.model import HTTPROUTE_KIND, Attachments, GatewayListener, Resolution
from cpx_gatewayapi.settings import Settings


@attrs.frozen
class _Build:
    """What every route of one build is attached with."""

    dag: DAG
    source: SourceView
    resolution: Resolution
    attachments: Attachments
    settings: Settings
    owners: Mapping[str, Sequence[str | None]]  # per DAG listener, its Gateway listeners' hostnames


def apply(
    dag: DAG, source: SourceView, resolution: Resolution, attachments: Attachments, settings: Settings
) -> None:
    """Attach every HTTPRoute to the listeners it selects and admits it, add its routes to their
    DAG listeners, count it in ``attachments``, and set its status (``status.parents``)."""
    build = _Build(dag, source, resolution, attachments, settings, _port_hostnames(resolution))
    for rank, obj in enumerate(_by_age(source.list(HTTPROUTE))):
        key = ObjectKey.of(obj)
        with blame(key):
            _apply_route(build, obj, key, rank)


def _apply_route(build: _Build, obj: Mapping[str, Any], key: ObjectKey, rank: int) -> None:
    spec = obj.get("spec") or {}
    parents = list(routeparents.parents(spec, key.namespace, build.resolution))
    if not parents:
        # None of ours: no entry from us; entries we wrote before go (the merge drops them).
        if status.has_parents_of(obj, build.settings.controller_name):
            build.dag.set_status(key, status.route_status(()))
        return
    route_hostnames = [str(h) for h in spec.get("hostnames") or () if isinstance(h, str)]
    labels = routeparents.namespace_labels(build.source, key.namespace)
    attached = [
        routeparents.attach(HTTPROUTE_KIND, ref, gateway, key.namespace, labels, route_hostnames)
        for ref, gateway in parents
    ]
    built = routebuild.translate(build.source, obj, key, rank)
    conflicts = 0
    served: set[tuple[str, str, bool, str]] = set()
    if not built.all_dropped:
        for parent in attached:
            for listener, hosts in parent.listeners:
                build.attachments.add(listener)
                conflicts += _serve(build.dag, listener, hosts, build.owners, built, key, served)
    build.dag.set_status(key, routestatus.route_status(obj, attached, built, conflicts, served))


def _serve(
    dag: DAG,
    listener: GatewayListener,
    hosts: Sequence[str],
    owners: Mapping[str, Sequence[str | None]],
    built: routebuild.Translated,
    key: ObjectKey,
    served: set[tuple[str, str, bool, str]],
) -> int:
    """Add the route's rules to ``listener``'s virtual hosts; the number of matches left out
    because another object's route already has them."""
    if listener.dag_listener is None:
        return 0
    mine = listener.hostname or hostnames.ANY
    secure = listener.protocol == "HTTPS"
    conflicts = 0
    for host in hosts:
        if hostnames.owner(owners[listener.dag_listener], host) != mine:
            continue  # a more specific listener on this port owns the name
        vhost: VirtualHost
        if secure:
            vhost = dag.ensure_secure_virtual_host(listener.dag_listener, host)
            if vhost.secret is None:  # a host another object serves keeps its certificate
                vhost.secret = listener.secret
        else:
            vhost = dag.ensure_virtual_host(listener.dag_listener, host)
        if host.startswith("*."):
            vhost.single_label_wildcard = False
        for route in _routes(built, listener):
            match = route.match_key()
            seen = (listener.dag_listener, host, secure, match)
            existing = vhost.routes.get(match)
            if seen in served:
                continue  # this route, through another parentRef or listener
            if existing is not None and existing.origin != key:
                conflicts += 1
                continue
            served.add(seen)
            vhost.routes[match] = route
    return conflicts


def _routes(built: routebuild.Translated, listener: GatewayListener) -> Iterator[Route]:
    for rule in built.rules:
        if not rule.redirect_keeps_listener_port:
            yield from rule.routes
            continue
        for route in rule.routes:
            assert route.redirect is not None
            yield attrs.evolve(route, redirect=attrs.evolve(route.redirect, port=listener.port))


def _port_hostnames(resolution: Resolution) -> dict[str, list[str | None]]:
    """Per DAG listener, the hostnames of the programmed Gateway listeners it serves."""
    found: dict[str, list[str | None]] = {}
    for gateway in resolution:
        for listener in gateway.listeners:
            if listener.dag_listener is not None:
                found.setdefault(listener.dag_listener, []).append(listener.hostname)
    return found


def _by_age(routes: Iterator[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Oldest first, then by namespace/name: the spec's order of precedence among routes."""

    def age(obj: Mapping[str, Any]) -> tuple[str, str, str]:
        meta = obj.get("metadata") or {}
        return (str(meta.get("creationTimestamp") or ""), str(meta.get("namespace")), str(meta.get("name")))

    return sorted(routes, key=age)
