"""The translation pipeline: source cache → DAG builder → xDS caches → snapshot, plus status.

One :class:`SnapshotHandler` serves both ``cpx translate`` (offline, one pass) and ``cpx serve`` (driven
by the event handler).  It never talks to Envoy or Kubernetes itself.
"""

from __future__ import annotations

import gc
import itertools
import logging
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from cpx.config import Config
from cpx.dag.builder import Builder, make_processor
from cpx.dag.dag import DAG, Note
from cpx.isolation import Fault, ObjectFault, exception_note, find_culprit, sanitize
from cpx.objects import KubeObject, ObjectKey
from cpx.plugins import PluginHost
from cpx.records import (
    CheckingCache,
    EndpointsObserver,
    ResourceCache,
    SourceBound,
    StatusWriterSpec,
    WatchSpec,
)
from cpx.sources.cache import SourceCache
from cpx.sources.externalname import ENABLE_OPTION_NAME as ENABLE_EXTERNAL_NAMES
from cpx.sources.externalname import ExternalNamePolicy
from cpx.xds.constraints.notes import constraint_note, resource_checker, type_name
from cpx.xds.constraints.origins import resource_origins
from cpx.xds.contributions import UsesContributions
from cpx.xds.resource import CLUSTER, ENDPOINT, SECRET, ChangeReporting, Resource, Snapshot, TypeSnapshot

# Sent before routing (make-before-break), so built first when the first build sends them early.
CLUSTERS_FIRST = frozenset({CLUSTER, ENDPOINT, SECRET})
log = logging.getLogger("cpx.snapshot")


# Each round quarantines at least one object; more rounds than this means something is wrong.
MAX_QUARANTINE_ROUNDS = 64
# A NACK with more suspects than this is only logged, not noted on all of them.
MAX_NACK_SUSPECTS = 16
# NACKs of one type are traced back to objects at most once per this many seconds.
NACK_INTERVAL = 1.0

# A whole-snapshot check (``--envoy-validate``): None when the snapshot is fine, else why not.
SnapshotCheck = Callable[[Snapshot], "str | None"]


class UnknownKindError(ValueError):
    """No enabled plugin watches this kind."""


class BuildError(RuntimeError):
    """A build failed and no object could be blamed: the previous snapshot stays in force."""


@attrs.frozen(kw_only=True)
class ObjectStatus:
    """What cpx concluded about one object: the status to write, and the problems behind it."""

    key: ObjectKey
    status: Mapping[str, Any]
    notes: tuple[Note, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.status)
        if self.notes:
            # A condition-like list: Kubernetes never sees it for kinds whose schema lacks it,
            # but `cpx translate`, the status file and the logs show why something is not served.
            out["cpx"] = {
                "problems": [
                    {"type": n.type, "reason": n.reason, "message": n.message, "severity": n.severity}
                    for n in self.notes
                ]
            }
        return out


