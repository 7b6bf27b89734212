"""What the HTTPRoute side keeps between builds, so that one change re-processes only what its
result can change.

A route's **plan** (:class:`RoutePlan`: its parentRefs' attachments, its translated rules and the
virtual hosts they go on) depends on the route, what it read from the source (Services,
Namespaces; ReferenceGrants are a listing, so such routes are planned again in every build) and
the Gateways.  What its rules come to on one virtual host depends on every route on that host: the
older route keeps a match both have (RuleMatchConflict for the other), and precedence between
equally specific matches follows the routes' age.  So the memo keeps:

- the plans, made again for the routes that changed or whose reads changed
  (``SourceView.changes_since``, :class:`cpx.ReadIndex`); every plan when a Gateway,
  GatewayClass or BackendTLSPolicy changed or the Gateways resolve differently (simple, and rare);
- per virtual host the routes on it and the host built from them, frozen: a host is built again
  only when one of its routes' plan changed, and an unchanged host is the same object in every
  build (installed with ``DAG.add_virtual_hosts``), which the caches skip by identity;
- per route its rendered status, rendered again only when its plan or one of its hosts changed
  (and then still last build's object when only transition times differ: ``stabilize``).

A host an older GRPCRoute serves belongs to it (``claims``, the spec forbids merging the two
kinds): the routes there count as conflicts and the memo installs no host for it.  A change of
those claims rebuilds just the hosts whose claim changed.

A host another processor already serves (an HTTPProxy or Ingress host on a shared listener) is
*contested*: the routes are merged into that host through the accessors in every build, as
building from scratch would.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import attrs
from cpx import GroupVersionKind, Lookups, ObjectKey, ReadIndex, SourceView
from cpx.dag import DAG, Route, SecureVirtualHost, VirtualHost

from cpx_gatewayapi import routestatus, status
from cpx_gatewayapi.conditions import stabilize
from cpx_gatewayapi.kinds import BACKEND_TLS_POLICY, GATEWAY, GATEWAY_CLASS
from cpx_gatewayapi.model import GRPCROUTE_KIND, Attachments, GatewayListener
from cpx_gatewayapi.routebuild import Translated
from cpx_gatewayapi.routeparents import Attached

# A route's matches take precedence slots below this (routebuild: rule * 1000 + match); its rank
# among the routes of one virtual host, oldest first, goes above.
_ROUTE_SLOTS = 1_000_000
# A change to one of these plans every route again.  BackendTLSPolicy: which backends it covers is
# read from a memoised index (backendtls.policies), not recorded per route, and it changes rarely.
_RESOLVED_KINDS = frozenset((GATEWAY.group_kind, GATEWAY_CLASS.group_kind, BACKEND_TLS_POLICY.group_kind))


class HostKey(NamedTuple):
    listener: str  # the DAG listener
    name: str  # the virtual host's name
    secure: bool


class Outcome(NamedTuple):
    """What one route's rules came to on one virtual host."""

    conflicts: int  # matches left out: an older route has them
    served: tuple[str, ...]  # match keys served
    yielded: bool = False  # the host went to an older route of the other kind (GRPCRoute)


@attrs.frozen(eq=False)
class Contribution:
    """A route's rules as one Gateway listener serves them on a host."""

    listener: GatewayListener
    routes: tuple[Route, ...]


@attrs.frozen(eq=False, kw_only=True)
class RoutePlan:
    """One route's part of a build, apart from the other routes (see the module's docstring)."""

    key: ObjectKey
    obj: Mapping[str, Any]
    age: tuple[str, str, str]  # the order of precedence among routes
    # One per parentRef naming one of our Gateways; () clears entries of ours; None: no status.
    attached: tuple[Attached, ...] | None
    built: Translated | None = None
    targets: Mapping[HostKey, tuple[Contribution, ...]] = attrs.field(factory=dict)
    counted: tuple[GatewayListener, ...] = ()  # the listeners it attaches to (attachedRoutes)

    def status(self, outcomes: Iterable[tuple[HostKey, Outcome]]) -> dict[str, Any] | None:
        if self.attached is None:
            return None
        if not self.attached or self.built is None:
            return status.route_status(())
        conflicts, yielded = 0, False
        served: set[tuple[str, str, bool, str]] = set()
        for host, outcome in outcomes:
            conflicts += outcome.conflicts
            yielded = yielded or outcome.yielded
            served.update((host.listener, host.name, host.secure, match) for match in outcome.served)
        other = GRPCROUTE_KIND if yielded else None
        return routestatus.route_status(self.obj, self.attached, self.built, conflicts, served, other)


Age = tuple[str, str, str]


