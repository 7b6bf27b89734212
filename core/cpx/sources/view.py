"""What processors, policy hooks and caches may do with the source: read it, and say what they read.

:class:`SourceView` is the whole contract; :class:`~cpx.sources.cache.SourceCache` implements it and
hands processors a read-only object that has nothing else (no ``insert``, no attribute to write).
The core records what each processor reads during a build (:class:`Lookups`), attributes reads to
the object being translated (the one :func:`cpx.blame` names) and derives from those recordings
which Service and Secret changes need a rebuild; :meth:`SourceView.referencing` answers who read what.

A processor that memoises per-object results keeps each result's :class:`Lookups` (from
:meth:`SourceView.recording`) and re-declares them with :meth:`SourceView.depend_on` on every build
it reuses them, or keeps them in a :class:`ReadIndex` and declares the whole index at once.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Set
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

import attrs

from cpx.objects import ObjectKey

if TYPE_CHECKING:
    from cpx.dag.nodes import Secret
    from cpx.objects import GroupVersionKind, KubeObject
    from cpx.sources.externalname import ExternalNamePolicy


@attrs.define(eq=False)
class Lookups:
    """What some code read from the source while a recording was active.

    ``keys`` are the objects looked up, found or not; ``volatile`` says the result also depends
    on something the change log cannot pinpoint (a cross-namespace secret-access decision, a
    listing, a DNS answer), so it must be recomputed on every build.  ``memos`` are the
    :class:`ReadIndex` objects declared with :meth:`SourceView.depend_on`, held by reference so
    that declaring a large memo costs nothing.
    """

    keys: set[ObjectKey] = attrs.field(factory=set)
    volatile: bool = False
    memos: builtins.list[ReadIndex] = attrs.field(factory=builtins.list)

    def __contains__(self, key: object) -> bool:
        return key in self.keys or any(key in memo for memo in self.memos)

    def all_keys(self) -> Set[ObjectKey]:
        """``keys`` and every key of the memos."""
        if not self.memos:
            return self.keys
        return self.keys.union(*(memo.keys() for memo in self.memos))

    def merge(self, other: Lookups) -> None:
        self.keys |= other.keys
        self.volatile = self.volatile or other.volatile
        self.memos += other.memos


class ReadIndex:
    """What each of many objects' translation read, and the inverse: who read a given object.

    A memoising processor keeps one (object -> the :class:`Lookups` of its memoised result) and
    updates it as results are recomputed; ``depend_on(index)`` then declares every result's
    reads in one call, and the index answers both "which results does this change invalidate"
    (:meth:`referencing`) and :attr:`volatile` (results to recompute on every build).
    """

    def __init__(self) -> None:
        self._reads: dict[ObjectKey, Lookups] = {}
        self._readers: dict[ObjectKey, set[ObjectKey]] = {}
        self.volatile: set[ObjectKey] = set()

    def add(self, referrer: ObjectKey, lookups: Lookups) -> None:
        """Record (replacing what was recorded before) what ``referrer``'s translation read."""
        self.discard(referrer)
        self._reads[referrer] = lookups
        for key in lookups.all_keys():
            readers = self._readers.get(key)
            if readers is None:
                readers = self._readers[key] = set()
            readers.add(referrer)
        if lookups.volatile:
            self.volatile.add(referrer)

    def get(self, referrer: ObjectKey) -> Lookups | None:
        return self._reads.get(referrer)

    def discard(self, referrer: ObjectKey) -> None:
        old = self._reads.pop(referrer, None)
        if old is None:
            return
        for key in old.all_keys():
            readers = self._readers.get(key)
            if readers is not None:
                readers.discard(referrer)
                if not readers:
                    del self._readers[key]
        self.volatile.discard(referrer)

    def clear(self) -> None:
        self._reads.clear()
        self._readers.clear()
        self.volatile.clear()

    def referencing(self, key: ObjectKey) -> Set[ObjectKey]:
        return self._readers.get(key, frozenset())

    def keys(self) -> Set[ObjectKey]:
        """Every object some recorded translation read."""
        return self._readers.keys()

    def __contains__(self, key: object) -> bool:
        return key in self._readers

    def __len__(self) -> int:
        return len(self._reads)


