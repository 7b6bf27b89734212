"""Protobuf wire bytes of discovery responses, assembled from pre-serialised resources.

Every :class:`~cpx.xds.resource.Resource` already holds its serialised body, so a response is a
join of small cached headers and those bodies: no message object is built or encoded per stream.
Only length-delimited fields are written, which keeps the encoder to a few lines; field order on
the wire does not matter to protobuf parsers.

Field numbers (``envoy/service/discovery/v3/discovery.proto``, ``google/protobuf/any.proto``):

- ``DiscoveryResponse``: version_info 1, resources 2 (Any), type_url 4, nonce 5
- ``DeltaDiscoveryResponse``: system_version_info 1, resources 2 (Resource), type_url 4, nonce 5,
  removed_resources 6
- ``Resource``: version 1, resource 2 (Any), name 3
- ``Any``: type_url 1, value 2
"""

from __future__ import annotations

import bisect
import functools
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import attrs

from cpx.xds.resource import Resource, TypeSnapshot

# How many distinct named subsets of one type version are kept (Envoys behind one control plane
# usually request identical EDS/RDS sets, so one or two entries serve the whole fleet).
_MAX_NAMED_VARIANTS = 8
# Versions of one type whose complete encoding is kept: the current one and the views derived from
# it while make-before-break holds older clusters.
_MAX_ENCODED = 4


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int) -> bytes:
    return varint((field << 3) | 2)  # wire type 2: length-delimited


def field(number: int, data: bytes) -> bytes:
    return _key(number) + varint(len(data)) + data


def string_field(number: int, text: str) -> bytes:
    return field(number, text.encode())


def _any_prefix(type_url: str, body_len: int) -> tuple[bytes, int]:
    """The bytes of an ``Any`` before its value, and the length of the whole ``Any``."""
    head = string_field(1, type_url) + _key(2) + varint(body_len)
    return head, len(head) + body_len


# Headers depend on a few small values, never on the body itself, so they are cheap to cache
# and the bodies are joined in without being copied into the cache.
@functools.lru_cache(maxsize=1 << 16)
def sotw_header(type_url: str, body_len: int) -> bytes:
    """``DiscoveryResponse.resources`` entry up to the resource body."""
    head, any_len = _any_prefix(type_url, body_len)
    return _key(2) + varint(any_len) + head


@functools.lru_cache(maxsize=1 << 16)
def delta_header(type_url: str, name: str, version: str, body_len: int) -> bytes:
    """``DeltaDiscoveryResponse.resources`` entry (an xDS ``Resource``) up to the resource body."""
    head, any_len = _any_prefix(type_url, body_len)
    resource_head = string_field(3, name) + string_field(1, version) + _key(2) + varint(any_len) + head
    return _key(2) + varint(len(resource_head) + body_len) + resource_head


def sotw_parts(type_url: str, resources: Iterable[Resource]) -> list[bytes]:
    """The ``resources`` field of a SotW response as pieces: header, body, header, body, ..."""
    parts: list[bytes] = []
    for res in resources:
        parts.append(sotw_header(type_url, len(res.body)))
        parts.append(res.body)
    return parts


def sotw_resources(type_url: str, resources: Iterable[Resource]) -> bytes:
    return b"".join(sotw_parts(type_url, resources))


def sotw_response(version: str, type_url: str, resources: bytes, nonce: str) -> bytes:
    return sotw_response_of(version, type_url, (resources,), nonce)


def sotw_response_of(version: str, type_url: str, parts: Sequence[bytes], nonce: str) -> bytes:
    """:func:`sotw_response` of the pieces :meth:`ResponseCache.parts` gives, joined once."""
    return b"".join((string_field(1, version), *parts, string_field(4, type_url), string_field(5, nonce)))


def delta_response(
    system_version: str, type_url: str, resources: Iterable[Resource], removed: Iterable[str], nonce: str
) -> bytes:
    parts = [string_field(1, system_version), string_field(4, type_url), string_field(5, nonce)]
    for res in resources:
        parts.append(delta_header(type_url, res.name, res.version, len(res.body)))
        parts.append(res.body)
    parts.extend(string_field(6, name) for name in removed)
    return b"".join(parts)


