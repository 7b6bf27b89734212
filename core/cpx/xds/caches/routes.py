"""The RDS cache: RouteConfigurations per HTTP listener, per exact host and per secure virtual host.

Names follow Contour (``internal/xdscache/v3/route.go``): ``ingress_http`` for all plain-HTTP
virtual hosts (with the default scoped shape, only the wildcard and ``*`` ones: each exact host
has its own ``ingress_http/<fqdn>``, see :mod:`cpx.xds.envoy.scoped`), ``https/<fqdn>`` for each
secure one (its own HTTP connection manager, see :mod:`cpx.xds.caches.listeners`) and
``ingress_fallbackcert`` for the virtual hosts reachable through the
fallback certificate; a plugin's listener made with ``ensure_listener`` uses its own name for plain HTTP.

Translation is memoised on frozen DAG values.  Each virtual host keeps its serialised
``VirtualHost`` together with the set of routes it came from and the serialised ``Route`` of each:
an unchanged route set reuses the bytes as they are, a changed one is re-sorted and re-assembled
translating only the routes not seen before.  The virtual-host-wide policies (what per-virtual-host
filter configs read, :meth:`cpx.dag.dag.VirtualHost.policies`) are part of the memo: when only they
change, the routes' bytes are reused as they are.  Per-filter configs come from the HTTP filters
bound with :meth:`RouteCache.bind_contributions`.
A RouteConfiguration is the concatenation of cached bytes (see
:func:`cpx.xds.envoy.common.embedded`), and one whose bytes did not change keeps its Resource
object.  Only what the latest DAG uses stays memoised.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import attrgetter, itemgetter

import attrs
from envoy.config.core.v3 import base_pb2 as core_base
from envoy.config.route.v3 import route_components_pb2 as route_components
from envoy.config.route.v3 import route_pb2 as route_v3
from google.protobuf.message import Message

from cpx.config import Config
from cpx.dag.attachments import NO_ATTACHMENTS
from cpx.dag.dag import DAG, Listener, SecureVirtualHost, VirtualHost
from cpx.dag.nodes import PathKind, PathMatch, Route
from cpx.dag.sorting import route_key
from cpx.isolation import Fault
from cpx.objects import ObjectKey
from cpx.xds import resource
from cpx.xds.constraints.notes import violation_note
from cpx.xds.constraints.validate import parts_pass_check, pass_check, violations
from cpx.xds.contributions import Contributions
from cpx.xds.envoy.common import embedded
from cpx.xds.envoy.route import (
    PLAIN_FORWARD_FIELDS,
    build_route,
    virtual_host_head_bytes,
    virtual_host_tail_bytes,
    wildcard_authority_match,
)
from cpx.xds.envoy.scoped import EXACT_MARKER, SCOPE_HEADER, host_route_config_name, is_exact
from cpx.xds.httpfilters import HttpFilters
from cpx.xds.resource import Resource, content_version

# Contour's names in static (non-Gateway) mode.
HTTP_ROUTE_CONFIG = "ingress_http"
FALLBACK_ROUTE_CONFIG = "ingress_fallbackcert"

_NAME_FIELD = 1  # RouteConfiguration.name
_VIRTUAL_HOSTS_FIELD = 2  # RouteConfiguration.virtual_hosts
_ROUTES_FIELD = 3  # VirtualHost.routes

VHostKey = tuple[str, str, bool]  # listener, fqdn, secure
# A virtual host's own policies: what its entry depends on besides its name and routes.
VHostPolicies = tuple[object, ...]
# A route's Contour sort key and its ready-to-concatenate VirtualHost.routes entry.
_Piece = tuple[tuple[object, ...], bytes]


@attrs.frozen(eq=False)
class _Translated:
    """A virtual host's encoded RouteConfiguration entry and, per route, its sort key and entry."""

    # The virtual host last found to translate to this entry: the same (frozen) object in the next
    # build means nothing to compare.
    vhost: VirtualHost
    # Its routes as translated (a frozen host's own, else a copy): comparing them with another
    # host's is mostly identity checks in C, since unchanged routes are the very same objects.
    routes: dict[str, Route]
    policies: VHostPolicies
    entry: bytes  # a complete RouteConfiguration.virtual_hosts field, ready to concatenate
    # Per route translated, its piece.  Pairs rather than a dict by route: a first build then
    # hashes no Route (big attrs values); only a host translated again needs them by route
    # (a host's routes are keyed by match, so no two of them are equal).
    pieces: list[tuple[Route, _Piece]]


