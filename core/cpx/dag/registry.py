"""Values one processor publishes in the DAG, by source object, for later processors to read.

A plugin that owns a kind other plugins reference by name (an ExtensionService that HTTPProxy's
authorization or rate limiting calls) publishes what referrers need to know about each object
under a :class:`RegistryKey`; a referrer looks the object up with :meth:`Registries.lookup`.
Both plugins declare an equal key (same name, same value type, a type the public API defines),
so neither imports the other.  The publishing processor declares the registry's name in
``ProcessorSpec.publishes`` and runs earlier (phase or ``after``); a referrer then tells "no
enabled plugin publishes this" (:meth:`Registries.published_by_any`) from "no such object".

A lookup is a read of the referenced object, and of everything its publisher read to compute the
value (the entry's ``reads``): an incremental referrer that memoises per-object results (the
HTTPProxy processor) records both, so a change to the object or to a Service or Secret it uses
re-processes the referrers, while the unchanged ones are replayed.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import attrs

from cpx.objects import ObjectKey

T = TypeVar("T")


class _Reads(Protocol):
    """What a lookup needs of the build's :class:`cpx.SourceView` (the DAG sits below it)."""

    def get(self, key: ObjectKey) -> Any: ...

    def depend_on(self, lookups: Any) -> None: ...


@attrs.frozen
class RegistryKey(Generic[T]):
    """Names a registry; ``type`` is checked when a value is published."""

    name: str
    type: type[T]


@attrs.frozen(eq=False)
class _Entry:
    value: Any
    reads: Any  # cpx.Lookups or None


@attrs.define(eq=False)
class Registries:
    """Every registry of one build (``DAG.registries``)."""

    # Registry names an enabled processor declares it publishes (ProcessorSpec.publishes).
    declared: frozenset[str] = frozenset()
    _tables: dict[str, dict[ObjectKey, _Entry]] = attrs.field(factory=dict, init=False)

    def publish(self, key: RegistryKey[T], obj: ObjectKey, value: T, *, reads: Any = None) -> None:
        """Publish ``value`` for ``obj``; ``reads`` is what computing it read from the source (the
        :class:`cpx.Lookups` of a ``SourceView.recording()``): every lookup of ``obj`` depends on it."""
        if not isinstance(value, key.type):
            raise TypeError(f"registry {key.name!r} takes {key.type.__name__}, not {type(value).__name__}")
        self._tables.setdefault(key.name, {})[obj] = _Entry(value, reads)

    def published_by_any(self, key: RegistryKey[Any]) -> bool:
        """Whether an enabled processor publishes this registry (declared, or published into)."""
        return key.name in self.declared or key.name in self._tables

    def lookup(self, key: RegistryKey[T], obj: ObjectKey, source: _Reads) -> T | None:
        """The value published for ``obj``, or None; records the read of ``obj`` and of what its
        publisher read in ``source`` (for the referrer's incremental bookkeeping)."""
        source.get(obj)
        entry = self._tables.get(key.name, {}).get(obj)
        if entry is None:
            return None
        if entry.reads is not None:
            source.depend_on(entry.reads)
        found: T = entry.value
        return found

    def entries(self, key: RegistryKey[T]) -> dict[ObjectKey, T]:
        """Everything published under ``key`` (no reads recorded: for tools and tests)."""
        return {obj: entry.value for obj, entry in self._tables.get(key.name, {}).items()}
