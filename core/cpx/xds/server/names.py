"""The resource names of SotW requests, as sets shared by every request that lists the same names.

A SotW client repeats its whole subscription in every request: the ACK of one changed
RouteConfiguration among 10k lists the 10k names again. Building a set of them costs ~1.5 ms of
Python objects per request, and comparing it with the last one more. The wire bytes of the list,
hashed at C speed, recognise a list already seen (by this stream, or by any other Envoy asking
for the same), whose set is then reused: the very same object, so comparing it costs nothing.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import attrs

# Below this many names a set is cheaper than the hash.
_SMALL = 64
# Distinct lists kept: a few per named type (RDS, EDS, SDS) cover a fleet asking for the same.
_KEPT = 16
# Fields that differ between requests with the same names (the rest only make the key stricter).
_PER_REQUEST = ("version_info", "response_nonce", "node", "error_detail")


@attrs.define(eq=False)
class NameSets:
    _seen: OrderedDict[bytes, frozenset[str]] = attrs.field(factory=OrderedDict)

    def of(self, request: Any) -> frozenset[str]:
        """``request.resource_names`` as a set (a ``DiscoveryRequest``)."""
        names = request.resource_names
        if len(names) < _SMALL:
            return frozenset(names)
        only = type(request)()
        only.CopyFrom(request)
        for field in _PER_REQUEST:
            only.ClearField(field)
        # Equal keys: equal messages, so equal name lists.
        key = hashlib.sha256(only.SerializeToString(deterministic=True)).digest()
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = frozenset(names)
            if len(self._seen) > _KEPT:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(key)
        return found
