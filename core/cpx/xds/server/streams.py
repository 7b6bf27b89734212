"""Per-stream xDS protocol state: what each Envoy subscribed to and what it was last sent.

A stream is driven by two coroutines in :mod:`cpx.xds.server.ads`: a reader that feeds every request
to :meth:`Stream.on_request`, and a writer that, whenever woken (a request or a new snapshot),
takes the responses :meth:`Stream.responses` yields. Both run on the event loop, so the state here
needs no locks. The rules follow ``xds-protocol.md`` (Envoy's xds_protocol.rst plus the peer
bugs to avoid); the comments say which rule a branch implements.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import attrs

from cpx.xds.resource import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    PUSH_ORDER,
    SCOPED_ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from cpx.xds.server import wire
from cpx.xds.server.changes import ChangeCache, Changes
from cpx.xds.server.counters import XdsMetrics
from cpx.xds.server.edsnames import ClusterEdsNames, eds_name
from cpx.xds.server.guard import PeerStreams, XdsLimits, printable, type_label
from cpx.xds.server.names import NameSets
from cpx.xds.server.rejects import Rejections, SentResponse, short
from cpx.xds.server.sequencing import ROUTING, Sequencer

log = logging.getLogger("cpx.xds")

# Types for which a first request without names means "everything" (legacy wildcard). Envoy
# always subscribes to LDS, CDS and SRDS (ScopedRdsConfigSubscription) this way; for the others an
# empty list means "nothing".
LEGACY_WILDCARD = frozenset({LISTENER, CLUSTER, SCOPED_ROUTE})
WILDCARD = "*"

# Delta: what the client holds for a name, besides a real version.
_ABSENT = ""  # we told the client the name does not exist (removed_resources)
_RESEND = "\0resend"  # the client dropped it (unsubscribed under wildcard): announce it again


# Responses remembered per stream until Envoy answers them (it answers each in turn; a few more
# cover per-type answers arriving out of order on ADS).
_MAX_UNANSWERED = 16


class ProtocolError(Exception):
    """The client broke the protocol; its stream is closed with INVALID_ARGUMENT."""


class LimitExceeded(ProtocolError):
    """The client asked for more than :class:`~cpx.xds.server.guard.XdsLimits` allows (RESOURCE_EXHAUSTED)."""


def _ordered(type_urls: Sequence[str]) -> list[str]:
    """Make-before-break: CDS, EDS, SDS, LDS, RDS, then any other type."""
    known = [t for t in PUSH_ORDER if t in type_urls]
    return known + sorted(t for t in type_urls if t not in PUSH_ORDER)


@attrs.define(eq=False)
class StreamHub:
    """What every stream of one server shares: the snapshot, caches, metrics, limits, streams by node."""

    metrics: XdsMetrics
    rejections: Rejections
    limits: XdsLimits = attrs.field(factory=XdsLimits)
    snapshot: Snapshot | None = None
    stopping: bool = False
    cache: wire.ResponseCache = attrs.field(factory=wire.ResponseCache)
    changes: ChangeCache = attrs.field(factory=ChangeCache)
    name_sets: NameSets = attrs.field(factory=NameSets)
    eds_names: ClusterEdsNames = attrs.field(factory=ClusterEdsNames)
    streams: set[Stream] = attrs.field(factory=set)
    peers: PeerStreams = attrs.field(
        default=attrs.Factory(lambda self: PeerStreams(self.limits.max_streams_per_peer), takes_self=True)
    )
    _by_node: dict[str, set[Stream]] = attrs.field(factory=dict)
    # Per-type streams of one Envoy (one node) share its make-before-break state.
    _sequencers: dict[str, Sequencer] = attrs.field(factory=dict)

    def set_snapshot(self, snapshot: Snapshot) -> None:
        previous = self.snapshot
        for type_url, snap in snapshot.types.items():
            # Also when no stream answers from it: it links its successor.
            self.changes.learn(snap)
            before = previous.types.get(type_url) if previous is not None else None
            if before is not None:
                self.changes.link(before, snap)
        self.snapshot = snapshot
        self.wake_all()

    def wake_all(self) -> None:
        for stream in self.streams:
            stream.wake.set()

    def add(self, stream: Stream) -> None:
        self.streams.add(stream)
        self.metrics.xds_connections.inc()

    def remove(self, stream: Stream) -> None:
        stream.release()
        self.streams.discard(stream)
        peers = self._by_node.get(stream.node_id)
        if peers is not None:
            peers.discard(stream)
            if not peers:
                del self._by_node[stream.node_id]
                self._sequencers.pop(stream.node_id, None)
        self.metrics.xds_connections.dec()

    def node_known(self, stream: Stream) -> None:
        self._by_node.setdefault(stream.node_id, set()).add(stream)
        if stream.fixed_type is not None:
            stream.sequencer = self._sequencers.setdefault(stream.node_id, Sequencer())

    def carrier(self, origin: Stream, type_url: str) -> Stream | None:
        """The stream that carries ``type_url`` to the Envoy of ``origin``: ``origin`` itself on
        ADS, else the per-type stream of the same node (the only link between an Envoy's streams)."""
        if origin.fixed_type is None:
            return origin if type_url in origin.watches() else None
        for stream in self._by_node.get(origin.node_id, ()):
            if stream.fixed_type == type_url and type_url in stream.watches():
                return stream
        return None

    def poke(self, origin: Stream) -> None:
        """Wake ``origin`` and, for a per-type stream, the other streams of its Envoy (one's ACK
        can let another's routing move on)."""
        origin.wake.set()
        if origin.fixed_type is not None:
            for stream in self._by_node.get(origin.node_id, ()):
                stream.wake.set()

    def clusters_sent(self, origin: Stream, changed: Sequence[Resource]) -> None:
        """Let the EDS subscriptions of the same Envoy finish cluster warming.

        Envoy needs a fresh EDS response for a new or updated cluster even when its endpoints did
        not change. On ADS that is the same stream; with per-type streams, the EDS stream of the
        same node (the only link between an Envoy's streams).
        """
        if origin.fixed_type is None:
            origin.clusters_sent(changed)
            return
        for stream in self._by_node.get(origin.node_id, ()):
            if stream.fixed_type == ENDPOINT:
                stream.clusters_sent(changed)

    def count_response(self, type_url: str) -> None:
        self.metrics.xds_responses.labels(type_url=type_label(type_url)).inc()


@attrs.define(eq=False)
class Stream:
    """One gRPC stream (ADS when ``fixed_type`` is None, else a per-type service)."""

    hub: StreamHub
    fixed_type: str | None
    peer: str = ""
    node_id: str = ""
    wake: asyncio.Event = attrs.field(factory=asyncio.Event)
    _nonce: int = 0
    _unanswered: OrderedDict[str, SentResponse] = attrs.field(factory=OrderedDict)
    # Make-before-break (docs/design/0016): the stream's own on ADS, its node's on per-type streams.
    sequencer: Sequencer | None = attrs.field(
        default=attrs.Factory(lambda self: Sequencer() if self.fixed_type is None else None, takes_self=True)
    )

    @property
    def who(self) -> str:
        """The client, for log lines (its node id is whatever it claims, so escaped)."""
        return printable(self.node_id, 128) if self.node_id else self.peer

    def on_request(self, request: Any) -> None:
        raise NotImplementedError

    def release(self) -> None:
        """Drop what an ended stream holds: a stream can linger in a reference cycle (its task,
        an exception's traceback) until the cyclic collector runs, and a burst of short-lived
        streams must not keep their watches and views alive meanwhile."""
        self._unanswered.clear()
        self.sequencer = None

    def responses(self, snapshot: Snapshot) -> Iterator[bytes]:
        """The responses the stream's state calls for, in make-before-break order."""
        seq = self.sequencer
        for type_url in _ordered(list(self.watches())):
            if seq is None:
                if type_url in ROUTING and snapshot.clusters_only:
                    continue  # its routing is not built yet
                out = self._respond_type(type_url, snapshot.get(type_url))
            else:
                if type_url in ROUTING:
                    seq.advance(snapshot, self._holds_clusters_of)
                    if seq.sent_routing is None:
                        continue  # nothing to route to yet: answered once the clusters are in
                out = self._respond_type(type_url, seq.view(snapshot, self.hub.changes).get(type_url))
            if out is not None:
                yield out
        if seq is not None and seq.acked_routing is not seq.sent_routing and self._routing_settled():
            seq.routing_acked()
            self.hub.poke(self)  # what only the older routing used can go now

    def _holds_clusters_of(self, current: Snapshot) -> bool:
        """The Envoy ACKed the clusters of ``current`` and was sent their endpoints."""
        assert self.sequencer is not None
        view = self.sequencer.view(current, self.hub.changes)
        clusters = current.get(CLUSTER).resources
        cds = self.hub.carrier(self, CLUSTER)
        if cds is not None and not (
            cds._settled(CLUSTER) and cds._holds(CLUSTER, view.get(CLUSTER), clusters.keys())
        ):
            return False
        eds = self.hub.carrier(self, ENDPOINT)
        if eds is None:
            return True
        endpoints = view.get(ENDPOINT)
        wanted = self.hub.eds_names.wanted(current.get(CLUSTER), endpoints, self.hub.changes)
        return eds._holds(ENDPOINT, endpoints, wanted)

    def _routing_settled(self) -> bool:
        carriers = ((t, self.hub.carrier(self, t)) for t in ROUTING)
        return all(stream._settled(t) for t, stream in carriers if stream is not None)

    def _respond_type(self, type_url: str, snap: TypeSnapshot) -> bytes | None:
        raise NotImplementedError

    def _settled(self, type_url: str) -> bool:
        """The latest response of ``type_url`` was ACKed (or none was sent)."""
        raise NotImplementedError

    def _holds(self, type_url: str, snap: TypeSnapshot, names: Collection[str]) -> bool:
        """The client was sent those of ``names`` it subscribes to, at their versions in ``snap``.

        Only subscribed names count: Envoy subscribes to a new cluster's endpoints before it ACKs
        the cluster (it holds EDS requests back while it applies CDS, then sends them first).
        """
        raise NotImplementedError

    def _behind(self, watch: SotwWatch | DeltaWatch, snap: TypeSnapshot) -> Collection[str] | None:
        """The names of ``snap`` the client may hold at another version (None: any of them).

        Once a watch answered from its ``basis``, the client holds every name of it it subscribes
        to at its version, except those subscribed since: only names that changed from ``basis``
        to ``snap``, or are newly subscribed, can lag. A changed subscription (``dirty``) voids it.
        """
        basis = watch.basis
        if basis is None or watch.dirty:
            return None
        if basis.version == snap.version:
            return watch.added
        return self.hub.changes.between(basis, snap).changed | watch.added

    def clusters_sent(self, changed: Sequence[Resource]) -> None:
        raise NotImplementedError

    def sent(self, response: SentResponse) -> str:
        """Remember a response until Envoy answers it; returns its nonce."""
        self._nonce += 1
        nonce = str(self._nonce)
        self._unanswered[nonce] = response
        if len(self._unanswered) > _MAX_UNANSWERED:
            self._unanswered.popitem(last=False)
        return nonce

    def answered(self, type_url: str, request: Any, *, stale: bool = False) -> None:
        """Forget the response a request answers; report it when the request is a NACK.

        A ``stale`` request (SotW, superseded nonce) counts only if it answers a response not
        answered yet: Envoy may reject a response after cpx sent the next one.
        """
        nonce = str(request.response_nonce)
        sent = self._unanswered.pop(nonce, None) if nonce else None
        if sent is not None and sent.type_url != type_url:
            self._unanswered[nonce] = sent  # not an answer to that response: keep it
            sent = None
        if request.HasField("error_detail") and not (stale and sent is None):
            self.hub.rejections.nack(
                who=self.who, peer=self.peer, node_id=self.node_id, request=request, sent=sent
            )

    def accept(self, request: Any, names: int) -> str:
        """Common bookkeeping of a request carrying ``names`` resource names; returns its type URL."""
        type_url = str(request.type_url) or self.fixed_type
        if not type_url:
            raise ProtocolError("type_url is required on an aggregated stream")
        if self.fixed_type is not None and type_url != self.fixed_type:
            raise ProtocolError(
                f"type_url {printable(type_url, 200)} on the {short(self.fixed_type)} service"
            )
        limits = self.hub.limits
        if names > limits.max_resource_names:
            raise LimitExceeded(f"{names} resource names in one request (limit {limits.max_resource_names})")
        if type_url not in self.watches() and len(self.watches()) >= limits.max_types_per_stream:
            raise LimitExceeded(f"more than {limits.max_types_per_stream} type URLs on one stream")
        # Only the first request is guaranteed to carry the node.
        if not self.node_id and request.HasField("node") and request.node.id:
            self.node_id = str(request.node.id)
            self.hub.node_known(self)
        self.hub.metrics.xds_requests.labels(type_url=type_label(type_url)).inc()
        return type_url

    def watches(self) -> Mapping[str, object]:
        raise NotImplementedError


# --- State of the world --------------------------------------------------------------------


@attrs.define(eq=False)
class SotwWatch:
    type_url: str
    wildcard: bool = False
    names: frozenset[str] = frozenset()
    named_ever: bool = False  # once a client named anything, an empty list means "nothing"
    nonce: str = ""  # latest nonce sent for this type
    settled: bool = True  # the response of ``nonce`` was ACKed
    sent_version: str | None = None  # wildcard: type version the client has (or was sent)
    # Wildcard: the resources last sent (clusters: to tell which changed, for EDS warming).
    sent_snap: TypeSnapshot | None = None
    sent: dict[str, str] = attrs.field(factory=dict)  # named: name -> version the client was sent
    # Cluster warming: names to send again, unchanged, with the next response (EDS).
    warming: set[str] = attrs.field(factory=set)
    force: bool = False  # answer now even if nothing changed (a warming cluster asked)
    added: set[str] = attrs.field(factory=set)  # named: subscribed since the last check
    dirty: bool = True  # the subscription changed since the last check
    basis: TypeSnapshot | None = None  # what the last check answered from

    def subscribe(self, names: frozenset[str], initial: bool, client_version: str) -> None:
        was_wildcard = self.wildcard
        explicit = names - {WILDCARD} if WILDCARD in names else names
        wildcard = WILDCARD in names or (
            not names and not self.named_ever and self.type_url in LEGACY_WILDCARD
        )
        # The very same set when the request repeats the last one's names (NameSets).
        same = explicit is self.names or explicit == self.names
        if not initial and wildcard == was_wildcard and (same or not wildcard):
            # An ACK (or NACK) of the same subscription, or other names (a new route, a removed
            # cluster): the new names are answered, the others as the snapshot changes them, and
            # the dropped ones are forgotten, so asking again later gets an answer.
            if not same:
                self.added |= explicit - self.names
                for name in self.names - explicit:
                    self.sent.pop(name, None)
            self.names = explicit
            self.named_ever = self.named_ever or bool(explicit)
            return
        self.wildcard = wildcard
        self.named_ever = self.named_ever or bool(explicit)
        self.names = explicit
        if initial:
            # A reconnecting wildcard client that already has the current version is not resent;
            # named subscriptions are answered in full (we cannot know what it holds).
            self.sent_version = client_version or None
            self.sent = {}
        elif self.wildcard and not was_wildcard:
            self.sent_version = None
        else:
            self.sent = {n: v for n, v in self.sent.items() if n in explicit}
        self.dirty = True


@attrs.define(eq=False)
class SotwStream(Stream):
    by_type: dict[str, SotwWatch] = attrs.field(factory=dict)

    def release(self) -> None:
        super().release()
        self.by_type.clear()

    def watches(self) -> Mapping[str, SotwWatch]:
        return self.by_type

    def on_request(self, request: Any) -> None:
        # Counted before parsing into Python strings: 4 MiB can hold a million one-letter names.
        type_url = self.accept(request, len(request.resource_names))
        watch = self.by_type.get(type_url)
        nonce = str(request.response_nonce)
        stale = watch is not None and bool(watch.nonce) and bool(nonce) and nonce != watch.nonce
        # A NACK of a superseded response still says what Envoy rejected.
        self.answered(type_url, request, stale=stale)
        if stale:
            # Superseded by a response the client has not seen yet: it will answer that one.
            log.debug("%s: ignoring %s request with a stale nonce", self.who, short(type_url))
            return
        if watch is None:
            watch = self.by_type[type_url] = SotwWatch(type_url)
        elif nonce and nonce == watch.nonce:
            watch.settled = not request.HasField("error_detail")
        # No nonce: a (re)subscription. Nonces do not survive a reconnect.
        initial = not nonce or not watch.nonce
        watch.subscribe(self.hub.name_sets.of(request), initial, str(request.version_info))
        if watch.warming:
            watch.force = True

    def clusters_sent(self, changed: Sequence[Resource]) -> None:
        watch = self.by_type.get(ENDPOINT)
        if watch is not None:
            watch.warming.update(name for name in map(eds_name, changed) if name is not None)

    def _respond_type(self, type_url: str, snap: TypeSnapshot) -> bytes | None:
        return self._respond(self.by_type[type_url], snap)

    def _settled(self, type_url: str) -> bool:
        return self.by_type[type_url].settled

    def _holds(self, type_url: str, snap: TypeSnapshot, names: Collection[str]) -> bool:
        watch = self.by_type[type_url]
        if watch.wildcard:
            return watch.sent_version == snap.version
        behind = self._behind(watch, snap)
        wanted = names if behind is None else [n for n in behind if n in names]
        # A pending warming resend (SotwWatch.warming) is not waited for: Envoy asks for it only
        # when it changed an EDS cluster, and keeps the old cluster in use while the new one warms.
        return all(watch.sent.get(n) == snap.resources[n].version for n in wanted if n in watch.names)

    def _respond(self, watch: SotwWatch, snap: TypeSnapshot) -> bytes | None:
        basis = watch.basis
        if not (watch.dirty or watch.force or watch.added or basis is None or basis.version != snap.version):
            return None
        changes = None if watch.dirty or basis is None else self.hub.changes.between(basis, snap)
        watch.dirty, watch.basis = False, snap
        if watch.wildcard:
            names = self._wildcard_names(watch, snap)
            selected = None
        else:
            names = selected = self._named_names(watch, snap, changes)
        watch.force = False
        if names is None:
            return None
        resources = self.hub.cache.parts(snap, selected)
        watch.nonce = self.sent(SentResponse(snap.type_url, snap.version, names))
        watch.settled = False
        self.hub.count_response(snap.type_url)
        log.debug("%s: sending %s version %s (%d)", self.who, short(snap.type_url), snap.version, len(names))
        return wire.sotw_response_of(snap.version, snap.type_url, resources, watch.nonce)

    def _wildcard_names(self, watch: SotwWatch, snap: TypeSnapshot) -> Collection[str] | None:
        """Every resource (LDS, CDS, SRDS responses are complete), or None when the client has them.

        Compared with what was sent, never with what was ACKed, so a NACKed version is not resent
        (no NACK loop).
        """
        if watch.sent_version == snap.version and not watch.force:
            return None
        if snap.type_url == CLUSTER:
            before = watch.sent_snap
            changed = (
                snap.resources.keys() if before is None else self.hub.changes.between(before, snap).changed
            )
            self.hub.clusters_sent(self, [snap.resources[n] for n in changed])
        watch.sent_version, watch.sent_snap = snap.version, snap
        return snap.resources.keys()

    def _named_names(
        self, watch: SotwWatch, snap: TypeSnapshot, changes: Changes | None
    ) -> frozenset[str] | None:
        """The subscribed resources the client was not sent at their current version, plus those a
        warming cluster needs again; None when there are none.

        Only named types (RDS, EDS, SDS) may be partial (xDS: Envoy updates the subscriptions a
        response names and leaves the others as they are), so one changed RouteConfiguration
        among thousands costs Envoy that one. A subscription that is new, or asked for again after
        being dropped, or a reconnect, is not in :attr:`SotwWatch.sent` and is sent in full.

        With ``changes`` (the subscription is as it was at the last check) only the changed names
        are looked at: :attr:`SotwWatch.sent` is then current for every other name.
        """
        warming, watch.warming = watch.warming, set()
        added, watch.added = watch.added, set()
        if changes is None:
            current = {n: snap.resources[n].version for n in watch.names if n in snap.resources}
            sent, watch.sent = watch.sent, current
            names = frozenset(n for n, version in current.items() if sent.get(n) != version or n in warming)
            return names or None
        names = frozenset(
            n for n in (*changes.changed, *warming, *added) if n in watch.names and n in snap.resources
        )
        for name in changes.removed:
            watch.sent.pop(name, None)
        for name in names:
            watch.sent[name] = snap.resources[name].version
        return names or None


# --- Delta (incremental) -------------------------------------------------------------------


@attrs.define(eq=False)
class DeltaWatch:
    type_url: str
    wildcard: bool = False
    names: set[str] = attrs.field(factory=set)  # explicit subscriptions
    known: dict[str, str] = attrs.field(factory=dict)  # name -> version the client holds
    first: bool = True  # nothing sent yet: a wildcard subscription always gets a first answer
    nonce: str = ""  # latest nonce sent for this type
    settled: bool = True  # the response of ``nonce`` was ACKed
    dirty: bool = True  # the subscription (or what the client holds) changed since the last check
    basis: TypeSnapshot | None = None  # what the last check answered from
    # (Re)subscribed by name, or to send again (a changed cluster's endpoints), since the last check.
    added: set[str] = attrs.field(factory=set)

    def update(self, subscribe: Sequence[str], unsubscribe: Sequence[str]) -> None:
        for name in subscribe:
            if name == WILDCARD:
                self.wildcard = self.dirty = True
            else:
                self.names.add(name)
                self.added.add(name)
        for name in unsubscribe:
            if name == WILDCARD:
                self.wildcard = False
                self.dirty = True
                continue
            self.names.discard(name)
            if self.wildcard and name in self.known:
                # Still covered by the wildcard: the protocol wants the resource or its removal.
                self.known[name] = _RESEND
                self.added.add(name)
            else:
                self.known.pop(name, None)

    def diff(
        self, resources: Mapping[str, Resource], changes: Changes | None
    ) -> tuple[list[Resource], list[str]]:
        """Resources the client lacks at their current version, and names to report removed.

        With ``changes`` (nothing but the snapshot moved since the last check) only the changed
        names are looked at: the client holds every other one at its current version.
        """
        added, self.added = self.added, set()
        if changes is not None:
            return self._diff_changes(resources, changes, added)
        candidates = resources.keys() if self.wildcard else self.names
        changed = [
            resources[n] for n in candidates if n in resources and self.known.get(n) != resources[n].version
        ]
        removed: list[str] = []
        for name, version in list(self.known.items()):
            if name in resources:
                continue
            if not (self.wildcard or name in self.names):
                del self.known[name]  # no longer of interest: the client forgot it
            elif version != _ABSENT:
                removed.append(name)
        # Explicitly subscribed names that do not exist are reported once.
        removed.extend(n for n in self.names if n not in resources and n not in self.known)
        return changed, removed

    def _diff_changes(
        self, resources: Mapping[str, Resource], changes: Changes, added: set[str]
    ) -> tuple[list[Resource], list[str]]:
        changed = [
            resources[n]
            for n in sorted(changes.changed | (added & resources.keys()))
            if (self.wildcard or n in self.names) and self.known.get(n) != resources[n].version
        ]
        # Names looked at again that do not exist are reported as a full pass would.
        removed = sorted(n for n in added if n not in resources and self._gone(n))
        for name in sorted(changes.removed):
            if not (self.wildcard or name in self.names):
                self.known.pop(name, None)
            elif self.known.get(name, _ABSENT) != _ABSENT:
                removed.append(name)
        return changed, removed

    def _gone(self, name: str) -> bool:
        """Whether a name missing from the snapshot is to be reported removed: one subscribed by
        name and never reported, or one the client holds and still wants."""
        if name not in self.known:
            return name in self.names
        return (self.wildcard or name in self.names) and self.known[name] != _ABSENT

    def record(self, changed: Sequence[Resource], removed: Sequence[str]) -> None:
        # Recorded when sent, not when ACKed: a NACK then does not cause a resend.
        for res in changed:
            self.known[res.name] = res.version
        for name in removed:
            if name in self.names:
                self.known[name] = _ABSENT
            else:
                self.known.pop(name, None)
        self.first = False


@attrs.define(eq=False)
class DeltaStream(Stream):
    by_type: dict[str, DeltaWatch] = attrs.field(factory=dict)

    def release(self) -> None:
        super().release()
        self.by_type.clear()

    def watches(self) -> Mapping[str, DeltaWatch]:
        return self.by_type

    def on_request(self, request: Any) -> None:
        # No stale-nonce filtering in delta: subscription changes count whatever the nonce.
        names = (
            len(request.resource_names_subscribe)
            + len(request.resource_names_unsubscribe)
            + len(request.initial_resource_versions)
        )
        type_url = self.accept(request, names)
        self.answered(type_url, request)
        subscribe = list(request.resource_names_subscribe)
        watch = self.by_type.get(type_url)
        if watch is None:
            watch = self.by_type[type_url] = DeltaWatch(type_url)
            watch.wildcard = not subscribe and type_url in LEGACY_WILDCARD
            # Reconnect: skip what the client already has at the same version.
            watch.known.update(dict(request.initial_resource_versions))
        elif request.response_nonce and request.response_nonce == watch.nonce:
            watch.settled = not request.HasField("error_detail")
        watch.update(subscribe, list(request.resource_names_unsubscribe))
        limit = self.hub.limits.max_resource_names
        if len(watch.names) > limit:
            raise LimitExceeded(f"more than {limit} {short(type_url)} subscribed on one stream")

    def clusters_sent(self, changed: Sequence[Resource]) -> None:
        watch = self.by_type.get(ENDPOINT)
        if watch is None:
            return
        for cluster in changed:
            name = eds_name(cluster)
            if name is not None and watch.known.get(name, _ABSENT) != _ABSENT:
                del watch.known[name]  # send it again, after the cluster
                watch.added.add(name)
                self.wake.set()  # per-type EDS stream: nothing else would wake it

    def _respond_type(self, type_url: str, snap: TypeSnapshot) -> bytes | None:
        return self._respond(self.by_type[type_url], snap)

    def _settled(self, type_url: str) -> bool:
        return self.by_type[type_url].settled

    def _holds(self, type_url: str, snap: TypeSnapshot, names: Collection[str]) -> bool:
        watch = self.by_type[type_url]
        behind = self._behind(watch, snap)
        wanted = names if behind is None else [n for n in behind if n in names]
        if not watch.wildcard:
            wanted = [n for n in wanted if n in watch.names]
        return all(watch.known.get(n) == snap.resources[n].version for n in wanted)

    def _respond(self, watch: DeltaWatch, snap: TypeSnapshot) -> bytes | None:
        basis = watch.basis
        if not (watch.dirty or watch.added) and basis is not None and basis.version == snap.version:
            return None
        changes = None if watch.dirty or basis is None else self.hub.changes.between(basis, snap)
        watch.dirty, watch.basis = False, snap
        changed, removed = watch.diff(snap.resources, changes)
        if not (changed or removed or (watch.first and watch.wildcard)):
            return None
        watch.record(changed, removed)
        nonce = watch.nonce = self.sent(
            SentResponse(snap.type_url, snap.version, tuple(r.name for r in changed))
        )
        watch.settled = False
        self.hub.count_response(snap.type_url)
        log.debug(
            "%s: sending %s delta: %d changed, %d removed",
            self.who,
            short(snap.type_url),
            len(changed),
            len(removed),
        )
        if snap.type_url == CLUSTER and changed:
            self.hub.clusters_sent(self, changed)
        return wire.delta_response(snap.version, snap.type_url, changed, removed, nonce)
