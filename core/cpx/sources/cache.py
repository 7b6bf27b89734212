"""The source cache: every accepted Kubernetes object, keyed by kind and namespaced name.

It knows four kinds itself (Service, EndpointSlice, Secret, Namespace); every other kind is
whatever the plugins' :class:`~cpx.records.WatchSpec` records declare.  ``insert`` and ``remove``
answer whether the change needs a DAG rebuild, which is how the event handler skips irrelevant
churn (Contour's ``KubernetesCache.Insert``, without its closed switch over kinds).

Incremental consumers (memoising processors, the EDS cache) need to know *what* changed: every
real change bumps a global :attr:`SourceCache.revision` and is logged, so :meth:`changes_since`
and :meth:`endpoint_changes_since` answer "which objects / which Services' endpoints changed
after revision R" (None when the bounded log no longer reaches back that far: recompute all).
:meth:`recording` collects the keys a piece of code looked up, i.e. what its result depends on.

Processors get :attr:`SourceCache.view`, the read-only :class:`~cpx.sources.view.SourceView`.  The
DAG builder records each build (:meth:`build_recording`); a Service or Secret change needs a
rebuild only when the last build read it, and :meth:`referencing` answers who read it.
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

import attrs

from cpx import objects as k8s
from cpx.dag.nodes import Secret
from cpx.objects import KubeObject, ObjectKey
from cpx.records import WatchSpec
from cpx.sources.externalname import ExternalNamePolicy
from cpx.sources.secrets import SecretError, validate_ca_secret, validate_crl_secret, validate_tls_secret
from cpx.sources.view import Lookups, ReadIndex, ReadOnlySource, SourceView

# The secret-access policy's answer: True or False, or None when no enabled plugin judges the reference.
SecretPolicy = Callable[[str, str, ObjectKey, SourceView], bool | None]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def same_namespace_only(
    secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView
) -> bool:
    return secret_namespace == referrer.namespace


class NotFoundError(LookupError):
    """A referenced object is not in the source cache."""


class DelegationNotPermittedError(SecretError):
    """A Secret in another namespace that the secret-access policy does not let the referrer use.

    Contour reports this case under its own reasons (``DelegationNotPermitted``,
    ``CACertificateNotDelegated``), so callers can tell it from an invalid or missing Secret.
    """


class DelegationNotEnabledError(DelegationNotPermittedError):
    """A Secret in another namespace, and no enabled plugin judges such references: nothing could
    permit it (e.g. a TLS delegation plugin is not enabled).  A :class:`DelegationNotPermittedError`,
    so callers that do not tell the two apart still refuse; those that do can say that delegation is
    not enabled rather than word it as the user's mistake.
    """


T = TypeVar("T")
# Log entries kept before the oldest half is dropped (consumers that far behind recompute all).
CHANGE_LOG_LIMIT = 1 << 17


class _ChangeLog(Generic[T]):
    """Items tagged with increasing revisions; ``since(r)`` lists those after ``r``, or None."""

    def __init__(self, limit: int = CHANGE_LOG_LIMIT) -> None:
        self._revisions: list[int] = []
        self._items: list[T] = []
        self._floor = 0  # every entry at or below this revision may have been dropped
        self._limit = limit

    def append(self, revision: int, item: T) -> None:
        self._revisions.append(revision)
        self._items.append(item)
        if len(self._items) > self._limit:
            cut = len(self._items) // 2
            self._floor = self._revisions[cut - 1]
            del self._revisions[:cut], self._items[:cut]

    def since(self, revision: int) -> list[T] | None:
        if revision < self._floor:
            return None
        return self._items[bisect.bisect_right(self._revisions, revision) :]


_SLICE, _SECRET, _SERVICE = k8s.ENDPOINT_SLICE.group_kind, k8s.SECRET.group_kind, k8s.SERVICE.group_kind
_NOT_CONTENT = frozenset({"metadata", "status", "apiVersion", "kind"})


def _unchanged(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Contour's IsObjectEqual, simplified: same resourceVersion, or same content that matters."""
    old_meta, new_meta = k8s.meta(old), k8s.meta(new)
    rv = new_meta.get("resourceVersion")
    if rv and rv == old_meta.get("resourceVersion"):
        return True
    # Every top-level field but metadata and status is content (spec, data, stringData, binaryData,
    # type, endpoints, ports, addressType, ...): naming them would miss a kind's own.
    if old.keys() - _NOT_CONTENT != new.keys() - _NOT_CONTENT:
        return False
    return (
        all(old[k] == new[k] for k in new.keys() - _NOT_CONTENT)
        and old_meta.get("annotations") == new_meta.get("annotations")
        and old_meta.get("labels") == new_meta.get("labels")
        and old_meta.get("generation") == new_meta.get("generation")
    )