class SourceView(Protocol):
    """The source cache as processors, policy hooks and resource caches see it: read-only.

    Reads made while a build runs are recorded for the processor making them and for the object
    it is translating (see :func:`cpx.blame`); nothing a plugin does changes the cache.
    """

    @property
    def revision(self) -> int:
        """Bumped on every change to the cache."""

    @property
    def external_names(self) -> ExternalNamePolicy:
        """Whether ExternalName Services may be used (the core's option)."""

    def get(self, key: ObjectKey) -> KubeObject | None: ...

    def list(self, gvk: GroupVersionKind) -> Iterator[KubeObject]:
        """Objects of one kind, in (namespace, name) order (a listing: recorded as volatile)."""

    def count(self, gvk: GroupVersionKind) -> int: ...

    def all_objects(self) -> Iterator[KubeObject]:
        """Every object, by kind then (namespace, name) (a listing: recorded as volatile)."""

    def lookup_service(self, namespace: str, name: str) -> KubeObject:
        """The Service, or :class:`~cpx.sources.cache.NotFoundError`."""

    def lookup_namespace(self, name: str) -> KubeObject | None: ...

    def endpoint_slices(self, namespace: str, service: str) -> builtins.list[KubeObject]: ...

    def lookup_tls_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        """The validated TLS Secret, or :class:`~cpx.sources.secrets.SecretError` saying why not."""

    def lookup_ca_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        """The validated CA Secret, or :class:`~cpx.sources.secrets.SecretError` saying why not."""

    def lookup_crl_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        """The validated CRL Secret (``crl_pem``), or :class:`~cpx.sources.secrets.SecretError`."""

    def secret_access_permitted(self, namespace: str, name: str, referrer: ObjectKey) -> bool:
        """Whether ``referrer`` may use that Secret (the ``cpx_secret_access_permitted`` policy)."""

    def changes_since(self, revision: int) -> builtins.list[ObjectKey] | None:
        """Every object inserted or removed after ``revision``, in order (repeats possible);
        None when the change log no longer reaches back that far (recompute everything)."""

    def endpoint_changes_since(self, revision: int) -> builtins.list[tuple[str, str]] | None:
        """(namespace, service) whose EndpointSlices changed after ``revision``; None: unknown."""

    def recording(self) -> AbstractContextManager[Lookups]:
        """Collect what the ``with`` block reads (nested recordings count for enclosing ones)."""

    def depend_on(self, lookups: Lookups | ReadIndex) -> None:
        """Declare, for results computed in an earlier build and reused now, what they read."""

    def referencing(self, key: ObjectKey) -> frozenset[ObjectKey]:
        """The objects whose translation read ``key`` in the last build."""


class ReadOnlySource:
    """A source (the :class:`~cpx.sources.cache.SourceCache`) as a :class:`SourceView`: the reading
    methods and nothing else, so a plugin cannot change the cache or stash state on it (there is
    no attribute to assign)."""

    __slots__ = ("__weakref__", "_cache")
    _cache: SourceView

    def __init__(self, cache: SourceView) -> None:
        object.__setattr__(self, "_cache", cache)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"the source view is read-only: cannot set {name!r}")

    @property
    def revision(self) -> int:
        return self._cache.revision

    @property
    def external_names(self) -> ExternalNamePolicy:
        return self._cache.external_names

    def get(self, key: ObjectKey) -> KubeObject | None:
        return self._cache.get(key)

    def list(self, gvk: GroupVersionKind) -> Iterator[KubeObject]:
        return self._cache.list(gvk)

    def count(self, gvk: GroupVersionKind) -> int:
        return self._cache.count(gvk)

    def all_objects(self) -> Iterator[KubeObject]:
        return self._cache.all_objects()

    def lookup_service(self, namespace: str, name: str) -> KubeObject:
        return self._cache.lookup_service(namespace, name)

    def lookup_namespace(self, name: str) -> KubeObject | None:
        return self._cache.lookup_namespace(name)

    def endpoint_slices(self, namespace: str, service: str) -> builtins.list[KubeObject]:
        return self._cache.endpoint_slices(namespace, service)

    def lookup_tls_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        return self._cache.lookup_tls_secret(namespace, name, referrer)

    def lookup_ca_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        return self._cache.lookup_ca_secret(namespace, name, referrer)

    def lookup_crl_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        return self._cache.lookup_crl_secret(namespace, name, referrer)

    def secret_access_permitted(self, namespace: str, name: str, referrer: ObjectKey) -> bool:
        return self._cache.secret_access_permitted(namespace, name, referrer)

    def changes_since(self, revision: int) -> builtins.list[ObjectKey] | None:
        return self._cache.changes_since(revision)

    def endpoint_changes_since(self, revision: int) -> builtins.list[tuple[str, str]] | None:
        return self._cache.endpoint_changes_since(revision)

    def recording(self) -> AbstractContextManager[Lookups]:
        return self._cache.recording()

    def depend_on(self, lookups: Lookups | ReadIndex) -> None:
        self._cache.depend_on(lookups)

    def referencing(self, key: ObjectKey) -> frozenset[ObjectKey]:
        return self._cache.referencing(key)
