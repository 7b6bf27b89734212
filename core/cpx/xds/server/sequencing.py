"""Make-before-break per Envoy: what one Envoy is served while its routing changes.

The hub holds one snapshot for every Envoy; each Envoy (its ADS stream, or its per-type streams
together) is served its own *view* of it:

- listeners, scoped routes and routes come from the last snapshot whose clusters this Envoy has
  ACKed (and whose EDS endpoints it was sent), so a route never names a cluster the Envoy does not
  have warm;
- clusters, endpoints and secrets are the union of the current snapshot and the (at most two)
  snapshots whose listeners and routes the Envoy may still hold: the ones last sent and last
  ACKed. What only those older snapshots had is dropped once the Envoy ACKs newer routing.

The rules are in docs/design/0016-make-before-break.md.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from cpx.xds.resource import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from cpx.xds.server.changes import ChangeCache

# Kept while an older routing may use them; added before the routing that uses them is sent.
HELD = (CLUSTER, ENDPOINT, SECRET)
# Sent only once what they use is in place.
ROUTING = frozenset({LISTENER, SCOPED_ROUTE, ROUTE})


def _merged(type_url: str, layers: list[Snapshot], changes: ChangeCache) -> TypeSnapshot:
    """``type_url`` resources of every layer; the first layer (the current snapshot) wins a name,
    then the earlier of the others.

    What an older layer adds is what it has and the current one lost: the names ``changes`` finds
    removed between them, so a view costs what changed since those layers, not the whole type.
    """
    first = layers[0].get(type_url)
    extra: dict[str, Resource] = {}
    for layer in layers[1:]:
        older = layer.get(type_url)
        for name in sorted(changes.between(older, first).removed):
            extra.setdefault(name, older.resources[name])
    if not extra:
        return first
    return TypeSnapshot.of(type_url, {**first.resources, **extra}, previous=first, changed=extra)


@attrs.define(eq=False)
class Sequencer:
    """Which snapshot's routing one Envoy was sent and ACKed, and the view that follows."""

    sent_routing: Snapshot | None = None
    acked_routing: Snapshot | None = None
    _view_basis: tuple[Snapshot | None, ...] = (None, None, None)
    _view: Snapshot | None = None

    def advance(self, current: Snapshot, ready: Callable[[Snapshot], bool]) -> None:
        """Move routing to ``current`` once ``ready`` says the Envoy has what it needs (never to
        a clusters-only snapshot: it has no routing)."""
        if self.sent_routing is not current and not current.clusters_only and ready(current):
            self.sent_routing = current

    def routing_acked(self) -> None:
        """The Envoy ACKed every listener and route response it was sent."""
        self.acked_routing = self.sent_routing

    def view(self, current: Snapshot, changes: ChangeCache) -> Snapshot:
        """What this stream serves now (routing types: those of :attr:`sent_routing`)."""
        basis = (current, self.sent_routing, self.acked_routing)
        if self._view is not None and all(a is b for a, b in zip(basis, self._view_basis, strict=True)):
            return self._view
        older = [s for s in (self.sent_routing, self.acked_routing) if s is not None and s is not current]
        layers = [current, *older]
        types = dict(current.types)
        for type_url in HELD:
            types[type_url] = _merged(type_url, layers, changes)
        routing = self.sent_routing if self.sent_routing is not None else current
        for type_url in ROUTING:
            types[type_url] = routing.get(type_url)
        self._view_basis, self._view = basis, Snapshot(types)
        return self._view
