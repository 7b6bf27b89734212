"""What differs between two versions of one type, worked out once for every stream.

A stream that was last answered from one :class:`~cpx.xds.resource.TypeSnapshot` and whose
subscription did not change since needs only the names that changed to answer the next one. Every
Envoy sees the same pair of snapshots, so the pass over all resources (10k RouteConfigurations) is
made once per change, not once per stream, and a stream's own work follows the size of the change.
"""

from __future__ import annotations

from collections import OrderedDict

import attrs

from cpx.xds.resource import TypeSnapshot

# Pairs remembered: a few per type cover every stream, including the ones a step behind.
_MAX_PAIRS = 64


@attrs.frozen
class Changes:
    """Names added or at another version (``changed``) and names gone (``removed``)."""

    changed: frozenset[str]
    removed: frozenset[str]


_NONE = Changes(frozenset(), frozenset())


@attrs.define(eq=False)
class ChangeCache:
    # Keyed by versions: equal type versions hash equal names and versions.
    _pairs: OrderedDict[tuple[str, str, str], Changes] = attrs.field(factory=OrderedDict)

    def between(self, old: TypeSnapshot, new: TypeSnapshot) -> Changes:
        if old.version == new.version:
            return _NONE
        key = (new.type_url, old.version, new.version)
        found = self._pairs.get(key)
        if found is None:
            before = old.resources
            found = Changes(
                frozenset(
                    name
                    for name, res in new.resources.items()
                    if (was := before.get(name)) is None or (was is not res and was.version != res.version)
                ),
                frozenset(before.keys() - new.resources.keys()),
            )
            self._pairs[key] = found
            if len(self._pairs) > _MAX_PAIRS:
                self._pairs.popitem(last=False)
        return found