def _config_head(name: str) -> bytes:
    """``RouteConfiguration(name=name)`` serialised, without building a message per host."""
    return embedded(_NAME_FIELD, name.encode()) if name else b""


def _route_config_tail(scoped: bool = False) -> bytes:
    # Contour stamps every request with its arrival time (for upstream queueing metrics).
    tail = route_v3.RouteConfiguration(
        request_headers_to_add=[
            core_base.HeaderValueOption(
                header=core_base.HeaderValue(key="x-request-start", value="t=%START_TIME(%s.%3f)%"),
                append_action=core_base.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD,
            )
        ],
        # The scope selector's header is cpx's business, not the backend's.
        request_headers_to_remove=[SCOPE_HEADER] if scoped else [],
    )
    data: bytes = tail.SerializeToString(deterministic=True)
    return data


class RouteCache:
    """A :class:`~cpx.records.CheckingCache`: each new route and virtual host is checked against
    Envoy's rules as it is translated (unchanged ones are memoised), never whole configurations."""

    type_url = resource.ROUTE

    def __init__(self, config: Config) -> None:
        self.config = config
        self._resources: dict[str, Resource] = {}
        self._vhosts: dict[VHostKey, _Translated] = {}
        self._plain: dict[str, _PlainHosts] = {}  # per listener
        self._faults: list[Fault] = []
        # Per RouteConfiguration, the virtual host names last checked together (_check_skeletons).
        self._skeletons: dict[str, tuple[str, ...]] = {}
        # Per RouteConfiguration, the entries its body was joined from (to skip re-joining).
        self._entries: dict[str, list[bytes]] = {}
        self._tail = _route_config_tail()
        self._http_filters: HttpFilters = ()
        self.scoped = config.route_shape == "scoped"
        self._scoped_tail = _route_config_tail(scoped=True)
        # Scoped shape, per listener: its plain RouteConfigurations as last built (see _scoped_plain).
        self._scoped_memo: dict[str, _ScopedListener] = {}
        # The contents before the last on_change and the names that may differ since (changed_since).
        self._changes: tuple[Mapping[str, Resource], Collection[str] | None] = ({}, None)

    def bind_contributions(self, contributions: Contributions) -> None:
        self._http_filters = contributions.http_filters
        self._vhosts, self._plain = {}, {}  # translated with other filters

    def contents(self) -> Mapping[str, Resource]:
        return self._resources

    def changed_since(self, contents: Mapping[str, Resource]) -> Collection[str] | None:
        """The names that may differ between ``contents`` (handed out before) and the current
        contents, when the last on_change knows them (None: compare every name).  The snapshot
        then costs what changed: one changed host among 10k is one name, not a pass over 10k."""
        before, names = self._changes
        return names if before is contents else None

    def faults(self) -> list[Fault]:
        """Routes and virtual hosts of the last DAG that Envoy would reject (left out of it)."""
        return self._faults

    def on_change(self, dag: DAG) -> None:
        try:
            self._on_change(dag)
        except BaseException:
            # The memo tables were updated in place up to the failure (_Build.plain_vhosts,
            # _scoped_plain): look at every host again next time, by identity (always safe).
            self._plain = {name: attrs.evolve(plain, faulty=True) for name, plain in self._plain.items()}
            self._scoped_memo = {}
            raise

    def _on_change(self, dag: DAG) -> None:
        builder = _Build(self._vhosts, self._plain, self._http_filters, EXACT_MARKER if self.scoped else b"")
        self._faults = builder.faults
        configs: dict[str, list[bytes]] = {}
        # Contour always serves ingress_http in static mode, so Envoy's static HTTP listener never
        # waits for a route table that does not exist.
        configs[HTTP_ROUTE_CONFIG] = []
        members: dict[str, list[VirtualHost]] = {}
        scoped: dict[str, _ScopedListener] = {}
        for name in sorted(dag.listeners):
            self._add_listener(dag.listeners[name], dag.sealed, builder, configs, members, scoped)
        # Plain configurations with the same hosts as last time (checked then, if they passed).
        same = {name for name, plain in builder.plain.items() if plain.changed is not None}
        self._check_skeletons(members, same, builder.heads)
        # Only what this build used stays memoised: memory follows the DAG, not its history.
        self._vhosts, self._plain = builder.current, builder.plain
        # In build order (listeners by name, their hosts by name): consumers sort names themselves.
        resources = {name: self._resource(name, vhosts) for name, vhosts in configs.items()}
        for plain in scoped.values():
            resources.update(plain.resources)
        changed = self._changed_names(configs, scoped)
        self._entries, self._scoped_memo = configs, scoped
        before = self._resources
        # Same contents: hand out the same mapping, which observers can compare by identity.
        if changed is None:
            unchanged = resources == before
        else:  # only the names that may have changed are compared (len: one may be gone)
            unchanged = len(resources) == len(before) and all(
                before.get(n) == resources.get(n) for n in changed
            )
        if not unchanged:
            self._resources = resources
            self._changes = (before, changed)

    def _changed_names(
        self, configs: dict[str, list[bytes]], scoped: dict[str, _ScopedListener]
    ) -> set[str] | None:
        """The names whose RouteConfiguration may differ from the previous on_change's (None: not
        known).  Per scoped listener, only what _scoped_plain assembled again; the other
        configurations are few (one per listener and secure host) and all named."""
        names = set(configs).union(self._entries)
        for name in self._scoped_memo.keys() | scoped.keys():
            now, memo = scoped.get(name), self._scoped_memo.get(name)
            if now is memo:
                continue
            if now is None or memo is None or now.touched is None:
                return None  # a listener came or went, or was assembled from scratch
            names.update(now.touched)
        return names

    def _add_listener(
        self,
        listener: Listener,
        dag_sealed: bool,
        builder: _Build,
        configs: dict[str, list[bytes]],
        members: dict[str, list[VirtualHost]],
        scoped: dict[str, _ScopedListener],
    ) -> None:
        if listener.virtual_hosts:
            name = listener.http_route_config_name()
            # A sealed DAG's hosts are sorted by name already (DAG.prune).
            hosts = listener.virtual_hosts.values()
            vhosts = list(hosts) if dag_sealed else _by_name(hosts)
            plain = builder.plain_vhosts(listener.name, vhosts)
            if self.scoped:
                configs.pop(name, None)  # built with the listener's other plain configurations
                scoped[name] = self._scoped_plain(name, plain)
            else:
                configs.setdefault(name, []).extend(plain.entries())
            members[name] = vhosts
        for fqdn in sorted(listener.secure_virtual_hosts):
            vhost = listener.secure_virtual_hosts[fqdn]
            if vhost.tcp_proxy is not None or not vhost.serves_http():
                continue
            entry = builder.vhost(listener, vhost, secure=True)
            config = configs.setdefault(listener.secure_route_config_name(vhost.name), [])
            config.append(entry)
            for other in _shared_hosts(listener, vhost):
                config.append(builder.vhost(listener, other, secure=True))
            if vhost.through_fallback():
                configs.setdefault(FALLBACK_ROUTE_CONFIG, []).append(entry)
                members.setdefault(FALLBACK_ROUTE_CONFIG, []).append(vhost)

    def _scoped_plain(self, name: str, plain: _PlainHosts) -> _ScopedListener:
        """A listener's plain RouteConfigurations in the scoped shape: each exact host its own,
        the others together in ``name``.  Only the hosts whose entry changed since the last build
        (or that came or went) are assembled again: one changed host among 10k costs one
        RouteConfiguration."""
        memo = self._scoped_memo.get(name)
        vhosts, changed = plain.vhosts, plain.changed
        if memo is None:
            by_name = dict(zip([vhost.name for vhost in vhosts], plain.entries(), strict=True))
            built = {name: self._shared_config(name, by_name)}
            for fqdn in filter(is_exact, by_name):
                own = host_route_config_name(name, fqdn)
                built[own] = self._scoped_config(own, [by_name[fqdn]], self._resources.get(own))
            return _ScopedListener(by_name, built, None)
        before = memo.entries
        if changed is not None:
            updates = {vhosts[i].name: plain.translated[i].entry for i in changed}
            moved = [fqdn for fqdn, entry in updates.items() if before.get(fqdn) is not entry]
            if not moved:
                return memo
            # Updated in place, not copied (10k entries): the memo is replaced by what it becomes.
            by_name, gone, resources = before, [], memo.resources
            by_name.update(updates)
        else:
            by_name = dict(zip([vhost.name for vhost in vhosts], plain.entries(), strict=True))
            moved = [fqdn for fqdn, entry in by_name.items() if before.get(fqdn) is not entry]
            gone = [fqdn for fqdn in before if fqdn not in by_name]
            if not (moved or gone):
                return memo
            resources = dict(memo.resources)
        touched = set()
        for fqdn in filter(is_exact, gone):
            own = host_route_config_name(name, fqdn)
            del resources[own]
            touched.add(own)
        for fqdn in filter(is_exact, moved):
            own = host_route_config_name(name, fqdn)
            resources[own] = self._scoped_config(own, [by_name[fqdn]], resources.get(own))
            touched.add(own)
        if not all(map(is_exact, itertools.chain(moved, gone))):
            resources[name] = self._shared_config(name, by_name, resources.get(name))
            touched.add(name)
        return _ScopedListener(by_name, resources, frozenset(touched))

    def _shared_config(
        self, name: str, entries: dict[str, bytes], previous: Resource | None = None
    ) -> Resource:
        """The listener's RouteConfiguration of its wildcard hosts and ``*`` (the scopes' fallback)."""
        shared = [entry for fqdn, entry in entries.items() if not is_exact(fqdn)]
        return self._scoped_config(
            name, shared, previous if previous is not None else self._resources.get(name)
        )

    def _scoped_config(self, name: str, vhosts: list[bytes], previous: Resource | None) -> Resource:
        head = _config_head(name)
        body = b"".join((head, *vhosts, self._scoped_tail))
        if previous is not None and previous.body == body:
            return previous
        return Resource(name, self.type_url, body, content_version(body))

    def _check_skeletons(
        self, members: dict[str, list[VirtualHost]], same: set[str], heads: dict[str, bytes]
    ) -> None:
        """The rules across a RouteConfiguration's virtual hosts (no domain twice, one ``*``),
        checked on a skeleton of names and domains whenever the set of virtual hosts changes.

        Only the new virtual hosts and those they could clash with (same name in any case,
        ``*``) go into the skeleton, so a new host costs the same among 10 or 10k.  A configuration
        named in ``same`` has the same hosts as last time: checked then, if it passed.
        """
        skeletons: dict[str, tuple[str, ...]] = {}
        for name, vhosts in members.items():
            if name in same and name in self._skeletons:
                skeletons[name] = self._skeletons[name]
                continue
            fqdns = tuple([vhost.name for vhost in vhosts])
            skeletons[name] = fqdns
            before = self._skeletons.get(name)
            if before == fqdns:
                continue
            if before is None:
                chosen = list(vhosts)
            else:
                new = {f.lower() for f in set(fqdns) - set(before)} | {"*"}
                chosen = [v for v in vhosts if v.name.lower() in new]
            # Parsed from the heads' bytes: one C call rather than a message per host.
            entries = [
                embedded(_VIRTUAL_HOSTS_FIELD, heads.get(v.name) or virtual_host_head_bytes(v.name))
                for v in chosen
            ]
            skeleton = route_v3.RouteConfiguration.FromString(b"".join((_config_head(name), *entries)))
            problems = violations(skeleton)
            if problems:
                # Suspects: everything in the virtual hosts named (narrowed to what changed later).
                named = {int(i) for v in problems for i in _VHOST_INDEX.findall(v.path)[:1]}
                origins = frozenset(
                    r.origin for i in named for r in chosen[i].routes.values() if r.origin is not None
                )
                note = violation_note(f"RouteConfiguration {name!r}", problems)
                self._faults.append(Fault(note=note, origins=origins))
                skeletons.pop(name)  # checked again next time
        self._skeletons = skeletons

    def _resource(self, name: str, vhosts: list[bytes]) -> Resource:
        previous = self._resources.get(name)
        if previous is not None and self._entries.get(name) == vhosts:
            return previous  # the same entries (mostly the same bytes objects): the same body
        head = _config_head(name)
        # Scoped listeners' plain configurations are built by _scoped_plain; what comes here in the
        # scoped shape behind a scope is only an ingress_http without virtual hosts.
        tail = self._scoped_tail if self.scoped and name == HTTP_ROUTE_CONFIG else self._tail
        body = b"".join((head, *vhosts, tail))
        if previous is not None and previous.body == body:
            return previous
        return Resource(name, self.type_url, body, content_version(body))