def merge(
    vhost: VirtualHost, host: HostKey, plans: Iterable[RoutePlan], claim: Age | None = None
) -> dict[ObjectKey, Outcome]:
    """Add the routes of ``plans`` (oldest first) to ``vhost``, unless a route of another kind
    older than all of them (``claim``: its age) has the host; what each came to."""
    ordered = list(plans)
    if claim is not None and ordered and claim < ordered[0].age:
        return {plan.key: Outcome(max(1, _route_count(plan, host)), (), yielded=True) for plan in ordered}
    outcomes = {}
    for rank, plan in enumerate(ordered):
        seen: dict[str, None] = {}
        conflicts = 0
        for contribution in plan.targets[host]:
            if isinstance(vhost, SecureVirtualHost) and vhost.secret is None:
                vhost.secret = contribution.listener.secret  # a host another object serves keeps its own
                vhost.downstream_validation = contribution.listener.client_validation
                vhost.authority_check = contribution.listener.authority_check
            for route in contribution.routes:
                match = route.match_key()
                if match in seen:
                    continue  # this route, through another parentRef or listener
                existing = vhost.routes.get(match)
                if existing is not None and existing.origin != plan.key:
                    conflicts += 1
                    continue
                seen[match] = None
                vhost.routes[match] = (
                    attrs.evolve(route, precedence=route.precedence + rank * _ROUTE_SLOTS) if rank else route
                )
        outcomes[plan.key] = Outcome(conflicts, tuple(seen))
    return outcomes


def _route_count(plan: RoutePlan, host: HostKey) -> int:
    return sum(len(contribution.routes) for contribution in plan.targets[host])


def _new_host(host: HostKey) -> VirtualHost:
    vhost = SecureVirtualHost(host.name) if host.secure else VirtualHost(host.name)
    if host.name.startswith("*."):
        vhost.single_label_wildcard = False  # Gateway API wildcards match one or more labels
    return vhost


PlanMaker = Callable[[Mapping[str, Any], ObjectKey], RoutePlan]


