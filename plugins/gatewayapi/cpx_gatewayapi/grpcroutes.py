"""GRPCRoutes: attachment to Gateway listeners, translation to virtual hosts and routes, status.

They attach as HTTPRoutes do (:mod:`cpx_gatewayapi.routeparents`, the same hostname intersection
and listener isolation) and their rules become routes through :mod:`cpx_gatewayapi.routebuild`
(method matches are path matches, backends speak HTTP/2).  The spec forbids merging the two kinds
on a virtual host: one both name belongs to the kind of its oldest route (creationTimestamp, then
namespace/name), and the other kind's routes there count as conflicts (Accepted=False
RuleMatchConflict when that leaves them nothing).  So GRPCRoutes are planned first (:func:`plan`:
the hosts they claim go to the HTTPRoute side) and served after the HTTPRoutes (:func:`apply`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from cpx import ObjectKey, SourceView, blame
from cpx.dag import DAG, Route, VirtualHost

from cpx_gatewayapi import hostnames, routebuild, routeparents, routestatus, status
from cpx_gatewayapi.incremental import HostKey
from cpx_gatewayapi.kinds import GRPCROUTE
from cpx_gatewayapi.model import GRPCROUTE_KIND, HTTPROUTE_KIND, Attachments, GatewayListener, Resolution
from cpx_gatewayapi.settings import Settings


@attrs.frozen
class _Build:
    """What every GRPCRoute of one build is attached with."""

    source: SourceView
    resolution: Resolution
    settings: Settings
    owners: Mapping[str, Sequence[str | None]]  # per DAG listener, its Gateway listeners' hostnames


@attrs.frozen(kw_only=True)
class _Plan:
    """One GRPCRoute attached and translated, before it meets the HTTPRoutes."""

    key: ObjectKey
    obj: Mapping[str, Any]
    attached: tuple[routeparents.Attached, ...] = ()
    built: routebuild.Translated | None = None
    # The (Gateway listener, virtual host) pairs its rules go on.
    targets: tuple[tuple[GatewayListener, HostKey], ...] = ()


@attrs.frozen
class GRPCRoutes:
    """Every GRPCRoute of a build, planned: which virtual hosts they claim is what the HTTPRoutes
    need to know first (the older route's kind gets a host both kinds name)."""

    plans: tuple[_Plan, ...]

    @property
    def claims(self) -> dict[HostKey, tuple[str, str, str]]:
        """Per virtual host, the age of the oldest GRPCRoute that serves on it."""
        found: dict[HostKey, tuple[str, str, str]] = {}
        for plan in self.plans:
            age = routeparents.age(plan.obj)
            for _, host in plan.targets:
                if host not in found or age < found[host]:
                    found[host] = age
        return found


def plan(source: SourceView, resolution: Resolution, settings: Settings) -> GRPCRoutes:
    """Attach and translate every GRPCRoute, oldest first."""
    routes = sorted(source.list(GRPCROUTE), key=routeparents.age)
    if not routes:
        return GRPCRoutes(())
    build = _Build(source, resolution, settings, routeparents.port_hostnames(resolution))
    plans = []
    for rank, obj in enumerate(routes):
        key = ObjectKey.of(obj)
        with blame(key):
            plans.append(_plan(build, obj, key, rank))
    return GRPCRoutes(tuple(plans))


def apply(dag: DAG, planned: GRPCRoutes, attachments: Attachments, settings: Settings) -> None:
    """Add the planned GRPCRoutes' routes to their DAG listeners (after the HTTPRoutes), count
    them in ``attachments``, and set their status (``status.parents``)."""
    http_hosts: dict[HostKey, bool] = {}
    for planned_route in planned.plans:
        with blame(planned_route.key):
            _apply_route(dag, planned_route, attachments, settings, http_hosts)


def _plan(build: _Build, obj: Mapping[str, Any], key: ObjectKey, rank: int) -> _Plan:
    spec = obj.get("spec") or {}
    parents = list(routeparents.parents(spec, key.namespace, build.resolution))
    if not parents:
        return _Plan(key=key, obj=obj)
    route_hostnames = [str(h) for h in spec.get("hostnames") or () if isinstance(h, str)]
    labels = routeparents.namespace_labels(build.source, key.namespace)
    attached = tuple(
        routeparents.attach(GRPCROUTE_KIND, ref, gateway, key.namespace, labels, route_hostnames)
        for ref, gateway in parents
    )
    built = routebuild.translate(build.source, obj, key, rank)
    targets: list[tuple[GatewayListener, HostKey]] = []
    if not built.all_dropped:
        for parent in attached:
            for listener, hosts in parent.listeners:
                targets.extend((listener, host) for host in _hosts(build, listener, hosts))
    return _Plan(key=key, obj=obj, attached=attached, built=built, targets=tuple(targets))


def _hosts(build: _Build, listener: GatewayListener, hosts: Sequence[str]) -> Iterator[HostKey]:
    if listener.dag_listener is None:
        return
    mine = listener.hostname or hostnames.ANY
    for host in hosts:
        # Not the names a more specific listener on this port owns.
        if hostnames.owner(build.owners[listener.dag_listener], host) == mine:
            yield HostKey(listener.dag_listener, host, listener.protocol == "HTTPS")


def _apply_route(
    dag: DAG,
    plan: _Plan,
    attachments: Attachments,
    settings: Settings,
    http_hosts: dict[HostKey, bool],
) -> None:
    if not plan.attached:
        # None of ours: no entry from us; entries we wrote before go (the merge drops them).
        if status.has_parents_of(plan.obj, settings.controller_name):
            dag.set_status(plan.key, status.route_status(()))
        return
    built = plan.built
    assert built is not None
    if not built.all_dropped:
        for parent in plan.attached:
            for listener, _ in parent.listeners:
                attachments.add(listener)
    conflicts, yielded = 0, False
    served: set[tuple[str, str, bool, str]] = set()
    routes = [route for rule in built.rules for route in rule.routes]
    for listener, host in plan.targets:
        if _served_by_httproutes(dag, host, http_hosts):
            conflicts += len(routes)  # an older HTTPRoute has the host
            yielded = True
            continue
        conflicts += _serve(dag, listener, host, routes, plan.key, served)
    other = HTTPROUTE_KIND if yielded else None
    computed = routestatus.route_status(plan.obj, plan.attached, built, conflicts, served, other)
    dag.set_status(plan.key, computed)


def _serve(
    dag: DAG,
    listener: GatewayListener,
    host: HostKey,
    routes: Sequence[Route],
    key: ObjectKey,
    served: set[tuple[str, str, bool, str]],
) -> int:
    """Add the route's rules to ``host``; the number of matches left out because another
    GRPCRoute already has them."""
    vhost = _ensure(dag, listener, host.name, host.secure)
    conflicts = 0
    for route in routes:
        match = route.match_key()
        seen = (host.listener, host.name, host.secure, match)
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
            vhost.downstream_validation = listener.client_validation
            vhost.authority_check = listener.authority_check
    else:
        vhost = dag.ensure_virtual_host(listener.dag_listener, host)
    if host.startswith("*."):
        vhost.single_label_wildcard = False
    return vhost


def _served_by_httproutes(dag: DAG, host: HostKey, http_hosts: dict[HostKey, bool]) -> bool:
    """Whether HTTPRoutes serve ``host``: they are all placed before the first GRPCRoute (and
    only where they are older), so the answer never changes in a build (looked at once per host)."""
    found = http_hosts.get(host)
    if found is None:
        vhost = (
            dag.get_secure_virtual_host(host.listener, host.name)
            if host.secure
            else dag.get_virtual_host(host.listener, host.name)
        )
        routes = vhost.routes.values() if vhost is not None else ()
        found = http_hosts[host] = any(
            r.origin is not None and r.origin.kind == HTTPROUTE_KIND for r in routes
        )
    return found