@attrs.frozen(eq=False)
class _PlainHosts:
    """A listener's plain virtual hosts as last translated, to compare the next build's with."""

    vhosts: list[VirtualHost]  # by name
    translated: list[_Translated]  # theirs, in that order
    by_name: dict[str, _Translated]
    # The positions of hosts other than last time's objects (same names), None if not known.
    changed: list[int] | None
    faulty: bool  # some host was translated with faults (left out of its entry)

    def entries(self) -> list[bytes]:
        return [done.entry for done in self.translated]


def _replaced(new: list[VirtualHost], old: list[VirtualHost]) -> list[int] | None:
    """The positions where ``new`` holds another object than ``old``, or None when their lengths
    differ.

    A chunk at a time: list equality runs in C and, virtual hosts comparing by identity
    (``eq=False``), says whether a chunk holds the same objects; only a differing chunk is looked
    at element by element.  One change among 10k hosts then costs ~160 slice comparisons rather
    than 10k calls.
    """
    if len(new) != len(old):
        return None
    changed: list[int] = []
    for start in range(0, len(new), _CHUNK):
        end = start + _CHUNK
        if new[start:end] != old[start:end]:
            chunk = range(start, min(end, len(new)))
            changed += itertools.compress(chunk, map(operator.is_not, new[start:end], old[start:end]))
    return changed