def _refresh_status(old: KubeObject, new: Mapping[str, Any]) -> None:
    """Keep a cached object's status current when nothing else a build reads changed (a status
    write, ours or another controller's): plugins read it to keep their conditions'
    lastTransitionTime and to find the entries they wrote.  No rebuild, and in place, so that the
    object keeps its identity (what was noted about this version of it, e.g. an Envoy rejection,
    stays with it)."""
    if "status" in new:
        if old.get("status") != new["status"]:
            old["status"] = new["status"]
    else:
        old.pop("status", None)


def service_of_slice(obj: Mapping[str, Any]) -> str | None:
    """The Service an EndpointSlice belongs to; None for a slice without one (or a malformed label,
    which only an unchecked source can deliver: indexing must not fail on it)."""
    labels = k8s.meta(obj).get("labels")
    service = labels.get(SERVICE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return service if isinstance(service, str) else None


@attrs.define(eq=False)
class SourceCache:
    watches: Mapping[tuple[str, str], WatchSpec] = attrs.field(factory=dict)
    secret_policy: SecretPolicy = same_namespace_only
    # Whether ExternalName Services may be used (the core's option; refused by default).
    external_names: ExternalNamePolicy = attrs.field(factory=ExternalNamePolicy)
    # (group, kind) -> {(namespace, name): object}
    _objects: dict[tuple[str, str], dict[tuple[str, str], KubeObject]] = attrs.field(factory=dict)
    # EndpointSlices grouped by the (namespace, service) they belong to.
    _slices: dict[tuple[str, str], dict[str, KubeObject]] = attrs.field(factory=dict)
    # Validated Secrets, memoised until the Secret changes (Contour does the same).
    _secret_results: dict[tuple[str, str], Secret | SecretError] = attrs.field(factory=dict)
    _ca_results: dict[tuple[str, str], Secret | SecretError] = attrs.field(factory=dict)
    _crl_results: dict[tuple[str, str], Secret | SecretError] = attrs.field(factory=dict)
    # What the last DAG build read (only changes to Services/Secrets in it trigger a rebuild),
    # per translated object what its translation read, and that inverted (when first asked).
    _build_reads: Lookups = attrs.field(factory=Lookups)
    _by_object: dict[ObjectKey, Lookups] = attrs.field(factory=dict)
    _readers: dict[ObjectKey, set[ObjectKey]] | None = None
    _building: dict[ObjectKey, Lookups] | None = None
    # Bumped on every real change; per-object and per-Service-endpoints revisions and logs.
    revision: int = 0
    _revisions: dict[ObjectKey, int] = attrs.field(factory=dict)
    _slice_revisions: dict[tuple[str, str], int] = attrs.field(factory=dict)
    _log: _ChangeLog[ObjectKey] = attrs.field(factory=_ChangeLog)
    _slice_log: _ChangeLog[tuple[str, str]] = attrs.field(factory=_ChangeLog)
    _recorder: Lookups | None = None
    _view: ReadOnlySource | None = None

    @property
    def view(self) -> SourceView:
        """This cache as processors and policy hooks get it: read-only."""
        if self._view is None:
            self._view = ReadOnlySource(self)
        return self._view

    # -- writing -------------------------------------------------------------------------------
    def insert(self, obj: KubeObject, key: ObjectKey | None = None) -> bool:
        """Add or replace an object; returns whether a DAG rebuild is needed."""
        key = key if key is not None else ObjectKey.of(obj)
        group_kind, name = key.group_kind, (key.namespace, key.name)
        store = self._objects.setdefault(group_kind, {})
        old = store.get(name)
        if old is not None and _unchanged(old, obj):
            _refresh_status(old, obj)
            return False
        store[name] = obj
        self._changed(key, present=True)
        if group_kind == _SLICE:
            if old is not None:
                self._unindex_slice(old)
            self._index_slice(obj)
            return False  # the EDS fast path handles endpoints without a rebuild
        if group_kind == _SECRET:
            self._secret_results.pop(name, None)
            self._ca_results.pop(name, None)
            self._crl_results.pop(name, None)
            return key in self._build_reads
        if group_kind == _SERVICE:
            return key in self._build_reads
        spec = self.watches.get(group_kind)
        if spec is not None and spec.triggers_rebuild is not None:
            return spec.triggers_rebuild(obj, self.view)
        return True

    def remove(self, obj: Mapping[str, Any]) -> bool:
        """Remove an object; returns whether a DAG rebuild is needed."""
        key = ObjectKey.of(obj)
        store = self._objects.get(key.group_kind, {})
        old = store.pop((key.namespace, key.name), None)
        if old is None:
            return False
        self._changed(key, present=False)
        if key.group_kind == k8s.ENDPOINT_SLICE.group_kind:
            self._unindex_slice(old)
            return False
        if key.group_kind == k8s.SECRET.group_kind:
            self._secret_results.pop((key.namespace, key.name), None)
            self._ca_results.pop((key.namespace, key.name), None)
            self._crl_results.pop((key.namespace, key.name), None)
            return key in self._build_reads
        if key.group_kind == k8s.SERVICE.group_kind:
            return key in self._build_reads
        return True

    def _changed(self, key: ObjectKey, *, present: bool) -> None:
        self.revision += 1
        # Absent objects have revision 0, so that churn of names does not grow the table.
        if present:
            self._revisions[key] = self.revision
        else:
            self._revisions.pop(key, None)
        self._log.append(self.revision, key)

    def _index_slice(self, obj: KubeObject) -> None:
        service = service_of_slice(obj)
        if service:
            owner = (k8s.namespace_of(obj), service)
            self._slices.setdefault(owner, {})[k8s.name_of(obj)] = obj  # not a copy: ~4 MB at 10k Services
            self._slices_changed(owner)

    def _unindex_slice(self, obj: Mapping[str, Any]) -> None:
        service = service_of_slice(obj)
        bucket = self._slices.get((k8s.namespace_of(obj), service or ""))
        if bucket is not None:
            bucket.pop(k8s.name_of(obj), None)
            if not bucket:
                del self._slices[(k8s.namespace_of(obj), service or "")]
            self._slices_changed((k8s.namespace_of(obj), service or ""))

    def _slices_changed(self, service: tuple[str, str]) -> None:
        if service in self._slices:
            self._slice_revisions[service] = self.revision
        else:
            self._slice_revisions.pop(service, None)
        self._slice_log.append(self.revision, service)

    # -- what changed ----------------------------------------------------------------------------
    def object_revision(self, key: ObjectKey) -> int:
        """The source revision of the object's last insert (0: not in the cache)."""
        return self._revisions.get(key, 0)

    def endpoints_revision(self, namespace: str, service: str) -> int:
        """The source revision of the last change to this Service's EndpointSlices (0: none)."""
        return self._slice_revisions.get((namespace, service), 0)

    def changes_since(self, revision: int) -> builtins.list[ObjectKey] | None:
        """Every object inserted or removed after ``revision``, in order (repeats possible);
        None when the log was trimmed past it."""
        return self._log.since(revision)

    def endpoint_changes_since(self, revision: int) -> builtins.list[tuple[str, str]] | None:
        """(namespace, service) whose EndpointSlices changed after ``revision``; None: unknown."""
        return self._slice_log.since(revision)

    def recording(self) -> AbstractContextManager[Lookups]:
        """Collect what the code in the ``with`` block looks up (nested recordings also count
        for the enclosing one)."""
        return _Recording(self)

    def depend_on(self, lookups: Lookups | ReadIndex) -> None:
        """Declare what a reused result read when it was computed (see :class:`SourceView`)."""
        rec = self._recorder
        if rec is None:
            return
        if isinstance(lookups, ReadIndex):
            rec.memos.append(lookups)  # by reference: a memo of 10k results costs one append
        else:
            rec.merge(lookups)

    @contextlib.contextmanager
    def build_recording(self) -> Iterator[Lookups]:
        """Record one DAG build: what it reads decides which Service and Secret changes need the
        next rebuild, and what each translated object read answers :meth:`referencing`."""
        by_object: dict[ObjectKey, Lookups] = {}
        outer, self._building = self._building, by_object
        try:
            with self.recording() as reads:
                yield reads
        finally:
            self._building = outer
            self._build_reads, self._by_object, self._readers = reads, by_object, None

    def attributed(self, key: ObjectKey) -> AbstractContextManager[object]:
        """Reads in the block are ``key``'s (:func:`cpx.blame` calls this during a build)."""
        return contextlib.nullcontext() if self._building is None else _Attributed(self, key)

    def references(self) -> set[ObjectKey]:
        """Every object the last build read (memoised results' reads included)."""
        return self._build_reads.keys.union(*(memo.keys() for memo in self._build_reads.memos))

    def referencing(self, key: ObjectKey) -> frozenset[ObjectKey]:
        """The objects whose translation read ``key`` in the last build."""
        readers = self._readers
        if readers is None:  # inverted once per build, when first asked
            readers = self._readers = {}
            for referrer, lookups in self._by_object.items():
                for read in lookups.all_keys():
                    readers.setdefault(read, set()).add(referrer)
        found = set(readers.get(key, ()))
        for memo in self._build_reads.memos:
            found.update(memo.referencing(key))
        return frozenset(found)

    def _record_volatile(self) -> None:
        if self._recorder is not None:
            self._recorder.volatile = True

    # -- reading -------------------------------------------------------------------------------
    def get(self, key: ObjectKey) -> KubeObject | None:
        if self._recorder is not None:
            self._recorder.keys.add(key)
        return self._objects.get(key.group_kind, {}).get((key.namespace, key.name))

    def list(self, gvk: k8s.GroupVersionKind) -> Iterator[KubeObject]:
        """Objects of one kind, in (namespace, name) order so builds are deterministic."""
        self._record_volatile()
        store = self._objects.get(gvk.group_kind, {})
        for key in sorted(store):
            yield store[key]

    def count(self, gvk: k8s.GroupVersionKind) -> int:
        return len(self._objects.get(gvk.group_kind, {}))

    def kinds(self) -> Iterator[tuple[str, str]]:
        return iter(sorted(self._objects))

    def all_objects(self) -> Iterator[KubeObject]:
        """Every object, by kind then (namespace, name) (a listing: recorded as volatile)."""
        self._record_volatile()
        for kind in sorted(self._objects):
            store = self._objects[kind]
            for key in sorted(store):
                yield store[key]

    def lookup_service(self, namespace: str, name: str) -> KubeObject:
        """The Service, or NotFoundError; recorded, so that its changes trigger rebuilds."""
        if self._recorder is not None:
            self._recorder.keys.add(ObjectKey("", "Service", namespace, name))
        obj = self._objects.get(k8s.SERVICE.group_kind, {}).get((namespace, name))
        if obj is None:
            raise NotFoundError(f'service "{namespace}/{name}" not found')
        return obj

    def lookup_namespace(self, name: str) -> KubeObject | None:
        if self._recorder is not None:
            self._recorder.keys.add(ObjectKey("", "Namespace", "", name))
        return self._objects.get(k8s.NAMESPACE.group_kind, {}).get(("", name))

    def endpoint_slices(self, namespace: str, service: str) -> builtins.list[KubeObject]:
        self._record_volatile()  # a DAG processor reading endpoints: not tracked per object
        bucket = self._slices.get((namespace, service), {})
        return [bucket[name] for name in sorted(bucket)]

    def lookup_tls_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        """The validated TLS Secret, or SecretError saying why it cannot be used.

        Cross-namespace references go through the secret-access policy (the
        ``cpx_secret_access_permitted`` hook): by default only the referrer's namespace is allowed;
        a refusal is a :class:`DelegationNotPermittedError`.
        """
        return self._lookup_secret(namespace, name, referrer, self._secret_results, validate_tls_secret)

    def lookup_ca_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        """The validated CA Secret (a PEM bundle under ``ca.crt``), or SecretError saying why not.

        The same access rules as :meth:`lookup_tls_secret` (Contour's ``LookupCASecret``).
        """
        return self._lookup_secret(namespace, name, referrer, self._ca_results, validate_ca_secret)

    def lookup_crl_secret(self, namespace: str, name: str, referrer: ObjectKey) -> Secret:
        """The validated CRL Secret (PEM CRLs under ``crl.pem``, in ``crl_pem``), or SecretError
        saying why not.  The same access rules as :meth:`lookup_tls_secret` (Contour's
        ``LookupCRLSecret``)."""
        return self._lookup_secret(namespace, name, referrer, self._crl_results, validate_crl_secret)

    def _lookup_secret(
        self,
        namespace: str,
        name: str,
        referrer: ObjectKey,
        results: dict[tuple[str, str], Secret | SecretError],
        validate: Callable[[KubeObject], Secret],
    ) -> Secret:
        if self._recorder is not None:
            self._recorder.keys.add(ObjectKey("", "Secret", namespace, name))
        answer = self._secret_access(namespace, name, referrer)
        if answer is None:
            raise DelegationNotEnabledError(
                f"Secret {namespace}/{name} is in another namespace and no enabled plugin permits "
                f"cross-namespace Secret references for {referrer.kind} {referrer.namespace}/{referrer.name}"
            )
        if not answer:
            raise DelegationNotPermittedError(
                f"Secret {namespace}/{name} is in another namespace and no delegation permits "
                f"{referrer.kind} {referrer.namespace}/{referrer.name} to use it"
            )
        result = results.get((namespace, name))
        if result is None:
            obj = self._objects.get(k8s.SECRET.group_kind, {}).get((namespace, name))
            if obj is None:
                result = SecretError(f"Secret {namespace}/{name} not found")
            else:
                try:
                    result = validate(obj)
                except SecretError as err:
                    result = err
            results[(namespace, name)] = result
        if isinstance(result, SecretError):
            raise result
        return result

    def secret_access_permitted(self, namespace: str, name: str, referrer: ObjectKey) -> bool:
        """Same namespace, or what the secret-access policy (``cpx_secret_access_permitted``) says."""
        return bool(self._secret_access(namespace, name, referrer))

    def _secret_access(self, namespace: str, name: str, referrer: ObjectKey) -> bool | None:
        if namespace == referrer.namespace:
            return True
        # The policy reads objects (delegations) through the view, and a listing is recorded as
        # volatile: the referrer is re-translated at every build, so a delegation that goes away
        # stops the use at the next one.  Marked here too, for policies that read nothing.
        self._record_volatile()
        return self.secret_policy(namespace, name, referrer, self.view)


class _Recording:
    """:meth:`SourceCache.recording`; a class, not a contextlib generator: processors enter one
    per object (HTTPProxy per root) per build, and a generator's set-up and tear-down cost more
    than the recording itself."""

    __slots__ = ("_cache", "_outer", "_rec")

    def __init__(self, cache: SourceCache) -> None:
        self._cache = cache
        self._outer: Lookups | None = None
        self._rec = Lookups()

    def __enter__(self) -> Lookups:
        self._outer, self._cache._recorder = self._cache._recorder, self._rec
        return self._rec

    def __exit__(self, *exc: object) -> None:
        outer = self._outer
        self._cache._recorder = outer
        if outer is not None:
            outer.merge(self._rec)


class _Attributed:
    """A recording whose reads are also ``key``'s in the build being recorded.

    A class, not a generator: HTTPProxy enters one per proxy per build."""

    __slots__ = ("_cache", "_key", "_outer", "_rec")

    def __init__(self, cache: SourceCache, key: ObjectKey) -> None:
        self._cache, self._key = cache, key
        self._outer: Lookups | None = None
        self._rec = Lookups()

    def __enter__(self) -> None:
        self._outer, self._cache._recorder = self._cache._recorder, self._rec

    def __exit__(self, *exc: object) -> None:
        rec, outer, building = self._rec, self._outer, self._cache._building
        self._cache._recorder = outer
        if outer is not None:
            outer.merge(rec)
        if building is not None and (rec.keys or rec.volatile or rec.memos):
            earlier = building.get(self._key)
            if earlier is not None:  # blamed twice in one build (e.g. parsed, then translated)
                rec.merge(earlier)
            building[self._key] = rec
