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
                self.metrics.status_update_total.labels(kind=key.kind).inc()
            if first and not status.notes:
                clean += 1  # the first report counts clean objects: 10k log lines say nothing more
            else:
                self._log(status)
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


def _identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ident: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("namespace"):
        ident["namespace"] = meta["namespace"]
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": ident}


def translated_objects(
    read: Iterable[Mapping[str, Any]], pipeline: SnapshotHandler, unknown: Mapping[ObjectKey, str]
) -> list[dict[str, Any]]:
    """``cpx translate``'s ``objects``: each object read, in order, with what its status is.

    ``unknown`` maps the objects of a kind no plugin handles to the admission's message.
    """
    statuses = pipeline.statuses()
    # Most objects read (Services, EndpointSlices) are of kinds with no status at all: recognised by
    # their kind, without making a key for each (a third of this at 10k HTTPProxies).
    with_status = pipeline.status_writers.keys() | {key.group_kind for key in (*statuses, *unknown)}
    out = []
    for obj in read:
        entry = _identity(obj)
        if (str(obj.get("apiVersion", "")).rpartition("/")[0], str(obj.get("kind", ""))) not in with_status:
            out.append(entry)  # the group and kind as ObjectKey.of reads them
            continue
        key = ObjectKey.of(obj)
        if key in unknown:
            entry["status"] = {
                "cpx": {
                    "problems": [
                        {
                            "type": "UnknownKind",
                            "reason": "NotHandled",
                            "message": unknown[key],
                            "severity": "error",
                        }
                    ]
                }
            }
        elif key in statuses:
            entry["status"] = statuses[key].to_dict()
        elif key.group_kind in pipeline.status_writers and not pipeline.accepts(obj):
            entry["status"] = {"cpx": {"ignored": "not selected by this cpx (class or filter)"}}
        out.append(entry)
    return out
