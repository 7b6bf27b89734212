"""Per-stream xDS protocol state: what each Envoy subscribed to and what it was last sent.

A stream is driven by two coroutines in :mod:`cpx.xds.server`: a reader that feeds every request
to :meth:`Stream.on_request`, and a writer that, whenever woken (a request or a new snapshot),
takes the responses :meth:`Stream.responses` yields. Both run on the event loop, so the state here
needs no locks. The rules follow ``xds-protocol.md`` (Envoy's xds_protocol.rst plus the peer
bugs to avoid); the comments say which rule a branch implements.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from envoy.config.cluster.v3 import cluster_pb2

from cpx.xds import wire
from cpx.xds.counters import XdsMetrics
from cpx.xds.resource import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    PUSH_ORDER,
    SHORT_NAMES,
    Resource,
    Snapshot,
    TypeSnapshot,
)

log = logging.getLogger("cpx.xds")

# Types for which a first request without names means "everything" (legacy wildcard). Envoy
# always subscribes to LDS and CDS this way; for the others an empty list means "nothing".
LEGACY_WILDCARD = frozenset({LISTENER, CLUSTER})
WILDCARD = "*"

# Delta: what the client holds for a name, besides a real version.
_ABSENT = ""  # we told the client the name does not exist (removed_resources)
_RESEND = "\0resend"  # the client dropped it (unsubscribed under wildcard): announce it again


class ProtocolError(Exception):
    """The client broke the protocol; its stream is closed with INVALID_ARGUMENT."""


def _short(type_url: str) -> str:
    return SHORT_NAMES.get(type_url, type_url.rsplit(".", 1)[-1])


def _ordered(type_urls: Sequence[str]) -> list[str]:
    """Make-before-break: CDS, EDS, SDS, LDS, RDS, then any other type."""
    known = [t for t in PUSH_ORDER if t in type_urls]
    return known + sorted(t for t in type_urls if t not in PUSH_ORDER)


# Keyed by content version (not by Resource, which would keep every body alive).
_eds_names: dict[str, str | None] = {}


def eds_name(cluster: Resource) -> str | None:
    """The ClusterLoadAssignment name an EDS cluster subscribes to (None for other clusters)."""
    if cluster.version in _eds_names:
        return _eds_names[cluster.version]
    msg = cluster_pb2.Cluster.FromString(cluster.body)
    name = None
    if msg.type == cluster_pb2.Cluster.EDS:
        name = str(msg.eds_cluster_config.service_name or msg.name)
    if len(_eds_names) >= 1 << 14:
        _eds_names.clear()
    _eds_names[cluster.version] = name
    return name


@attrs.define(eq=False)
class StreamHub:
    """What every stream of one server shares: the snapshot, caches, metrics, streams by node."""

    metrics: XdsMetrics
    snapshot: Snapshot | None = None
    stopping: bool = False
    cache: wire.ResponseCache = attrs.field(factory=wire.ResponseCache)
    streams: set[Stream] = attrs.field(factory=set)
    _by_node: dict[str, set[Stream]] = attrs.field(factory=dict)

    def set_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.wake_all()

    def wake_all(self) -> None:
        for stream in self.streams:
            stream.wake.set()

    def add(self, stream: Stream) -> None:
        self.streams.add(stream)
        self.metrics.xds_connections.inc()

    def remove(self, stream: Stream) -> None:
        self.streams.discard(stream)
        peers = self._by_node.get(stream.node_id)
        if peers is not None:
            peers.discard(stream)
            if not peers:
                del self._by_node[stream.node_id]
        self.metrics.xds_connections.dec()

    def node_known(self, stream: Stream) -> None:
        self._by_node.setdefault(stream.node_id, set()).add(stream)

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
        self.metrics.xds_responses.labels(type_url=type_url).inc()

    def nack(self, stream: Stream, type_url: str, request: Any, version: str) -> None:
        # Istio's rule: log, count, and wait for a real change (never resend what was rejected).
        log.warning(
            "Envoy %s rejected %s%s (nonce %r): %s",
            stream.node_id or stream.peer,
            _short(type_url),
            f" version {version}" if version else "",
            request.response_nonce,
            request.error_detail.message,
        )
        self.metrics.xds_nacks.labels(type_url=type_url).inc()


@attrs.define(eq=False)
class Stream:
    """One gRPC stream (ADS when ``fixed_type`` is None, else a per-type service)."""

    hub: StreamHub
    fixed_type: str | None
    peer: str = ""
    node_id: str = ""
    wake: asyncio.Event = attrs.field(factory=asyncio.Event)
    _nonce: int = 0

    def on_request(self, request: Any) -> None:
        raise NotImplementedError

    def responses(self, snapshot: Snapshot) -> Iterator[bytes]:
        raise NotImplementedError

    def clusters_sent(self, changed: Sequence[Resource]) -> None:
        raise NotImplementedError

    def next_nonce(self) -> str:
        self._nonce += 1
        return str(self._nonce)

    def accept(self, request: Any) -> str:
        """Common bookkeeping of a request; returns its type URL."""
        type_url = str(request.type_url) or self.fixed_type
        if not type_url:
            raise ProtocolError("type_url is required on an aggregated stream")
        if self.fixed_type is not None and type_url != self.fixed_type:
            raise ProtocolError(f"type_url {type_url} on the {_short(self.fixed_type)} service")
        # Only the first request is guaranteed to carry the node.
        if not self.node_id and request.HasField("node") and request.node.id:
            self.node_id = str(request.node.id)
            self.hub.node_known(self)
        self.hub.metrics.xds_requests.labels(type_url=type_url).inc()
        return type_url


# --- State of the world --------------------------------------------------------------------


@attrs.define(eq=False)
class SotwWatch:
    type_url: str
    wildcard: bool = False
    names: frozenset[str] = frozenset()
    named_ever: bool = False  # once a client named anything, an empty list means "nothing"
    nonce: str = ""  # latest nonce sent for this type
    sent_version: str | None = None  # wildcard: type version the client has (or was sent)
    last_version: str = ""  # type version of the latest response (for logs)
    sent: dict[str, str] = attrs.field(factory=dict)  # named: name -> version sent
    resend_on_request: bool = False  # cluster warming: answer the next request even if unchanged
    force: bool = False
    dirty: bool = True  # the subscription changed since the last check
    checked: str | None = None  # type version at the last check

    def subscribe(self, names: frozenset[str], initial: bool, client_version: str) -> None:
        was_wildcard = self.wildcard
        explicit = names - {WILDCARD}
        self.wildcard = WILDCARD in names or (
            not names and not self.named_ever and self.type_url in LEGACY_WILDCARD
        )
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
            # Names the client dropped are forgotten, so asking again later gets an answer.
            self.sent = {n: v for n, v in self.sent.items() if n in explicit}
        self.dirty = True


@attrs.define(eq=False)
class SotwStream(Stream):
    watches: dict[str, SotwWatch] = attrs.field(factory=dict)

    def on_request(self, request: Any) -> None:
        type_url = self.accept(request)
        watch = self.watches.get(type_url)
        nonce = str(request.response_nonce)
        if watch is not None and watch.nonce and nonce and nonce != watch.nonce:
            # Superseded by a response the client has not seen yet: it will answer that one.
            log.debug("%s: ignoring %s request with stale nonce %r", self.peer, _short(type_url), nonce)
            return
        if watch is None:
            watch = self.watches[type_url] = SotwWatch(type_url)
        if request.HasField("error_detail"):
            self.hub.nack(self, type_url, request, watch.last_version)
        # No nonce: a (re)subscription. Nonces do not survive a reconnect.
        initial = not nonce or not watch.nonce
        watch.subscribe(frozenset(request.resource_names), initial, str(request.version_info))
        if watch.resend_on_request:
            watch.force = True

    def clusters_sent(self, changed: Sequence[Resource]) -> None:
        watch = self.watches.get(ENDPOINT)
        if watch is not None:
            watch.resend_on_request = True

    def responses(self, snapshot: Snapshot) -> Iterator[bytes]:
        for type_url in _ordered(list(self.watches)):
            out = self._respond(self.watches[type_url], snapshot.get(type_url))
            if out is not None:
                yield out

    def _respond(self, watch: SotwWatch, snap: TypeSnapshot) -> bytes | None:
        if not (watch.dirty or watch.force or watch.checked != snap.version):
            return None
        watch.dirty, watch.checked = False, snap.version
        if watch.wildcard:
            # Only send on change (compared with what was sent, never with what was ACKed, so a
            # NACKed version is not resent: no NACK loop).
            if watch.sent_version == snap.version and not watch.force:
                return None
            resources = self.hub.cache.resources(snap, None)
            watch.sent_version = snap.version
        else:
            current = {n: snap.resources[n].version for n in watch.names if n in snap.resources}
            if not watch.names or (current == watch.sent and not watch.force):
                return None
            resources = self.hub.cache.resources(snap, watch.names)
            watch.sent = current
        watch.force = watch.resend_on_request = False
        watch.nonce, watch.last_version = self.next_nonce(), snap.version
        self.hub.count_response(snap.type_url)
        log.debug("%s: sending %s version %s", self.node_id or self.peer, _short(snap.type_url), snap.version)
        if snap.type_url == CLUSTER:
            self.hub.clusters_sent(self, ())
        return wire.sotw_response(snap.version, snap.type_url, resources, watch.nonce)


# --- Delta (incremental) -------------------------------------------------------------------


@attrs.define(eq=False)
class DeltaWatch:
    type_url: str
    wildcard: bool = False
    names: set[str] = attrs.field(factory=set)  # explicit subscriptions
    known: dict[str, str] = attrs.field(factory=dict)  # name -> version the client holds
    first: bool = True  # nothing sent yet: a wildcard subscription always gets a first answer
    dirty: bool = True
    checked: str | None = None

    def update(self, subscribe: Sequence[str], unsubscribe: Sequence[str]) -> None:
        for name in subscribe:
            if name == WILDCARD:
                self.wildcard = True
            else:
                self.names.add(name)
        for name in unsubscribe:
            if name == WILDCARD:
                self.wildcard = False
                continue
            self.names.discard(name)
            if self.wildcard and name in self.known:
                # Still covered by the wildcard: the protocol wants the resource or its removal.
                self.known[name] = _RESEND
            else:
                self.known.pop(name, None)
        self.dirty = self.dirty or bool(subscribe) or bool(unsubscribe)

    def diff(self, resources: Mapping[str, Resource]) -> tuple[list[Resource], list[str]]:
        """Resources the client lacks at their current version, and names to report removed."""
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
    watches: dict[str, DeltaWatch] = attrs.field(factory=dict)

    def on_request(self, request: Any) -> None:
        # No stale-nonce filtering in delta: subscription changes count whatever the nonce.
        type_url = self.accept(request)
        if request.HasField("error_detail"):
            self.hub.nack(self, type_url, request, "")
        subscribe = list(request.resource_names_subscribe)
        watch = self.watches.get(type_url)
        if watch is None:
            watch = self.watches[type_url] = DeltaWatch(type_url)
            watch.wildcard = not subscribe and type_url in LEGACY_WILDCARD
            # Reconnect: skip what the client already has at the same version.
            watch.known.update(dict(request.initial_resource_versions))
        watch.update(subscribe, list(request.resource_names_unsubscribe))

    def clusters_sent(self, changed: Sequence[Resource]) -> None:
        watch = self.watches.get(ENDPOINT)
        if watch is None:
            return
        for cluster in changed:
            name = eds_name(cluster)
            if name is not None and watch.known.get(name, _ABSENT) != _ABSENT:
                del watch.known[name]  # send it again, after the cluster
                watch.dirty = True
        if watch.dirty:
            self.wake.set()  # per-type EDS stream: nothing else would wake it

    def responses(self, snapshot: Snapshot) -> Iterator[bytes]:
        for type_url in _ordered(list(self.watches)):
            out = self._respond(self.watches[type_url], snapshot.get(type_url))
            if out is not None:
                yield out

    def _respond(self, watch: DeltaWatch, snap: TypeSnapshot) -> bytes | None:
        if not watch.dirty and watch.checked == snap.version:
            return None
        watch.dirty, watch.checked = False, snap.version
        changed, removed = watch.diff(snap.resources)
        if not (changed or removed or (watch.first and watch.wildcard)):
            return None
        watch.record(changed, removed)
        nonce = self.next_nonce()
        self.hub.count_response(snap.type_url)
        log.debug(
            "%s: sending %s delta: %d changed, %d removed",
            self.node_id or self.peer,
            _short(snap.type_url),
            len(changed),
            len(removed),
        )
        if snap.type_url == CLUSTER and changed:
            self.hub.clusters_sent(self, changed)
        return wire.delta_response(snap.version, snap.type_url, changed, removed, nonce)