@attrs.define(eq=False)
class RouteMemo:
    """The plans, virtual hosts and statuses of the last build (see the module's docstring)."""

    _source: weakref.ref[SourceView] | None = None
    _revision: int = -1
    _inputs: object = None  # what every plan was made with (the Gateways, the settings)
    plans: dict[ObjectKey, RoutePlan] = attrs.field(factory=dict)
    reads: ReadIndex = attrs.field(factory=ReadIndex)
    host_routes: dict[HostKey, set[ObjectKey]] = attrs.field(factory=dict)
    hosts: dict[HostKey, VirtualHost] = attrs.field(factory=dict)  # frozen
    outcomes: dict[HostKey, dict[ObjectKey, Outcome]] = attrs.field(factory=dict)
    # Our hosts per (DAG listener, secure), by name, in name order unless listed in `unsorted`.
    groups: dict[tuple[str, bool], dict[str, VirtualHost]] = attrs.field(factory=dict)
    unsorted: set[tuple[str, bool]] = attrs.field(factory=set)
    contested: dict[HostKey, dict[ObjectKey, Outcome]] = attrs.field(factory=dict)
    claims: dict[HostKey, Age] = attrs.field(factory=dict)  # hosts routes of another kind may take
    statuses: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict)
    counts: Counter[tuple[ObjectKey, str]] = attrs.field(factory=Counter)
    planned: int = 0  # routes planned in the last build (tests)

    def reset(self) -> None:
        self._source, self._revision, self._inputs = None, -1, None
        for table in (self.plans, self.host_routes, self.hosts, self.outcomes, self.groups, self.claims):
            table.clear()
        self.reads.clear()
        self.unsorted.clear()
        self.contested.clear()
        self.statuses.clear()
        self.counts.clear()

    def build(
        self,
        dag: DAG,
        source: SourceView,
        gvk: GroupVersionKind,
        inputs: object,
        make_plan: PlanMaker,
        attachments: Attachments,
        claims: Mapping[HostKey, Age] | None = None,
    ) -> None:
        """Bring the memo up to date with ``source`` and ``claims`` and put its result into
        ``dag``, the statuses and ``attachments``."""
        try:
            self._update(dag, source, gvk, inputs, make_plan, attachments, claims or {})
        except BaseException:
            self.reset()  # a half-applied update must not leak into the next build
            raise

    def _update(
        self,
        dag: DAG,
        source: SourceView,
        gvk: GroupVersionKind,
        inputs: object,
        make_plan: PlanMaker,
        attachments: Attachments,
        claims: Mapping[HostKey, Age],
    ) -> None:
        dirty: set[HostKey] = set()
        stale = self._stale(source, gvk, inputs)
        objects: list[tuple[ObjectKey, Mapping[str, Any] | None]]
        if stale is None:
            last = dict(self.statuses)
            self.reset()
            objects = [(ObjectKey.of(obj), obj) for obj in source.list(gvk)]
            # Still the statuses to stabilize against, for the routes that are still there.
            self.statuses.update((key, last[key]) for key, _ in objects if key in last)
        else:
            objects = [(key, source.get(key)) for key in sorted(stale)]
        self._source, self._revision, self._inputs = weakref.ref(source), source.revision, inputs
        for key, obj in objects:
            self._drop(key, dirty)
            if obj is None:
                self.statuses.pop(key, None)
            else:
                with source.recording() as lookups:
                    plan = make_plan(obj, key)
                self._keep(plan, lookups, dirty)
        self.planned = len(objects)
        if claims != self.claims:
            moved = {h for h in claims.keys() | self.claims.keys() if claims.get(h) != self.claims.get(h)}
            dirty.update(moved.intersection(self.host_routes))
            self.claims = dict(claims)
        for host in dirty:
            self._build_host(host)
        contested = self._install(dag)
        rerender = {key for key, _ in objects}
        for host in dirty | contested.keys() | self.contested.keys():
            rerender.update(self.host_routes.get(host, ()))
        self.contested = contested
        for key in rerender:
            self._render(key)
        dag.statuses.update(self.statuses)  # in bulk, as dag.set_status would one by one
        for counted, number in self.counts.items():
            attachments.counts[counted] = attachments.counts.get(counted, 0) + number
        # What the kept plans read is what this build depends on, planned again or not.
        source.depend_on(self.reads)

    def _stale(self, source: SourceView, gvk: GroupVersionKind, inputs: object) -> set[ObjectKey] | None:
        """The routes to plan again, or None: all of them."""
        if self._source is None or self._source() is not source or inputs != self._inputs:
            return None
        changes = source.changes_since(self._revision)
        if changes is None:
            return None
        stale = set(self.reads.volatile)
        kind = gvk.group_kind
        for change in changes:
            if change.group_kind == kind:
                stale.add(change)
            elif change.group_kind in _RESOLVED_KINDS:
                return None
            else:
                stale.update(self.reads.referencing(change))
        return stale

    def _drop(self, key: ObjectKey, dirty: set[HostKey]) -> None:
        old = self.plans.pop(key, None)
        if old is None:
            return
        self.reads.discard(key)
        self.counts.subtract((listener.gateway, listener.name) for listener in old.counted)
        for host in old.targets:
            dirty.add(host)
            self.host_routes[host].discard(key)

    def _keep(self, plan: RoutePlan, lookups: Lookups, dirty: set[HostKey]) -> None:
        self.plans[plan.key] = plan
        self.reads.add(plan.key, lookups)
        self.counts.update((listener.gateway, listener.name) for listener in plan.counted)
        for host in plan.targets:
            dirty.add(host)
            self.host_routes.setdefault(host, set()).add(plan.key)

    def _ordered(self, host: HostKey) -> list[RoutePlan]:
        return sorted((self.plans[key] for key in self.host_routes[host]), key=lambda plan: plan.age)

    def _build_host(self, host: HostKey) -> None:
        group = (host.listener, host.secure)
        if not self.host_routes.get(host):
            self.host_routes.pop(host, None)
            self.hosts.pop(host, None)
            self.outcomes.pop(host, None)
            self.groups.get(group, {}).pop(host.name, None)
            return
        vhost = _new_host(host)
        self.outcomes[host] = merge(vhost, host, self._ordered(host), self.claims.get(host))
        if not vhost.routes and host in self.claims:  # another kind's: no host of ours
            self.hosts.pop(host, None)
            self.groups.get(group, {}).pop(host.name, None)
            return
        self.hosts[host] = vhost.freeze()
        hosts = self.groups.setdefault(group, {})
        if host.name not in hosts:
            self.unsorted.add(group)
        hosts[host.name] = vhost

    def _install(self, dag: DAG) -> dict[HostKey, dict[ObjectKey, Outcome]]:
        """Our hosts into ``dag``: the frozen ones as they are, the contested ones merged into the
        host already there.  Returns what the routes came to on the contested ones."""
        contested: dict[HostKey, dict[ObjectKey, Outcome]] = {}
        for group in self.unsorted:
            self.groups[group] = dict(sorted(self.groups[group].items()))
        self.unsorted.clear()
        for (name, secure), hosts in self.groups.items():
            if not hosts:
                continue
            listener = dag.listeners[name]
            present = listener.secure_virtual_hosts if secure else listener.virtual_hosts
            taken = present.keys() & hosts.keys()
            mine: Mapping[str, VirtualHost] = hosts
            if taken:
                mine = {fqdn: vhost for fqdn, vhost in hosts.items() if fqdn not in taken}
            if secure:
                dag.add_secure_virtual_hosts(name, mine)  # type: ignore[arg-type]
            else:
                dag.add_virtual_hosts(name, mine)
            for fqdn in sorted(taken):
                host = HostKey(name, fqdn, secure)
                vhost: VirtualHost
                if secure:
                    vhost = dag.ensure_secure_virtual_host(name, fqdn)
                else:
                    vhost = dag.ensure_virtual_host(name, fqdn)
                if fqdn.startswith("*."):
                    vhost.single_label_wildcard = False
                contested[host] = merge(vhost, host, self._ordered(host), self.claims.get(host))
        return contested

    def _render(self, key: ObjectKey) -> None:
        plan = self.plans.get(key)
        if plan is None:
            return
        outcomes = []
        for host in plan.targets:
            found = self.contested[host] if host in self.contested else self.outcomes[host]
            outcomes.append((host, found[key]))
        computed = plan.status(outcomes)
        if computed is None:
            self.statuses.pop(key, None)
        else:
            # Last build's status, or its transition times: objects read from files keep none.
            self.statuses[key] = stabilize(computed, self.statuses.get(key))
