"""HTTP filters that plugins contribute (:class:`cpx.records.HttpFilterSpec`): their order in every
connection manager, and the pieces the listener and route caches build from them.

The core names no filter here but the terminal one: Envoy requires the router last.  Everything
else (the builtin CORS, rate limit, RBAC, Lua filters included) is a contribution like any other.
"""

from __future__ import annotations

import functools
import graphlib
import heapq
import operator
from collections.abc import Callable, Sequence
from typing import NamedTuple

import attrs
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from google.protobuf import any_pb2
from google.protobuf.message import Message

from cpx.dag.attachments import NO_ATTACHMENTS
from cpx.dag.dag import VirtualHost
from cpx.dag.nodes import Cluster, Route
from cpx.errors import PluginError
from cpx.records import FilterSite, HttpFilterSpec, RouteSite
from cpx.xds.envoy.common import to_any

TERMINAL_FILTER = "router"

HttpFilters = tuple[HttpFilterSpec, ...]
# What a filter's route_fields may name.
_ROUTE_FIELDS = frozenset(attrs.fields_dict(Route)) | frozenset(attrs.fields_dict(Cluster))


def order_http_filters(contributed: Sequence[tuple[str, HttpFilterSpec]]) -> HttpFilters:
    """(plugin, spec) pairs in connection-manager order: ``after``/``before`` constraints first;
    otherwise each filter goes as late as they allow, in plugin order (the core first) and then by
    name, so a filter without constraints lands just before the router, which is always last.

    A duplicate name, a constraint naming a filter no enabled plugin contributes, and a cycle
    are start-up errors naming the plugins involved.
    """
    owners: dict[str, str] = {}
    specs: dict[str, HttpFilterSpec] = {}
    for plugin, spec in contributed:
        if spec.name in owners:
            raise PluginError(
                f"HTTP filter {spec.name!r} is registered by both {owners[spec.name]!r} and {plugin!r}"
            )
        if spec.per_route is not None and spec.per_route_at is not None:
            raise PluginError(
                f"HTTP filter {spec.name!r} of plugin {plugin!r} sets both per_route and per_route_at"
            )
        unknown = [f for f in spec.route_fields or () if f not in _ROUTE_FIELDS]
        if unknown:
            raise PluginError(
                f"HTTP filter {spec.name!r} of plugin {plugin!r} reads {unknown!r}, "
                "which are neither Route nor Cluster attributes"
            )
        owners[spec.name], specs[spec.name] = plugin, spec
    preceding: dict[str, set[str]] = {name: set() for name in specs}
    for name, spec in specs.items():
        for other in (*spec.after, *spec.before):
            if other not in specs:
                raise PluginError(
                    f"HTTP filter {name!r} of plugin {owners[name]!r} is ordered against {other!r}, "
                    "which no enabled plugin contributes"
                )
        preceding[name].update(spec.after)
        for other in spec.before:
            preceding[other].add(name)
    if TERMINAL_FILTER in specs:
        preceding[TERMINAL_FILTER].update(n for n in specs if n != TERMINAL_FILTER)
    try:
        graphlib.TopologicalSorter(preceding).prepare()
    except graphlib.CycleError as err:
        cycle = " -> ".join(f"{n!r} ({owners[n]})" for n in err.args[1])
        raise PluginError(f"HTTP filter ordering has a cycle: {cycle}") from None
    rank = {plugin: i for i, plugin in enumerate(dict.fromkeys(owners.values()))}
    base = sorted(specs, key=lambda n: (rank[owners[n]], n))
    return tuple(specs[name] for name in _latest_first(preceding, base))


