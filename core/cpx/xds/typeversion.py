"""The version of one type's resources: a content hash over every (name, version), updated in O(changed).

Names are spread over a fixed number of buckets by a checksum of the name; each bucket hashes its
own sorted entries, and the type version hashes the bucket digests (a two-level hash tree). A
change re-hashes only the buckets of the names it touched, so a new RouteConfiguration among 10k
costs a few dozen entries, not all of them, while the version stays a function of the content
alone: equal on every restart and replica, whatever the order of the changes that led to it.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Mapping
from typing import Protocol

import attrs


class Versioned(Protocol):
    """What the tree reads of a resource (:class:`cpx.xds.resource.Resource`)."""

    @property
    def version(self) -> str: ...


BUCKETS = 256  # ~40 names per bucket at 10k resources


def _bucket(name: str) -> int:
    return zlib.crc32(name.encode()) % BUCKETS


def _digest(names: Iterable[str], resources: Mapping[str, Versioned]) -> bytes:
    text = "".join([f"{name}\0{resources[name].version}\n" for name in sorted(names)])
    return hashlib.sha256(text.encode()).digest()[:16]


_EMPTY_NAMES: frozenset[str] = frozenset()
_EMPTY_DIGEST = _digest((), {})


def _version(digests: tuple[bytes, ...]) -> str:
    return hashlib.sha256(b"".join(digests)).hexdigest()[:16]


@attrs.frozen
class VersionTree:
    """The names of each bucket and their digests; buckets a change did not touch are shared."""

    names: tuple[frozenset[str], ...] = attrs.field(repr=False)
    digests: tuple[bytes, ...] = attrs.field(repr=False)
    version: str

    @classmethod
    def of(cls, resources: Mapping[str, Versioned]) -> VersionTree:
        if not resources:
            return EMPTY_TREE
        grouped: list[list[str]] = [[] for _ in range(BUCKETS)]
        for name in resources:
            grouped[_bucket(name)].append(name)
        names = tuple(frozenset(group) if group else _EMPTY_NAMES for group in grouped)
        digests = tuple(_digest(group, resources) if group else _EMPTY_DIGEST for group in grouped)
        return cls(names, digests, _version(digests))

    def updated(self, resources: Mapping[str, Versioned], touched: Iterable[str]) -> VersionTree:
        """The tree of ``resources``, which differ from this tree's only in the ``touched`` names
        (added, removed or at another version)."""
        by_bucket: dict[int, list[str]] = {}
        for name in touched:
            by_bucket.setdefault(_bucket(name), []).append(name)
        if not by_bucket:
            return self
        names, digests = list(self.names), list(self.digests)
        for index, group in by_bucket.items():
            kept = names[index].difference(group)
            bucket = kept.union(name for name in group if name in resources)
            names[index] = bucket or _EMPTY_NAMES
            digests[index] = _digest(bucket, resources) if bucket else _EMPTY_DIGEST
        frozen = tuple(digests)
        return VersionTree(tuple(names), frozen, _version(frozen))


EMPTY_TREE = VersionTree(
    (_EMPTY_NAMES,) * BUCKETS, (_EMPTY_DIGEST,) * BUCKETS, _version((_EMPTY_DIGEST,) * BUCKETS)
)