_CHUNK = 64


@attrs.frozen(eq=False)
class _ScopedListener:
    """What :meth:`RouteCache._scoped_plain` built for one listener, to compare the next build with."""

    entries: dict[str, bytes]  # its plain virtual hosts' encoded entries, by host name
    resources: dict[str, Resource]  # its plain RouteConfigurations by name
    # The names of ``resources`` that may differ from the memo it was derived from (None: built anew).
    touched: frozenset[str] | None


def _by_name(vhosts: Iterable[VirtualHost]) -> list[VirtualHost]:
    """Virtual hosts in a RouteConfiguration sort by name (Contour's virtualHostSorter)."""
    return sorted(vhosts, key=_NAME)


_NAME = attrgetter("name")
_VHOST_INDEX = re.compile(r"^virtual_hosts\[(\d+)\]")
# Stand in for a virtual host translated with faults and its routes: equal to no host's.
_NEVER_EQUAL = {"": Route(path=PathMatch(kind=PathKind.EXACT, value="\x00never"))}
_NO_VHOST = VirtualHost("\x00never")


class _Build:
    """One on_change: reads the previous memo table and fills a new one with what it uses."""

    def __init__(
        self,
        previous: dict[VHostKey, _Translated],
        plain: dict[str, _PlainHosts],
        filters: HttpFilters,
        marker: bytes,
    ) -> None:
        self.previous = previous
        self.plain_previous = plain
        self.filters = filters
        self.marker = marker  # appended to plain exact hosts (the scope selector looks for it)
        self.current: dict[VHostKey, _Translated] = {}
        self.plain: dict[str, _PlainHosts] = {}
        self.faults: list[Fault] = []
        # The encoded heads of the hosts translated in this build, which _check_skeletons needs
        # again (all of them in a first build).
        self.heads: dict[str, bytes] = {}

    def plain_vhosts(self, name: str, vhosts: list[VirtualHost]) -> _PlainHosts:
        """The entries of listener ``name``'s plain virtual hosts (the hot path).  An unchanged host
        is the same frozen object as last time: when the hosts are the same but a few, only those
        few are looked at, the rest is found in C."""
        before = self.plain_previous.get(name)
        changed = _replaced(vhosts, before.vhosts) if before is not None else None
        # A host translated with faults is looked at again (its fault found again) by the full pass.
        if before is None or before.faulty or changed is None or len(changed) * 4 > len(vhosts):
            by_name: dict[str, _Translated] = {}
            translated = []
            old = before.by_name if before is not None else {}
            for vhost in vhosts:
                done = old.get(vhost.name)
                if done is None or done.vhost is not vhost:
                    done = self._refresh(done, vhost, False)
                by_name[vhost.name] = done
                translated.append(done)
            changed = None
        else:
            # The few changed hosts are written over last time's tables in place (copying 10k
            # entries would cost more than they do): `before` is replaced by what it becomes.
            translated = before.translated
            new = {}
            for i in changed:
                vhost = vhosts[i]
                done = before.by_name.get(vhost.name)
                if done is None or done.vhost is not vhost:
                    done = self._refresh(done, vhost, False)
                translated[i] = new[vhost.name] = done
            if all(before.vhosts[i].name == vhosts[i].name for i in changed):
                by_name = before.by_name
                by_name.update(new)
            else:  # a host took another's place: the names moved
                by_name = dict(zip([vhost.name for vhost in vhosts], translated, strict=True))
                changed = None
        faulty = any(done.vhost is _NO_VHOST for done in (translated if changed is None else new.values()))
        plain = self.plain[name] = _PlainHosts(vhosts, translated, by_name, changed, faulty)
        return plain

    def vhost(self, listener: Listener, vhost: VirtualHost, secure: bool) -> bytes:
        key: VHostKey = (listener.name, vhost.name, secure)
        done = self.current.get(key)
        if done is not None:
            return done.entry
        before = self.previous.get(key)
        if before is None or before.vhost is not vhost:
            before = self._refresh(before, vhost, secure)
        self.current[key] = before
        return before.entry

    def _refresh(self, done: _Translated | None, vhost: VirtualHost, secure: bool) -> _Translated:
        """The entry of a host that is not the object last translated: the same if it is equal."""
        policies = vhost.policies()
        if done is None:
            return self._translate(vhost, secure, policies, {})
        # Route pieces carry the wildcard's :authority match (or not): reused only alike.
        if done.vhost.single_label_wildcard != vhost.single_label_wildcard:
            return self._translate(vhost, secure, policies, {})
        if done.routes != vhost.routes or done.policies != policies:
            return self._translate(vhost, secure, policies, dict(done.pieces))
        return attrs.evolve(done, vhost=vhost)

    def _translate(
        self, vhost: VirtualHost, secure: bool, policies: VHostPolicies, known: dict[Route, _Piece]
    ) -> _Translated:
        """Re-assemble a changed virtual host, translating (and keying) only routes not seen before.

        Routes never depend on the virtual host's policies (Envoy falls back from a route's
        per-filter config to its virtual host's), so their pieces survive a policy change.  A new
        route, head or tail that breaks Envoy's rules is left out and reported as a fault of the
        objects it came from; such a virtual host is not memoised, so the fault is found again.
        """
        fqdn, filters = vhost.name, self.filters
        routes = vhost.routes if vhost.frozen else dict(vhost.routes)
        authority = wildcard_authority_match(fqdn) if vhost.single_label_wildcard else None
        pieces: list[tuple[Route, _Piece]] = []
        faults = self.faults
        passes, plain_passes = _passes(route_components.Route), _plain_passes()

        def breaks(route: Route) -> bool:
            return bool(violations(build_route(route, secure, authority, fqdn, filters)))

        found = len(faults)
        guard = bool(self.marker) and not secure
        for route in routes.values():
            piece = known.get(route) if known else None  # a first build: hash no route
            if piece is None:
                message, body, plain = build_route(route, secure, authority, fqdn, filters, guard, True)
                fine = plain_passes(message, plain) if plain is not None else passes(message)
                problems = None if fine else violations(message)
                if problems:
                    note = violation_note(f"a route of virtual host {fqdn!r}", problems)
                    origins = _culprits(route, breaks)
                    faults.append(Fault(note=note, origins=origins, precise=bool(origins)))
                    continue
                piece = (route_key(route), embedded(_ROUTES_FIELD, body))
            pieces.append((route, piece))
        head = self.heads[fqdn] = virtual_host_head_bytes(fqdn)
        tail = virtual_host_tail_bytes(vhost, filters)
        whole = route_components.VirtualHost.FromString(head + tail)  # the vhost without routes
        problems = None if _passes(route_components.VirtualHost)(whole) else violations(whole)
        if problems:
            # Virtual-host-wide settings: suspects are all its routes' objects (narrowed later).
            origins = frozenset(r.origin for r in routes.values() if r.origin is not None)
            origins |= vhost.attachments.origins()
            faults.append(Fault(note=violation_note(f"virtual host {fqdn!r}", problems), origins=origins))
            tail = b""
        ordered = [piece for _, piece in pieces]
        if len(ordered) > 1:
            ordered.sort(key=itemgetter(0))
        marker = self.marker if not secure and is_exact(fqdn) else b""
        body = b"".join((head, *(p[1] for p in ordered), tail, marker))
        # A sentinel host and route set when something was left out: the next build translates it again.
        if len(faults) == found:
            return _Translated(vhost, routes, policies, embedded(_VIRTUAL_HOSTS_FIELD, body), pieces)
        return _Translated(_NO_VHOST, _NEVER_EQUAL, policies, embedded(_VIRTUAL_HOSTS_FIELD, body), pieces)


