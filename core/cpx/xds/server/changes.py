"""What differs between two versions of one type, worked out once for every stream.

A stream that was last answered from one :class:`~cpx.xds.resource.TypeSnapshot` and whose
subscription did not change since needs only the names that changed to answer the next one. Every
Envoy sees the same pair of snapshots, so the answer is worked out once per pair, not per stream.

It costs what changed, not what the type holds: a snapshot derived from another one says which
names it touched (:attr:`~cpx.xds.resource.TypeSnapshot.touched`), and the cache keeps those links
between recent versions. Any path of links between two versions holds every name that differs
between them (a name that differs must have changed on some step), so only the names along the
path are compared. Only versions with no path between them are compared name by name.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping

import attrs

from cpx.xds.resource import Resource, TypeSnapshot, touched_names

# Pairs remembered: a few per type cover every stream, including the ones a step behind.
_MAX_PAIRS = 64
# Links remembered per type: the snapshots published recently and the views derived from them.
_MAX_LINKS = 64


@attrs.frozen
class Changes:
    """Names added or at another version (``changed``) and names gone (``removed``)."""

    changed: frozenset[str]
    removed: frozenset[str]


_NONE = Changes(frozenset(), frozenset())


def compare(old: Mapping[str, Resource], new: Mapping[str, Resource], names: Iterable[str]) -> Changes:
    """The changes from ``old`` to ``new`` among ``names`` (which must hold every name that differs)."""
    changed, removed = set(), set()
    for name in names:
        now = new.get(name)
        if now is None:
            if name in old:
                removed.add(name)
        elif (was := old.get(name)) is None or (was is not now and was.version != now.version):
            changed.add(name)
    return Changes(frozenset(changed), frozenset(removed))


@attrs.define(eq=False)
class ChangeCache:
    # Keyed by versions: equal type versions hash equal names and versions.
    _pairs: OrderedDict[tuple[str, str, str], Changes] = attrs.field(factory=OrderedDict)
    # Per type URL: (version, parent version) -> the names that differ between them.
    _links: dict[str, OrderedDict[tuple[str, str], frozenset[str]]] = attrs.field(factory=dict)

    def learn(self, snap: TypeSnapshot) -> None:
        """Remember how ``snap`` differs from the version it was derived from, if any."""
        if snap.parent is None:
            return
        links = self._links.setdefault(snap.type_url, OrderedDict())
        key = (snap.version, snap.parent)
        if key in links:
            links.move_to_end(key)
            return
        links[key] = snap.touched
        if len(links) > _MAX_LINKS:
            links.popitem(last=False)

    def link(self, old: TypeSnapshot, new: TypeSnapshot) -> None:
        """Remember how ``new`` differs from ``old`` when it does not say so itself (built from
        scratch rather than derived): one pass that recognises unchanged resources by identity."""
        if new.parent is None and old.version != new.version:
            links = self._links.setdefault(new.type_url, OrderedDict())
            links[(new.version, old.version)] = touched_names(old.resources, new.resources)
            if len(links) > _MAX_LINKS:
                links.popitem(last=False)

    def between(self, old: TypeSnapshot, new: TypeSnapshot) -> Changes:
        if old.version == new.version:
            return _NONE
        key = (new.type_url, old.version, new.version)
        found = self._pairs.get(key)
        if found is None:
            self.learn(old)
            self.learn(new)
            names = self._path_names(new.type_url, old.version, new.version)
            if names is None:
                names = new.resources.keys() | old.resources.keys()  # no known path: every name
            found = compare(old.resources, new.resources, names)
            self._pairs[key] = found
            if len(self._pairs) > _MAX_PAIRS:
                self._pairs.popitem(last=False)
        return found

    def _path_names(self, type_url: str, start: str, goal: str) -> set[str] | None:
        """The names touched along a shortest path of links from ``start`` to ``goal`` (None: no path)."""
        neighbours: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for (version, parent), touched in self._links.get(type_url, {}).items():
            neighbours.setdefault(version, []).append((parent, touched))
            neighbours.setdefault(parent, []).append((version, touched))
        came_from: dict[str, tuple[str, frozenset[str]] | None] = {start: None}
        queue = deque([start])
        while queue:
            version = queue.popleft()
            if version == goal:
                names: set[str] = set()
                step = came_from[version]
                while step is not None:
                    names |= step[1]
                    step = came_from[step[0]]
                return names
            for other, touched in neighbours.get(version, ()):
                if other not in came_from:
                    came_from[other] = (version, touched)
                    queue.append(other)
        return None
