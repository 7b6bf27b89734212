"""HTTPRoutes: attachment to Gateway listeners, translation to virtual hosts and routes, status.

Per parentRef (gateway.networking.k8s.io route status steps): the listeners it selects (sectionName
and/or port, else NoMatchingParent), those admitting the kind and the route's namespace (else
NotAllowedByListeners), those whose hostnames intersect the route's (else
NoMatchingListenerHostname).  Each listener left counts the route (``attachedRoutes``, programmed
or not) and, when programmed, serves its rules on a virtual host per effective hostname.  A broad
listener (wildcard or no hostname) leaves the hostnames a more specific listener on the same port
owns to that listener's routes (listener isolation, Contour's computeHosts).

One route's part (:func:`plan`) depends on the route, what it reads and the Gateways only; what
its rules come to on a virtual host (precedence, matches another route already has) depends on
the other routes on that host: :mod:`cpx_gatewayapi.incremental` puts the plans together, and
keeps them between builds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from cpx import ObjectKey, SourceView, blame
from cpx.dag import DAG, Route

from cpx_gatewayapi import hostnames, routebuild, routeparents, status
from cpx_gatewayapi.incremental import Age, Contribution, HostKey, RouteMemo, RoutePlan
from cpx_gatewayapi.kinds import HTTPROUTE
from cpx_gatewayapi.model import HTTPROUTE_KIND, Attachments, GatewayListener, Resolution
from cpx_gatewayapi.settings import Settings


@attrs.frozen
class _Build:
    """What every route of one build is attached with."""

    source: SourceView
    resolution: Resolution
    settings: Settings
    owners: Mapping[str, Sequence[str | None]]  # per DAG listener, its Gateway listeners' hostnames


def apply(
    dag: DAG,
    source: SourceView,
    resolution: Resolution,
    attachments: Attachments,
    settings: Settings,
    memo: RouteMemo | None = None,
    claims: Mapping[HostKey, Age] | None = None,
) -> None:
    """Attach every HTTPRoute to the listeners it selects and admits it, add its routes to their
    DAG listeners, count it in ``attachments``, and set its status (``status.parents``).  With a
    ``memo`` kept from the last build, only what a change can affect is worked out again.
    ``claims``: the hosts GRPCRoutes serve, with the age of the oldest there (it gets the host if
    older than every HTTPRoute on it)."""
    build = _Build(source, resolution, settings, routeparents.port_hostnames(resolution))
    memo = memo if memo is not None else RouteMemo()
    memo.build(
        dag,
        source,
        HTTPROUTE,
        (resolution, settings),
        lambda obj, key: plan(build, obj, key),
        attachments,
        claims,
    )


def plan(build: _Build, obj: Mapping[str, Any], key: ObjectKey) -> RoutePlan:
    """Route ``obj``'s attachments, rules and the virtual hosts they go on (see the module's
    docstring); reads are recorded by the caller."""
    with blame(key):
        return _plan(build, obj, key)


def _plan(build: _Build, obj: Mapping[str, Any], key: ObjectKey) -> RoutePlan:
    spec = obj.get("spec") or {}
    parents = list(routeparents.parents(spec, key.namespace, build.resolution))
    if not parents:
        # None of ours: no entry from us; entries we wrote before go (the merge drops them).
        drop = status.has_parents_of(obj, build.settings.controller_name)
        return RoutePlan(key=key, obj=obj, age=routeparents.age(obj), attached=None if not drop else ())
    route_hostnames = [str(h) for h in spec.get("hostnames") or () if isinstance(h, str)]
    labels = routeparents.namespace_labels(build.source, key.namespace)
    attached = tuple(
        routeparents.attach(HTTPROUTE_KIND, ref, gateway, key.namespace, labels, route_hostnames)
        for ref, gateway in parents
    )
    # Precedence among routes is set where they meet, per virtual host (RouteMemo).
    built = routebuild.translate(build.source, obj, key, 0)
    counted: list[GatewayListener] = []
    targets: dict[HostKey, list[Contribution]] = {}
    if not built.all_dropped:
        for parent in attached:
            for listener, hosts in parent.listeners:
                counted.append(listener)
                _targets(build, listener, hosts, built, targets)
    return RoutePlan(
        key=key,
        obj=obj,
        age=routeparents.age(obj),
        attached=attached,
        built=built,
        targets={host: tuple(found) for host, found in targets.items()},
        counted=tuple(counted),
    )


def _targets(
    build: _Build,
    listener: GatewayListener,
    hosts: Sequence[str],
    built: routebuild.Translated,
    targets: dict[HostKey, list[Contribution]],
) -> None:
    """The virtual hosts of ``listener`` the route's rules go on."""
    if listener.dag_listener is None:
        return
    mine = listener.hostname or hostnames.ANY
    owners = build.owners[listener.dag_listener]
    contribution = Contribution(listener=listener, routes=tuple(_routes(built, listener)))
    for host in hosts:
        if hostnames.owner(owners, host) != mine:
            continue  # a more specific listener on this port owns the name
        target = HostKey(listener.dag_listener, host, listener.protocol == "HTTPS")
        targets.setdefault(target, []).append(contribution)


def _routes(built: routebuild.Translated, listener: GatewayListener) -> Iterator[Route]:
    for rule in built.rules:
        if not rule.redirect_keeps_listener_port:
            yield from rule.routes
            continue
        for route in rule.routes:
            assert route.redirect is not None
            yield attrs.evolve(route, redirect=attrs.evolve(route.redirect, port=listener.port))