@functools.cache
def _passes(message_type: type[Message]) -> Callable[[Message], bool]:
    """The type's pass check, found once: every route and virtual host of a build is put to it,
    and only one that does not pass to violations."""
    return pass_check(message_type.DESCRIPTOR)


@functools.cache
def _plain_passes() -> Callable[[route_components.Route, Sequence[bytes]], bool]:
    """The pass check of plain forwards, given their parts' encodings (no part read again)."""
    return parts_pass_check(route_components.Route.DESCRIPTOR, PLAIN_FORWARD_FIELDS)


def _culprits(route: Route, breaks: Callable[[Route], bool]) -> frozenset[ObjectKey]:
    """Who made a route Envoy would refuse: the objects that attached data to it when the route
    is fine without their attachments (what a plugin's filter made of them broke the rule),
    otherwise the object the route came from.  Runs only when a route is refused."""
    attached = route.attachments.origins().union(*(c.attachments.origins() for c in route.clusters))
    if attached:
        clusters = tuple(attrs.evolve(c, attachments=NO_ATTACHMENTS) for c in route.clusters)
        if not breaks(attrs.evolve(route, attachments=NO_ATTACHMENTS, clusters=clusters)):
            return attached
    return frozenset((route.origin,)) if route.origin is not None else frozenset()


def _shared_hosts(listener: Listener, vhost: SecureVirtualHost) -> Iterator[SecureVirtualHost]:
    """The other HTTP hosts whose routes ``vhost``'s chain serves too (``serves_hosts_of``)."""
    for name in vhost.serves_hosts_of:
        other = listener.secure_virtual_hosts.get(name)
        if other is not None and other is not vhost and other.tcp_proxy is None and other.serves_http():
            yield other
