"""Typed data that plugins attach to DAG nodes (routes, clusters, virtual hosts) by key.

A plugin declares a module-level :class:`AttachmentKey` for its own data; its processor attaches a
value (``attrs.evolve(route, attachments=route.attachments.set(KEY, value, origin=key))``, ``key``
the object it came from, so that a config Envoy would refuse leaves out that object, not the
route's) and its HTTP filter's per-route config reads it back (``route.attachments.get(KEY)``).
Keys carry the value's type, so readers get a typed value without casts.

:class:`Attachments` is immutable and hashable: nodes are memo keys of the translation, so an
attachment is part of what makes two routes equal.  Values must therefore be hashable (frozen
attrs values, tuples, strings ...).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

import attrs

from cpx.objects import ObjectKey

T = TypeVar("T")


@attrs.frozen
class AttachmentKey(Generic[T]):
    """Names one plugin's data on a node; ``type`` is checked when a value is attached."""

    name: str
    type: type[T]


@attrs.frozen(cache_hash=True)
class Attachments:
    """Values by key, kept sorted by key name so that equal contents compare and hash equal.

    Each value may name the object it came from (``origin``): when what a filter makes of it
    breaks Envoy's rules, that object is left out, not the one the node itself came from.
    """

    _items: tuple[tuple[AttachmentKey[Any], Any, ObjectKey | None], ...] = ()

    def get(self, key: AttachmentKey[T]) -> T | None:
        for known, value, _origin in self._items:
            if known == key:
                found: T = value
                return found
        return None

    def set(self, key: AttachmentKey[T], value: T, *, origin: ObjectKey | None = None) -> Attachments:
        """A copy holding ``value`` under ``key`` (replacing any value it had), attached by ``origin``."""
        if not isinstance(value, key.type):
            raise TypeError(f"attachment {key.name!r} takes {key.type.__name__}, not {type(value).__name__}")
        hash(value)  # fail here, not when the node is first used as a memo key
        kept = [item for item in self._items if item[0] != key]
        kept.append((key, value, origin))
        kept.sort(key=lambda item: (item[0].name, item[0].type.__qualname__))
        return Attachments(tuple(kept))

    def remove(self, key: AttachmentKey[Any]) -> Attachments:
        return Attachments(tuple(item for item in self._items if item[0] != key))

    def origins(self) -> frozenset[ObjectKey]:
        """The objects that attached these values (those that said)."""
        return frozenset(origin for _key, _value, origin in self._items if origin is not None)

    def __contains__(self, key: object) -> bool:
        return any(known == key for known, _value, _origin in self._items)

    def __iter__(self) -> Iterator[AttachmentKey[Any]]:
        return (known for known, _value, _origin in self._items)

    def __len__(self) -> int:
        return len(self._items)


NO_ATTACHMENTS = Attachments()
