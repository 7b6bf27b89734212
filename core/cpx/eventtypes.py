"""What the sources tell the event handler (:mod:`cpx.events`): an operation and its object.

Apart from the handler so that reading manifests (``cpx translate``, the standalone source) does
not import asyncio, which the handler's queue needs and which brings ssl and subprocess along.
"""

from __future__ import annotations

import enum

import attrs

from cpx.objects import KubeObject


class Op(enum.Enum):
    UPSERT = "upsert"
    DELETE = "delete"
    SYNCED = "synced"  # a source finished its initial load
    RESYNC = "resync"  # force a rebuild (e.g. on becoming leader)
    REJECTED = "rejected"  # Envoy NACKed resources (see SnapshotHandler.envoy_rejected)


@attrs.frozen
class Event:
    op: Op
    obj: KubeObject | None = None
    source: str = ""
    # REJECTED: (type URL, resource names, Envoy's message, whether to leave out the objects)
    rejected: tuple[str, tuple[str, ...], str, bool] | None = None
    # Already checked as the API server would (standalone admission): not schema-checked again.
    admitted: bool = False