@attrs.frozen
class _Encoded:
    """Every resource of one type version, encoded: names sorted, and per name its header and body."""

    names: list[str]
    parts: list[bytes]  # header, body, header, body, ... in the order of ``names``

    @classmethod
    def of(cls, snap: TypeSnapshot) -> _Encoded:
        names = sorted(snap.resources)
        return cls(names, sotw_parts(snap.type_url, map(snap.resources.__getitem__, names)))

    def updated(self, snap: TypeSnapshot) -> _Encoded:
        """The encoding of ``snap``, which differs from this one's only in ``snap.touched``."""
        names, parts = list(self.names), list(self.parts)
        for name in sorted(snap.touched):
            i = bisect.bisect_left(names, name)
            present = i < len(names) and names[i] == name
            res = snap.resources.get(name)
            if res is None:
                if present:
                    del names[i], parts[2 * i : 2 * i + 2]
                continue
            encoded = [sotw_header(snap.type_url, len(res.body)), res.body]
            if present:
                parts[2 * i : 2 * i + 2] = encoded
            else:
                names.insert(i, name)
                parts[2 * i : 2 * i] = encoded
        return _Encoded(names, parts)


@attrs.define(eq=False)
class ResponseCache:
    """Encoded ``resources`` fields of SotW responses, per type at its current version.

    A wildcard (LDS/CDS/SRDS) response is the same for every stream, so it is encoded once per type
    version, from the encoding of the version it was derived from when there is one (only the
    names it touched are encoded; the rest is one list copy). Named (EDS/RDS/SDS) subsets are
    cached the same way, up to a few variants.

    What is kept are the pieces (cached headers and the resources' own bodies), not their join:
    a join copies every body (~4 MB for 10k clusters), and joining again per response is a
    memcpy the response's own join does anyway.
    """

    _by_type: dict[str, tuple[str, dict[frozenset[str] | None, Sequence[bytes]]]] = attrs.field(factory=dict)
    # Per type URL, the encodings of every resource of the last few versions, by version.
    _encoded: dict[str, OrderedDict[str, _Encoded]] = attrs.field(factory=dict)

    def resources(self, snap: TypeSnapshot, names: frozenset[str] | None) -> bytes:
        """All resources of ``snap`` (``names is None``) or those of ``names`` that exist."""
        return b"".join(self.parts(snap, names))

    def parts(self, snap: TypeSnapshot, names: frozenset[str] | None) -> Sequence[bytes]:
        """:meth:`resources` in pieces, for :func:`sotw_response_of`."""
        if not snap.resources:
            return ()  # also keeps type URLs a client invents out of the cache
        entry = self._by_type.get(snap.type_url)
        if entry is None or entry[0] != snap.version:
            entry = (snap.version, {})
            self._by_type[snap.type_url] = entry
        variants = entry[1]
        found = variants.get(names)
        if found is None:
            if names is None:
                found = self._everything(snap).parts
            else:
                selected = names & snap.resources.keys()
                found = sotw_parts(snap.type_url, (snap.resources[n] for n in sorted(selected)))
            if len(variants) < _MAX_NAMED_VARIANTS:
                variants[names] = found
        return found

    def _everything(self, snap: TypeSnapshot) -> _Encoded:
        kept = self._encoded.setdefault(snap.type_url, OrderedDict())
        found = kept.get(snap.version)
        if found is None:
            base = kept.get(snap.parent) if snap.parent is not None else None
            # Each insertion moves the rest of the list: past a few, sorting anew is cheaper.
            if base is None or len(snap.touched) > max(16, len(snap.resources) // 16):
                found = _Encoded.of(snap)
            else:
                found = base.updated(snap)
            kept[snap.version] = found
            if len(kept) > _MAX_ENCODED:
                kept.popitem(last=False)
        return found