@attrs.define(eq=False)
class SnapshotHandler:
    host: PluginHost
    config: Config
    source: SourceCache
    builder: Builder
    caches: list[ResourceCache]
    watches: dict[tuple[str, str], WatchSpec]
    status_writers: dict[tuple[str, str], StatusWriterSpec]
    dag: DAG | None = None
    snapshot: Snapshot | None = None
    # Objects refused before reaching the source cache (schema violations), with the reasons.
    rejected: dict[ObjectKey, tuple[KubeObject, tuple[str, ...]]] = attrs.field(factory=dict)
    # Objects left out of builds because translating them broke something (see rebuild()).
    quarantined: dict[ObjectKey, tuple[KubeObject, tuple[Note, ...]]] = attrs.field(factory=dict)
    checkers: list[SnapshotCheck] = attrs.field(factory=list)
    # Called (from the building thread) with the first build's clusters, endpoints and secrets as
    # soon as they are built and checked, before its routing: Envoy warms them meanwhile.
    on_first_clusters: Callable[[Snapshot], None] | None = None
    # Objects an Envoy NACK was traced to, at the version it was (see envoy_rejected()).
    envoy_notes: dict[ObjectKey, tuple[KubeObject, tuple[Note, ...]]] = attrs.field(factory=dict)
    # What the object source itself found wrong with objects (standalone mode: refused edits,
    # objects defined twice), shown with their status; the source keeps it current.
    source_notes: dict[ObjectKey, tuple[Note, ...]] = attrs.field(factory=dict)
    rebuilds: int = 0
    last_build_seconds: float = 0.0
    last_build_error: str | None = None  # why the latest build failed; None once one succeeds
    _good_revision: int = -1  # the source revision of the last published build
    _published_from: int = -1  # ... and of the one before: what changed in between is "new"
    _nack_handled: dict[str, float] = attrs.field(factory=dict)  # type URL -> when last traced
    # Per type URL, the resources already checked against Envoy's constraints (by identity).
    _checked: dict[str, dict[str, Resource]] = attrs.field(factory=dict)
    _checked_contents: dict[str, Mapping[str, Resource]] = attrs.field(factory=dict)
    _type_snapshots: dict[str, tuple[Mapping[str, Resource], TypeSnapshot]] = attrs.field(factory=dict)
    # What changed_statuses() last saw: the source revision, the DAG's statuses and notes, rejections.
    _status_revision: int = -1
    _status_inputs: tuple[dict[ObjectKey, Any], ...] | None = None
    # The DAG a build replaced, freed by release_retired() once the new snapshot is on its way:
    # freeing 10k virtual hosts takes milliseconds a change should not wait for.
    _retired: DAG | None = None

    @classmethod
    def create(cls, host: PluginHost, config: Config) -> SnapshotHandler:
        """Configure the plugins (any may decline), then build what the remaining ones register."""
        host.configure(config)
        watches = {w.gvk.group_kind: w for w in host.watches()}
        source = SourceCache(
            watches=watches,
            secret_policy=host.secret_access_permitted,
            external_names=ExternalNamePolicy(enabled=config.option(ENABLE_EXTERNAL_NAMES) is True),
        )
        specs = host.processors()
        processors = [(spec.name, make_processor(spec, config)) for spec in specs]
        accessors_only = frozenset(spec.name for spec in specs if spec.accessors_only)
        caches = [spec.factory(config) for spec in host.resource_caches()]
        contributions = host.xds_contributions()
        for cache in caches:
            if isinstance(cache, UsesContributions):
                cache.bind_contributions(contributions)
            if isinstance(cache, SourceBound):
                cache.bind_source(source.view)
        writers = {w.gvk.group_kind: w for w in host.status_writers()}
        publishes = frozenset(name for spec in specs for name in spec.publishes)
        builder = Builder(processors, accessors_only, publishes=publishes)
        return cls(host, config, source, builder, caches, watches, writers)

    # -- input -----------------------------------------------------------------------------------
    def watch_for(self, obj: Mapping[str, Any], key: ObjectKey | None = None) -> WatchSpec:
        key = key if key is not None else ObjectKey.of(obj)
        spec = self.watches.get(key.group_kind)
        if spec is None:
            known = ", ".join(sorted(str(w.gvk) for w in self.watches.values()))
            raise UnknownKindError(
                f"unknown kind {obj.get('apiVersion')}/{obj.get('kind')}: no enabled plugin handles it "
                f"(known kinds: {known})"
            )
        return spec

    def accepts(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object is ours (e.g. the right ingress class); raises UnknownKindError."""
        spec = self.watch_for(obj)
        return spec.accept is None or spec.accept(obj, self.config)

    def upsert(self, obj: KubeObject, *, validate: bool = False) -> bool:
        """Insert or replace an object; returns whether the DAG needs a rebuild."""
        key = ObjectKey.of(obj)
        spec = self.watch_for(obj, key)
        held = self.quarantined.get(key) if self.quarantined else None  # (loading: no lookup)
        if held is not None:
            if held[0] == obj:
                return False  # the very object that was left out: it still would be
            del self.quarantined[key]
        if spec.accept is not None and not spec.accept(obj, self.config):
            # Not ours (any more): forget it, as Contour does when the class changes.
            return self.delete(obj)
        if validate and spec.validate is not None:
            problems = tuple(spec.validate(obj))
            if problems:
                had = self.source.get(key) is not None
                # A new or different rejection needs a rebuild too: its status is reported after one.
                new_reason = self.rejected.get(key, (None, ()))[1] != problems
                self.rejected[key] = (obj, problems)
                return self.source.remove(obj) or had or new_reason
        fixed = bool(self.rejected) and self.rejected.pop(key, None) is not None
        return self.source.insert(obj, key) or fixed

    def delete(self, obj: Mapping[str, Any]) -> bool:
        # A refused or left-out object that goes away takes its status entry with it: a rebuild.
        key = ObjectKey.of(obj)
        was_refused = self.rejected.pop(key, None) is not None
        was_refused = self.quarantined.pop(key, None) is not None or was_refused
        return self.source.remove(obj) or was_refused

    # -- output ----------------------------------------------------------------------------------
    def rebuild(self) -> Snapshot:
        """Build a new DAG, let every cache observe it, and return the new snapshot.

        Faults are kept to the objects that caused them (:mod:`cpx.isolation`): an object whose
        translation raises, or yields a resource Envoy would refuse, is quarantined (left out, its
        status says why) and the build goes on without it.  Only a fault no object can be blamed
        for raises :class:`BuildError`; the caller keeps serving the previous snapshot.

        The cyclic garbage collector is paused meanwhile: a build allocates many objects and
        almost no cycles, and at 10k routes the collections it would trigger (each full one
        walking every object the process holds) cost as much as the build itself.
        """
        started = time.perf_counter()
        collecting = gc.isenabled()
        gc.disable()
        try:
            dag, snapshot = self._build_isolated()
        except BuildError as err:
            self.last_build_error = str(err)
            raise
        finally:
            if collecting:
                gc.enable()
        self._retired, self.dag, self.snapshot = self.dag, dag, snapshot
        self.last_build_error = None
        self._published_from, self._good_revision = self._good_revision, self.source.revision
        self.rebuilds += 1
        self.last_build_seconds = time.perf_counter() - started
        return snapshot

    def _build_isolated(self) -> tuple[DAG, Snapshot]:
        for _ in range(MAX_QUARANTINE_ROUNDS):
            outcome = self._attempt()
            if isinstance(outcome, tuple):
                return outcome
            left_out = False
            for fault in outcome:
                if fault.precise:
                    for key in sorted(fault.origins):
                        left_out = self.quarantine(key, fault.note) or left_out
            if left_out:
                continue
            fault = outcome[0]  # nothing precise (or nothing left to leave out): find the culprit
            culprit = self._find_culprit(fault)
            if culprit is None:
                raise BuildError(f"{fault.note.type} ({fault.note.reason}): {fault.note.message}")
            self.quarantine(culprit, fault.note)
        raise BuildError(f"gave up after quarantining objects in {MAX_QUARANTINE_ROUNDS} rounds")

    def _attempt(self) -> tuple[DAG, Snapshot] | list[Fault]:
        """One build: the DAG and snapshot, or the faults that keep it from being published."""
        try:
            dag = self.builder.build(self.source)
            caches = self.caches
            if self.snapshot is None and self.on_first_clusters is not None and not self.checkers:
                caches = self._publish_clusters_first(dag)
            for cache in caches:
                cache.on_change(dag)
            faults = self._resource_faults(dag)
            if faults:
                return faults
            snapshot = self._make_snapshot()
            for check in self.checkers:
                verdict = check(snapshot)
                if verdict is not None:
                    note = Note(type="EnvoyValidation", reason="EnvoyRejected", message=sanitize(verdict))
                    return [Fault(note=note)]
        except ObjectFault as fault:
            log.error("%s: translation failed", fault.key, exc_info=fault.__cause__)
            return [Fault(note=fault.note, origins=frozenset((fault.key,)), precise=True)]
        except Exception as err:
            log.error(
                "build failed: %s",
                sanitize(f"{type(err).__name__}: {err}"),
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            return [Fault(note=exception_note(err))]
        return dag, snapshot

    def _publish_clusters_first(self, dag: DAG) -> list[ResourceCache]:
        """Build the clusters, endpoints and secrets of the first build, hand them to
        :attr:`on_first_clusters` if they are clean, and return the caches still to run.

        Envoy spends most of its first configuration warming clusters; it does so while the
        routes are built. Nothing is routed to them before the whole build is published (the xDS
        server answers no routing from a clusters-only snapshot), and a build that then fails or
        leaves an object out only means Envoy held clusters it did not use yet. Snapshot checkers
        judge whole snapshots, so with one configured nothing is sent early.
        """
        held = [cache for cache in self.caches if cache.type_url in CLUSTERS_FIRST]
        for cache in held:
            cache.on_change(dag)
        if not self._resource_faults(dag, held) and self.on_first_clusters is not None:
            types = {cache.type_url: self._type_snapshot(cache) for cache in held}
            self.on_first_clusters(Snapshot(types, clusters_only=True))
        return [cache for cache in self.caches if cache.type_url not in CLUSTERS_FIRST]

    def _resource_faults(self, dag: DAG, caches: Iterable[ResourceCache] | None = None) -> list[Fault]:
        """What the caches found, and the constraint violations of resources not checked yet."""
        faults: list[Fault] = []
        for cache in self.caches if caches is None else caches:
            if isinstance(cache, CheckingCache):
                faults += cache.faults()
                continue
            contents = cache.contents()
            if self._checked_contents.get(cache.type_url) is contents:
                continue  # caches hand out the same mapping while nothing changed
            checked = self._checked.setdefault(cache.type_url, {})
            origins: dict[str, set[ObjectKey]] | None = None
            check_resource = None  # made for the first resource to check (a type may have none)
            for name, res in contents.items():
                if checked.get(name) is res:
                    continue
                if check_resource is None:
                    check_resource = resource_checker(cache.type_url)
                problems = check_resource(res)
                if not problems:
                    checked[name] = res
                    continue
                if origins is None:
                    origins = resource_origins(dag, self.source, cache.type_url)
                note = constraint_note(res, problems)
                faults.append(Fault(note=note, origins=frozenset(origins.get(name, ()))))
            for name in [n for n in checked if n not in contents]:
                del checked[name]
            if len(checked) == len(contents):
                self._checked_contents[cache.type_url] = contents  # all checked and clean
        return faults

    def _find_culprit(self, fault: Fault) -> ObjectKey | None:
        """Narrow a fault down to one object: its suspects changed since the last good build,
        bisected with trial builds when more than one remains."""
        changes = self.source.changes_since(self._good_revision) if self._good_revision >= 0 else None
        present = {ObjectKey.of(obj): obj for obj in self.source.all_objects()}
        changed = sorted(present) if changes is None else sorted(set(changes) & present.keys())
        suspects = [k for k in changed if k in fault.origins] if fault.origins else changed
        if not suspects:
            suspects = changed or sorted(present)
        if len(suspects) == 1 and fault.origins:
            return suspects[0]
        log.warning("bisecting %d changed object(s) to find what broke the build", len(suspects))

        def fails_without(excluded: Sequence[ObjectKey]) -> bool:
            removed = [present[k] for k in excluded]
            for obj in removed:
                self.source.remove(obj)
            try:
                return not isinstance(self._attempt(), tuple)
            finally:
                for obj in removed:
                    self.source.insert(obj)

        culprit = find_culprit(suspects, fails_without)
        if culprit is None and len(suspects) < len(present):
            culprit = find_culprit(sorted(present), fails_without)
        return culprit

    def envoy_rejected(
        self, type_url: str, names: Iterable[str], message: str, *, leave_out: bool = False
    ) -> list[ObjectKey]:
        """Envoy NACKed resources cpx published: the objects that changed in the last build and
        fed them get Envoy's message in their status (until they change); returns them.

        With ``leave_out`` (the NACK came from an authenticated Envoy: xDS over mTLS) they are
        also quarantined, so the next build gives Envoy what it accepts and later changes flow
        again.  Otherwise nothing is left out on a NACK: any client of a plaintext xDS port can
        send one, and it must not take a tenant's routes down.  Suspects are narrowed to the last
        build's changes, since everything else was accepted before; too many are only logged.
        """
        dag = self.dag
        now = time.monotonic()
        if dag is None or now - self._nack_handled.get(type_url, -NACK_INTERVAL) < NACK_INTERVAL:
            return []  # a fleet NACKs one push many times (and a hostile client more): once is enough
        self._nack_handled[type_url] = now
        names = list(names)
        origins = resource_origins(dag, self.source, type_url)
        fed: set[ObjectKey] = set()
        for name in names:
            fed |= origins.get(name, set())
        changes = self.source.changes_since(self._published_from) if self._published_from >= 0 else None
        changed = set(changes) if changes is not None else set()
        suspects = sorted(fed & changed)
        note = Note(type=f"{type_name(type_url)}Error", reason="EnvoyRejected", message=sanitize(message))
        log.error(
            "Envoy rejected %s %s (%d changed object(s) fed it): %s",
            type_name(type_url),
            sanitize(", ".join(sorted(names)), 200),
            len(suspects),
            note.message,
        )
        if len(suspects) > MAX_NACK_SUSPECTS:
            return []
        for key in suspects:
            obj = self.source.get(key)
            if obj is None:
                continue
            if leave_out:
                self.quarantine(key, note)
            else:
                self.envoy_notes[key] = (obj, (note,))
        return suspects

    def _envoy_notes(self) -> dict[ObjectKey, tuple[Note, ...]]:
        """The NACK notes of objects still at the version Envoy rejected (others are dropped)."""
        for key in [k for k, (obj, _) in self.envoy_notes.items() if self.source.get(k) is not obj]:
            del self.envoy_notes[key]
        return {key: notes for key, (_, notes) in self.envoy_notes.items()}

    def quarantine(self, key: ObjectKey, note: Note) -> bool:
        """Leave an object out of every build until it changes; its status carries ``note``.
        False when there is no such object to leave out."""
        obj = self.source.get(key)
        if obj is None:
            return False
        log.error("%s: left out of the configuration: %s (%s): %s", key, note.type, note.reason, note.message)
        self.source.remove(obj)
        self.quarantined[key] = (obj, (note,))
        return True

    def endpoints_changed(self, services: Iterable[tuple[str, str]]) -> Snapshot | None:
        """The EDS fast path: recompute only those Services' endpoints, without a DAG rebuild."""
        if self.dag is None:
            return None
        wanted = set(services)
        changed = False
        fast_caches = [c for c in self.caches if isinstance(c, EndpointsObserver)]
        for _ in range(MAX_QUARANTINE_ROUNDS):
            for cache in fast_caches:
                if cache.on_endpoints_change(self.source.view, wanted):
                    changed = True
            faults = self._resource_faults(self.dag, fast_caches)
            if not faults:
                break
            # Endpoints come from EndpointSlices (and their Service): blame the changed ones.
            changes = self.source.changes_since(self._good_revision)
            recent = set(changes) if changes is not None else set()
            blamed = [(key, f.note) for f in faults for key in sorted(f.origins & recent)]
            if not blamed:
                raise BuildError(f"{faults[0].note.type} ({faults[0].note.reason}): {faults[0].note.message}")
            for key, note in blamed:
                self.quarantine(key, note)
        else:
            raise BuildError("gave up after quarantining objects in the endpoint fast path")
        if not changed:
            return None
        self.snapshot = self._make_snapshot()
        return self.snapshot

    def release_retired(self) -> None:
        """Free the DAG the last build replaced (the serving loop calls this after publishing)."""
        self._retired = None

    def _make_snapshot(self) -> Snapshot:
        return Snapshot({cache.type_url: self._type_snapshot(cache) for cache in self.caches})

    def _type_snapshot(self, cache: ResourceCache) -> TypeSnapshot:
        contents = cache.contents()
        previous = self._type_snapshots.get(cache.type_url)
        # A cache hands out the same mapping while nothing changed; new contents are versioned
        # from the previous snapshot, at the cost of what changed (docs/design/0019).
        if previous is not None and previous[0] is contents:
            return previous[1]
        changed = None
        if previous is not None and isinstance(cache, ChangeReporting):
            changed = cache.changed_since(previous[0])
        snap = TypeSnapshot.of(
            cache.type_url, contents, previous=previous[1] if previous else None, changed=changed
        )
        self._type_snapshots[cache.type_url] = (contents, snap)
        return snap

    def statuses(self) -> dict[ObjectKey, ObjectStatus]:
        """The status of every object of a kind some plugin writes status for, and of every
        object refused by its kind's schema check."""
        out: dict[ObjectKey, ObjectStatus] = {}
        dag = self.dag
        # The DAG's keys are reused (making a key per object cost a third of this at 10k objects);
        # an object with nothing but the DAG's status and notes takes the short path of _status.
        dag_keys = {(key.namespace, key.name, key.group_kind): key for key in dag.statuses} if dag else {}
        plain = not (self.rejected or self.quarantined or self.source_notes or self.envoy_notes)
        for group_kind, writer in sorted(self.status_writers.items()):
            for obj in self.source.list(writer.gvk):
                meta = obj.get("metadata") or {}
                key = dag_keys.get((str(meta.get("namespace") or ""), str(meta.get("name", "")), group_kind))
                if key is None:
                    key = ObjectKey.of(obj)
                if dag is None or not plain:
                    out[key] = self._status(key)
                else:
                    # _status's answer for an object with nothing but the DAG's say (a kind whose
                    # processor sets no status, such as Ingress, has no entry in dag.statuses).
                    notes = dag.notes.get(key)
                    out[key] = ObjectStatus(
                        key=key, status=dag.statuses.get(key, {}), notes=tuple(notes) if notes else ()
                    )
        # Objects the schema check refused or a build left out, of any kind (core kinds included),
        # and objects the source has something to say about.
        refused = self.rejected.keys() | self.quarantined.keys() | self.source_notes.keys()
        for key in sorted(refused | self._envoy_notes().keys()):
            out[key] = self._status(key)
        return out

    def changed_statuses(self) -> dict[ObjectKey, ObjectStatus | None]:
        """The entries of :meth:`statuses` that may differ from the previous call's (None: gone).

        The first call answers :meth:`statuses`; later ones look only at objects that changed in
        the source cache, at rejections, and at DAG statuses and notes that differ (unchanged
        ones are mostly the very same objects, so comparing them is cheap): not at every object.
        """
        dag = self.dag
        inputs = (
            # A built DAG's statuses and notes never change (the next build makes new ones): kept
            # as they are, not copied (two passes over 10k entries per change).
            dag.statuses if dag else {},
            dag.notes if dag else {},
            {key: problems for key, (_obj, problems) in self.rejected.items()},
            {key: notes for key, (_obj, notes) in self.quarantined.items()},
            dict(self.source_notes),
            self._envoy_notes(),
        )
        previous, self._status_inputs = self._status_inputs, inputs
        changes = self.source.changes_since(self._status_revision) if previous is not None else None
        self._status_revision = self.source.revision
        if previous is None or changes is None:
            return dict(self.statuses())
        candidates = set(changes)
        for i in range(len(inputs)):
            now: dict[ObjectKey, Any] = inputs[i]
            before: dict[ObjectKey, Any] = previous[i]
            if now != before:
                candidates.update(_changed_keys(now, before))
        out: dict[ObjectKey, ObjectStatus | None] = {}
        for key in sorted(candidates):
            if (
                key in self.rejected
                or key in self.quarantined
                or key in self.source_notes
                or key in self.envoy_notes
            ):
                out[key] = self._status(key)
            elif key.group_kind in self.status_writers:
                out[key] = self._status(key) if self.source.get(key) is not None else None
            elif any(key in previous[i] for i in range(2, len(previous))):
                out[key] = None  # an object of a kind without status that is gone or fixed
        return out

    def _status(self, key: ObjectKey) -> ObjectStatus:
        rejected = self.rejected.get(key)
        from_source = self.source_notes.get(key, ())
        if rejected is not None:
            return ObjectStatus(
                key=key,
                status={},
                notes=(
                    *(Note(type="SchemaError", reason="Invalid", message=p) for p in rejected[1]),
                    *from_source,
                ),
            )
        held = self.quarantined.get(key)
        if held is not None:
            writer = self.status_writers.get(key.group_kind)
            refused = writer.refused if writer is not None else None
            status = refused(held[0], held[1]) if refused else {}
            return ObjectStatus(key=key, status=status, notes=held[1] + from_source)
        dag = self.dag
        status = dag.statuses.get(key, {}) if dag else {}
        notes = tuple(dag.notes.get(key, ())) if dag else ()
        rejected_by_envoy = self.envoy_notes.get(key)
        if rejected_by_envoy is not None and self.source.get(key) is rejected_by_envoy[0]:
            notes += rejected_by_envoy[1]
        return ObjectStatus(key=key, status=status, notes=notes + from_source)


def _changed_keys(now: dict[ObjectKey, Any], before: dict[ObjectKey, Any]) -> Iterator[ObjectKey]:
    """The keys in either whose value is not the very same object in the other: those whose value
    differs, and perhaps a few equal ones.  Mostly in C (10k statuses, one new: ~1 ms, not ~10)."""
    keys = list(now)
    if keys == list(before):
        # The same keys in the same order (a change that adds or removes none: the usual case),
        # mostly the very same objects: values compared by position, without hashing 10k keys
        # (ObjectKey's __hash__ is a Python call).
        yield from itertools.compress(keys, map(operator.is_not, now.values(), before.values()))
        return
    yield from set(before).difference(now)  # sets made from dicts reuse their keys' hashes
    yield from itertools.compress(now, map(operator.is_not, map(before.get, now), now.values()))
