"""One fuzz case: generated objects through the whole pipeline, as ``cpx translate`` and ``cpx serve``
feed it, checking that nothing raises (see :mod:`cpx.testing.strategies` for the objects).

Exceptions propagate: the caller (a Hypothesis property, ``tests/fuzz/run.py``) reports them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import yaml

from cpx.config import Config
from cpx.objects import KubeObject
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler, UnknownKindError
from cpx.sources import manifests
from cpx.sources.admission import admit
from cpx.xds.resource import Snapshot

SOURCE = Path("fuzz.yaml")  # only named in error messages


def loadable(obj: KubeObject) -> bool:
    """Whether the manifest loader hands this document to the pipeline at all."""
    return manifests._check_document(obj) is None  # the loader's own gate


def ingest(pipeline: SnapshotHandler, objects: Sequence[KubeObject]) -> list[KubeObject]:
    """Upsert the loadable objects of known kinds (schema-checked, as standalone mode does);
    returns the objects that went in."""
    kept: list[KubeObject] = []
    for obj in objects:
        if not loadable(obj):
            continue
        try:
            pipeline.watch_for(obj)
        except UnknownKindError:
            continue
        kept += admit(pipeline, SOURCE, [obj]).accepted
    for obj in kept:
        pipeline.upsert(obj, validate=True)
    return kept


def run_case(host: PluginHost, objects: Sequence[KubeObject], config: Config | None = None) -> list[Snapshot]:
    """Build from ``objects`` (which the pipeline keeps, and may edit), then again after deleting
    half of them and adding the first back; returns the snapshots published.  Statuses are computed and
    serialised as the status file does."""
    pipeline = SnapshotHandler.create(host, config or Config())
    kept = ingest(pipeline, objects)
    snapshots = [_build(pipeline)]
    for obj in kept[::2]:
        pipeline.delete(obj)
    if kept:
        pipeline.upsert(kept[0], validate=True)  # deleted above: added back
    snapshots.append(_build(pipeline))
    return snapshots


def _build(pipeline: SnapshotHandler) -> Snapshot:
    snapshot = pipeline.rebuild()
    statuses = {str(key): status.to_dict() for key, status in pipeline.changed_statuses().items() if status}
    yaml.safe_dump(json.loads(json.dumps(statuses)))
    json.dumps(snapshot.to_json())
    return snapshot