def _latest_first(preceding: dict[str, set[str]], base: list[str]) -> list[str]:
    """A topological order built from the back: of the names nothing still placed needs to come
    before, the latest in ``base`` goes last each time."""
    position = {name: i for i, name in enumerate(base)}
    waiting = dict.fromkeys(preceding, 0)  # names after this one not placed yet
    for before in preceding.values():
        for name in before:
            waiting[name] += 1
    ready = [-position[n] for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    backwards: list[str] = []
    while ready:
        name = base[-heapq.heappop(ready)]
        backwards.append(name)
        for earlier in preceding[name]:
            waiting[earlier] -= 1
            if waiting[earlier] == 0:
                heapq.heappush(ready, -position[earlier])
    return backwards[::-1]


# -- packing, memoised by identity -------------------------------------------------------------------

_MEMO_LIMIT = 1024
# id(message) -> (message, its Any): the message is kept so that its id is not reused meanwhile.
_packed: dict[int, tuple[Message, any_pb2.Any]] = {}
# (filter name, id(config)) -> (config, the serialised HttpFilter), likewise.
_entries: dict[tuple[str, int], tuple[Message, bytes]] = {}


def pack(message: Message) -> any_pb2.Any:
    """``message`` as an ``Any``; configs that plugins memoise (the same object for the same
    input) are serialised once.  The caller copies the result, never changes it."""
    known = _packed.get(id(message))
    if known is not None and known[0] is message:
        return known[1]
    if len(_packed) >= _MEMO_LIMIT:
        _packed.clear()
    packed = to_any(message)
    _packed[id(message)] = (message, packed)
    return packed


def _entry(name: str, config: Message) -> bytes:
    """A connection manager's ``HttpFilter``, serialised: once per site-independent config."""
    key = (name, id(config))
    known = _entries.get(key)
    if known is not None and known[0] is config:
        return known[1]
    if len(_entries) >= _MEMO_LIMIT:
        _entries.clear()
    data: bytes = hcm.HttpFilter(name=name, typed_config=to_any(config)).SerializeToString(deterministic=True)
    _entries[key] = (config, data)
    return data


# -- connection managers -----------------------------------------------------------------------------


# Chains are memoised by the listener cache too: this spares rebuilding a site's filters when a
# chain changes for another reason (its certificate, its TLS parameters).
@functools.lru_cache(maxsize=1024)
def _encoded_filters(filters: HttpFilters, site: FilterSite) -> tuple[bytes, ...]:
    configs = ((spec.name, spec.config(site)) for spec in filters)
    return tuple(_entry(name, config) for name, config in configs if config is not None)


def connection_manager_filters(filters: HttpFilters, site: FilterSite) -> list[hcm.HttpFilter]:
    """The ``http_filters`` of a connection manager at ``site``, in order."""
    return [hcm.HttpFilter.FromString(data) for data in _encoded_filters(filters, site)]


# -- typed_per_filter_config -------------------------------------------------------------------------


# A filter's callable of one kind (``per_route``, ``per_virtual_host``, ...): its name, the
# callable, and for "per_route" whether it is ``per_route_at`` (which also takes the site).
_Call = tuple[str, Callable[..., Message | None], bool]
# (id(filters), kind) -> (filters, its calls of that kind), kept so that the id is not reused.
_calls_memo: dict[tuple[int, str], tuple[HttpFilters, tuple[_Call, ...]]] = {}


def _calls(filters: HttpFilters, kind: str) -> tuple[_Call, ...]:
    """The callables of the specs with a config of each kind, so that every route does not walk
    every filter and ask each whether it has one.

    Memoised by identity (the caches pass the same tuple for every route): hashing the tuple
    would hash every spec, on every route.
    """
    known = _calls_memo.get((id(filters), kind))
    if known is not None and known[0] is filters:
        return known[1]
    found: list[_Call] = []
    for spec in filters:
        if kind == "per_route" and spec.per_route_at is not None:
            found.append((spec.name, spec.per_route_at, True))
        elif getattr(spec, kind) is not None:
            found.append((spec.name, getattr(spec, kind), False))
    if len(_calls_memo) >= _MEMO_LIMIT:
        _calls_memo.clear()
    _calls_memo[(id(filters), kind)] = (filters, tuple(found))
    return tuple(found)


def virtual_host_fields(filters: HttpFilters, vhost: VirtualHost) -> list[Message]:
    """The partial VirtualHosts filters contribute for ``vhost`` (merged into its tail)."""
    return _contributions(filters, "virtual_host_fields", vhost)


def _contributions(filters: HttpFilters, kind: str, node: Route | VirtualHost) -> list[Message]:
    """What each filter's ``kind`` callable returns for ``node``, in filter order (None: nothing)."""
    calls = _calls(filters, kind)
    if not calls:
        return []
    out: list[Message] = []
    for _, call, _ in calls:
        fields = call(node)
        if fields is not None:
            out.append(fields)
    return out


# Plain loops below: they run for every new route and virtual host, mostly finding no config.


def virtual_host_configs(filters: HttpFilters, vhost: VirtualHost) -> list[tuple[str, any_pb2.Any]]:
    out = []
    for name, per_virtual_host, _ in _calls(filters, "per_virtual_host"):
        config = per_virtual_host(vhost)
        if config is not None:
            out.append((name, pack(config)))
    return out


@functools.lru_cache(maxsize=4096)
def route_site(fqdn: str, secure: bool) -> RouteSite:
    return RouteSite(virtual_host=fqdn, secure=secure)


class RouteCalls(NamedTuple):
    """The filters' callables a route's translation calls, found once per filter tuple: a route
    then costs one memo lookup rather than one per kind."""

    per_route: tuple[_Call, ...]
    route_action: tuple[_Call, ...]
    per_weighted_cluster: tuple[_Call, ...]


class _RouteCallSets:
    """A filter tuple's route calls: all of them, and those of the filters that may configure a
    route given what it carries (``HttpFilterSpec.route_keys`` and ``route_fields``)."""

    def __init__(self, filters: HttpFilters) -> None:
        kinds = ("per_route", "route_action", "per_weighted_cluster")
        self.every = RouteCalls(*(_calls(filters, kind) for kind in kinds))
        # Per filter naming what it reads: those names (attachment keys and attributes alike).
        self.reads = {
            spec.name: frozenset((*(spec.route_keys or ()), *(spec.route_fields or ())))
            for spec in filters
            if spec.route_keys is not None or spec.route_fields is not None
        }
        fields = sorted({field for spec in filters for field in spec.route_fields or ()})
        self.route_fields = [field for field in fields if field in attrs.fields_dict(Route)]
        self.cluster_fields = [field for field in fields if field in attrs.fields_dict(Cluster)]
        self.route_values, self.cluster_values = _values(self.route_fields), _values(self.cluster_fields)
        self._carrying: dict[frozenset[str], RouteCalls] = {}
        # A route carrying nothing any of them reads (nor do its clusters): the others' calls.
        self.bare = self.carrying(frozenset())

    def carrying(self, names: frozenset[str]) -> RouteCalls:
        """The calls for a route carrying the attachment keys and set attributes ``names``."""
        known = self._carrying.get(names)
        if known is None:
            if len(self._carrying) >= _MEMO_LIMIT:
                self._carrying.clear()
            idle = [name for name, reads in self.reads.items() if reads.isdisjoint(names)]
            known = self._carrying[names] = RouteCalls(
                *(tuple(call for call in calls if call[0] not in idle) for calls in self.every)
            )
        return known

    def carried(self, route: Route) -> frozenset[str] | None:
        """What ``route`` and its clusters carry that the filters read; None for nothing (the
        common case, found without building a set)."""
        # NO_ATTACHMENTS by identity first: most nodes hold it, and len() is a Python call.
        attached = route.attachments
        if (attached is NO_ATTACHMENTS or not attached) and not any(self.route_values(route)):
            for cluster in route.clusters:
                attached = cluster.attachments
                if (attached is not NO_ATTACHMENTS and attached) or any(self.cluster_values(cluster)):
                    break
            else:
                return None
        names = {key.name for key in route.attachments}
        names.update(f for f, value in zip(self.route_fields, self.route_values(route)) if value)  # noqa: B905
        for cluster in route.clusters:
            names.update(key.name for key in cluster.attachments)
            values = self.cluster_values(cluster)
            names.update(f for f, value in zip(self.cluster_fields, values) if value)  # noqa: B905
        return frozenset(names)


def _values(fields: list[str]) -> Callable[[object], tuple[object, ...]]:
    """The values of a node's ``fields`` as a tuple, in one C call (attrgetter's, but a tuple
    for one field too; zip stops at the fields)."""
    if not fields:
        return lambda node: ()
    return operator.attrgetter(*fields, fields[0])


# id(filters) -> (filters, their call sets), kept so that the id is not reused.
_route_calls_memo: dict[int, tuple[HttpFilters, _RouteCallSets]] = {}


def route_calls(filters: HttpFilters, route: Route) -> RouteCalls:
    """The calls that may give ``route`` a config: a filter that names what it reads is left out
    when the route and its clusters carry none of it."""
    known = _route_calls_memo.get(id(filters))
    if known is None or known[0] is not filters:
        if len(_route_calls_memo) >= _MEMO_LIMIT:
            _route_calls_memo.clear()
        known = _route_calls_memo[id(filters)] = (filters, _RouteCallSets(filters))
    sets = known[1]
    if not sets.reads:
        return sets.every
    carried = sets.carried(route)
    return sets.bare if carried is None else sets.carrying(carried)


def route_action_fields(calls: RouteCalls, route: Route) -> list[Message]:
    """The partial RouteActions filters contribute for ``route`` (merged into its own)."""
    out: list[Message] = []
    for _, call, _ in calls.route_action:
        fields = call(route)
        if fields is not None:
            out.append(fields)
    return out


def route_configs(calls: RouteCalls, route: Route, site: RouteSite) -> list[tuple[str, any_pb2.Any]]:
    out = []
    for name, per_route, at_site in calls.per_route:
        config = per_route(route, site) if at_site else per_route(route)
        if config is not None:
            out.append((name, pack(config)))
    return out


def weighted_cluster_configs(
    calls: RouteCalls, route: Route, cluster: Cluster
) -> list[tuple[str, any_pb2.Any]]:
    out = []
    for name, per_weighted_cluster, _ in calls.per_weighted_cluster:
        config = per_weighted_cluster(route, cluster)
        if config is not None:
            out.append((name, pack(config)))
    return out
