"""The translation pipeline: source cache → DAG builder → xDS caches → snapshot, plus status.

One :class:`Pipeline` serves both ``cpx translate`` (offline, one pass) and ``cpx serve`` (driven
by the event handler).  It never talks to Envoy or Kubernetes itself.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from cpx.config import Config
from cpx.dag.builder import Builder
from cpx.dag.dag import DAG, Note
from cpx.objects import KubeObject, ObjectKey
from cpx.plugins import PluginHost
from cpx.records import ResourceCache, StatusWriterSpec, WatchSpec
from cpx.source import SourceCache
from cpx.xds.resource import Resource, Snapshot, TypeSnapshot

log = logging.getLogger("cpx.pipeline")


class UnknownKindError(ValueError):
    """No enabled plugin watches this kind."""


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
class Pipeline:
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
    # What the object source itself found wrong with objects (standalone mode: refused edits,
    # objects defined twice), shown with their status; the source keeps it current.
    source_notes: dict[ObjectKey, tuple[Note, ...]] = attrs.field(factory=dict)
    rebuilds: int = 0
    last_build_seconds: float = 0.0
    _type_snapshots: dict[str, tuple[Mapping[str, Resource], TypeSnapshot]] = attrs.field(factory=dict)
    # What changed_statuses() last saw: the source revision, the DAG's statuses and notes, rejections.
    _status_revision: int = -1
    _status_inputs: tuple[dict[ObjectKey, Any], ...] | None = None

    @classmethod
    def create(cls, host: PluginHost, config: Config) -> Pipeline:
        watches = {w.gvk.group_kind: w for w in host.watches()}
        source = SourceCache(watches=watches, secret_policy=host.secret_access_permitted)
        processors = [(spec.name, spec.factory(config)) for spec in host.processors()]
        caches = [spec.factory(config) for spec in host.resource_caches()]
        for cache in caches:
            bind = getattr(cache, "bind_source", None)
            if bind is not None:
                bind(source)
        writers = {w.gvk.group_kind: w for w in host.status_writers()}
        host.configure(config)
        return cls(host, config, source, Builder(processors), caches, watches, writers)

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
        fixed = self.rejected.pop(key, None) is not None
        return self.source.insert(obj, key) or fixed

    def delete(self, obj: Mapping[str, Any]) -> bool:
        # A rejected object that goes away takes its status entry with it: that needs a rebuild.
        was_rejected = self.rejected.pop(ObjectKey.of(obj), None) is not None
        return self.source.remove(obj) or was_rejected

    # -- output ----------------------------------------------------------------------------------
    def rebuild(self) -> Snapshot:
        """Build a new DAG, let every cache observe it, and return the new snapshot.

        A processor exception propagates: the caller keeps serving the previous snapshot.

        The cyclic garbage collector is paused meanwhile: a build allocates many objects and
        almost no cycles, and at 10k routes the collections it would trigger (each full one
        walking every object the process holds) cost as much as the build itself.
        """
        started = time.perf_counter()
        collecting = gc.isenabled()
        gc.disable()
        try:
            dag = self.builder.build(self.source)
            for cache in self.caches:
                cache.on_change(dag)
            self.dag = dag
            self.snapshot = self._make_snapshot()
        finally:
            if collecting:
                gc.enable()
        self.rebuilds += 1
        self.last_build_seconds = time.perf_counter() - started
        return self.snapshot

    def endpoints_changed(self, services: Iterable[tuple[str, str]]) -> Snapshot | None:
        """The EDS fast path: recompute only those Services' endpoints, without a DAG rebuild."""
        if self.dag is None:
            return None
        wanted = set(services)
        changed = False
        for cache in self.caches:
            fast = getattr(cache, "on_endpoints_change", None)
            if fast is not None and fast(self.source, wanted):
                changed = True
        if not changed:
            return None
        self.snapshot = self._make_snapshot()
        return self.snapshot

    def _make_snapshot(self) -> Snapshot:
        types: dict[str, TypeSnapshot] = {}
        for cache in self.caches:
            contents = cache.contents()
            previous = self._type_snapshots.get(cache.type_url)
            # Re-hash a type only when its cache handed out new contents.
            if previous is not None and (previous[0] is contents or previous[0] == contents):
                types[cache.type_url] = previous[1]
                continue
            snap = TypeSnapshot.of(cache.type_url, contents)
            self._type_snapshots[cache.type_url] = (contents, snap)
            types[cache.type_url] = snap
        return Snapshot(types)

    def statuses(self) -> dict[ObjectKey, ObjectStatus]:
        """The status of every object of a kind some plugin writes status for, and of every
        object refused by its kind's schema check."""
        out: dict[ObjectKey, ObjectStatus] = {}
        for _group_kind, writer in sorted(self.status_writers.items()):
            for obj in self.source.list(writer.gvk):
                key = ObjectKey.of(obj)
                out[key] = self._status(key)
        # Objects the schema check refused, of any kind (core kinds included): never served; and
        # objects the source has something to say about.
        for key in sorted(self.rejected.keys() | self.source_notes.keys()):
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
            dict(dag.statuses) if dag else {},
            dict(dag.notes) if dag else {},
            {key: problems for key, (_obj, problems) in self.rejected.items()},
            dict(self.source_notes),
        )
        previous, self._status_inputs = self._status_inputs, inputs
        changes = self.source.changes_since(self._status_revision) if previous is not None else None
        self._status_revision = self.source.revision
        if previous is None or changes is None:
            return dict(self.statuses())
        candidates = {ObjectKey(*change) for change in changes}
        for i in range(len(inputs)):
            now: dict[ObjectKey, Any] = inputs[i]
            before: dict[ObjectKey, Any] = previous[i]
            if now != before:
                candidates.update(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))
        out: dict[ObjectKey, ObjectStatus | None] = {}
        for key in sorted(candidates):
            if key in self.rejected or key in self.source_notes:
                out[key] = self._status(key)
            elif key.group_kind in self.status_writers:
                out[key] = self._status(key) if self.source.get(key) is not None else None
            elif key in previous[2] or key in previous[3]:
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
        dag = self.dag
        status = dag.statuses.get(key, {}) if dag else {}
        notes = tuple(dag.notes.get(key, ())) if dag else ()
        return ObjectStatus(key=key, status=status, notes=notes + from_source)
