"""What the last build computed, reported: logs, the ``--status-file`` and ``cpx translate``'s objects.

:class:`StatusReporter` runs after every rebuild of ``cpx serve``: it logs each status that
changed, rewrites the status file, and hands the changed statuses to a ``sink`` (Kubernetes mode:
:class:`cpx.status.updater.StatusWriting`).  :func:`translated_objects` is the same information for
``cpx translate``: every object read, with its status or the reason it has none.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import yaml

from cpx.objects import ObjectKey
from cpx.snapshot import ObjectStatus, SnapshotHandler

if TYPE_CHECKING:  # prometheus_client is not for `cpx translate` to load
    from cpx.ops.metrics import Metrics

log = logging.getLogger("cpx.status.reporter")

StatusSink = Callable[[Mapping[ObjectKey, ObjectStatus | None]], None]


@attrs.define(eq=False)
class StatusReporter:
    """Logs status changes and, when asked, writes every object's status to a YAML file.

    ``sink`` (Kubernetes mode: the status writer) gets every rebuild's changed statuses; it then
    counts the status updates, not this reporter.
    """

    path: Path | None
    metrics: Metrics
    sink: StatusSink | None = None
    _last: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict)
    _written: bool = False

    def __call__(self, pipeline: SnapshotHandler) -> None:
        # Only what may have changed since the last call: at 10k objects, looking at every status
        # after each rebuild would hold up the event loop (and so the xDS push) for ~100 ms.
        changed = False
        first = not self._last
        statuses = pipeline.changed_statuses()
        if self.sink is not None:
            self.sink(statuses)
        clean = 0
        updates: dict[str, int] = {}  # per kind: one labelled increment each, not one per object
        for key, status in statuses.items():
            if status is None:
                changed = self._last.pop(key, None) is not None or changed
                continue
            current = status.to_dict()
            if self._last.get(key) == current:
                continue
            changed = True
            self._last[key] = current
            if self.sink is None:
                updates[key.kind] = updates.get(key.kind, 0) + 1
            if first and not status.notes:
                clean += 1  # the first report counts clean objects: 10k log lines say nothing more
            else:
                self._log(status)
        for kind, count in updates.items():
            self.metrics.status_update_total.labels(kind=kind).inc(count)
        if clean:
            log.info("%d object(s) without problems", clean)
        if self.path is not None and (changed or not self._written):
            write_status_file(self.path, pipeline.statuses())
            self._written = True

    @staticmethod
    def _log(status: ObjectStatus) -> None:
        if not status.notes:
            log.info("%s: status %s", status.key, status.status or "ok")
        for note in status.notes:
            level = logging.ERROR if note.severity == "error" else logging.WARNING
            log.log(level, "%s: %s (%s): %s", status.key, note.type, note.reason, note.message)


def write_status_file(path: Path, statuses: Mapping[ObjectKey, ObjectStatus]) -> None:
    """``{"objects": [{kind, group, namespace, name, status}, ...]}``, sorted by object."""
    doc = [
        {
            "kind": key.kind,
            "group": key.group,
            "namespace": key.namespace,
            "name": key.name,
            "status": status.to_dict(),
        }
        for key, status in sorted(statuses.items())
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    # Atomic replace so readers never see half a file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump({"objects": doc}, fh, sort_keys=False)
    os.replace(tmp, path)


def _fields(key: ObjectKey) -> tuple[str, str, str, str]:
    return (key.group, key.kind, key.namespace, key.name)


def translated_objects(
    read: Iterable[Mapping[str, Any]], pipeline: SnapshotHandler, unknown: Mapping[ObjectKey, str]
) -> list[dict[str, Any]]:
    """``cpx translate``'s ``objects``: each object read, in order, with what its status is.

    ``unknown`` maps the objects of a kind no plugin handles to the admission's message.
    """
    statuses = pipeline.statuses()
    # Objects are looked up by the fields ObjectKey.of reads, in a tuple: making a key for each
    # object read cost a third of this at 10k HTTPProxies.
    by_fields = {_fields(key): status for key, status in statuses.items()}
    unknown_by_fields = {_fields(key): message for key, message in unknown.items()}
    # Most objects read (Services, EndpointSlices) are of kinds with no status at all.
    with_status = pipeline.status_writers.keys() | {key.group_kind for key in (*statuses, *unknown)}
    out = []
    for obj in read:
        meta = obj.get("metadata") or {}
        ident: dict[str, Any] = {"name": meta.get("name")}
        if meta.get("namespace"):
            ident["namespace"] = meta["namespace"]
        entry: dict[str, Any] = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": ident,
        }
        out.append(entry)
        group_kind = (str(obj.get("apiVersion", "")).rpartition("/")[0], str(obj.get("kind", "")))
        if group_kind not in with_status:
            continue
        fields = (*group_kind, str(meta.get("namespace") or ""), str(meta.get("name", "")))
        message = unknown_by_fields.get(fields)
        status = by_fields.get(fields) if message is None else None
        if message is not None:
            entry["status"] = {
                "cpx": {
                    "problems": [
                        {
                            "type": "UnknownKind",
                            "reason": "NotHandled",
                            "message": message,
                            "severity": "error",
                        }
                    ]
                }
            }
        elif status is not None:
            entry["status"] = status.to_dict()
        elif group_kind in pipeline.status_writers and not pipeline.accepts(obj):
            entry["status"] = {"cpx": {"ignored": "not selected by this cpx (class or filter)"}}
    return out
