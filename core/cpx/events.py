"""The event handler: applies object changes to the pipeline and debounces DAG rebuilds.

Like Contour's EventHandler: every relevant change (re)arms a ``holdoff_delay`` timer (100 ms),
but a rebuild is never deferred more than ``holdoff_max_delay`` (500 ms) after the previous one,
so bursts coalesce and steady churn still converges.  EndpointSlice changes skip the DAG and take
the EDS fast path at once.  Nothing is built before every source has reported its initial sync.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs

from cpx import objects as k8s
from cpx.objects import KubeObject, ObjectKey
from cpx.pipeline import Pipeline, UnknownKindError
from cpx.source import service_of_slice
from cpx.xds.resource import Snapshot

log = logging.getLogger("cpx.events")


class Op(enum.Enum):
    UPSERT = "upsert"
    DELETE = "delete"
    SYNCED = "synced"  # a source finished its initial load
    RESYNC = "resync"  # force a rebuild (e.g. on becoming leader)


@attrs.frozen
class Event:
    op: Op
    obj: KubeObject | None = None
    source: str = ""


@attrs.define(eq=False)
class EventHandler:
    pipeline: Pipeline
    on_snapshot: Callable[[Snapshot], None]
    on_rebuild: Callable[[Pipeline], None] = lambda pipeline: None
    holdoff_delay: float = 0.1
    holdoff_max_delay: float = 0.5
    # Sources that must report SYNCED before the first build (Contour's initial-sync gate).
    pending_sources: set[str] = attrs.field(factory=set)
    sequence: int = 0  # bumps after every published snapshot; tests await it
    _queue: asyncio.Queue[Event] = attrs.field(factory=asyncio.Queue)
    _dirty: bool = False
    _last_rebuild: float = 0.0
    _changed: asyncio.Condition = attrs.field(factory=asyncio.Condition)
    _endpoint_services: set[tuple[str, str]] = attrs.field(factory=set)

    def submit(self, event: Event) -> None:
        self._queue.put_nowait(event)

    def upsert(self, obj: KubeObject, source: str = "") -> None:
        self.submit(Event(Op.UPSERT, obj, source))

    def delete(self, obj: KubeObject, source: str = "") -> None:
        self.submit(Event(Op.DELETE, obj, source))

    def synced(self, source: str) -> None:
        self.submit(Event(Op.SYNCED, None, source))

    @property
    def ready(self) -> bool:
        return self.pipeline.snapshot is not None

    async def wait_for_sequence(self, sequence: int, timeout: float = 10.0) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self.sequence >= sequence), timeout)

    async def run(self) -> None:
        while True:
            timeout = self._timeout()
            try:
                event = (
                    await asyncio.wait_for(self._queue.get(), timeout)
                    if timeout is not None
                    else await self._queue.get()
                )
            except TimeoutError:
                await self._publish_rebuild()
                continue
            self._apply(event)
            # Drain whatever else is queued before deciding, so a burst is one decision.
            while not self._queue.empty():
                self._apply(self._queue.get_nowait())
            if self._endpoint_services and self.pipeline.dag is not None and not self._dirty:
                await self._publish_endpoints()

    def _timeout(self) -> float | None:
        if not self._dirty or self.pending_sources:
            return None
        since_last = time.monotonic() - self._last_rebuild
        if self.pipeline.snapshot is None or since_last >= self.holdoff_max_delay:
            return 0.0
        return min(self.holdoff_delay, self.holdoff_max_delay - since_last)

    def _apply(self, event: Event) -> None:
        if event.op is Op.SYNCED:
            self.pending_sources.discard(event.source)
            self._dirty = True
            return
        if event.op is Op.RESYNC:
            self._dirty = True
            return
        assert event.obj is not None
        try:
            if event.op is Op.UPSERT:
                relevant = self.pipeline.upsert(event.obj, validate=True)
            else:
                relevant = self.pipeline.delete(event.obj)
        except UnknownKindError as err:
            log.error("%s: %s", ObjectKey.of(event.obj), err)
            return
        key = ObjectKey.of(event.obj)
        if key.group_kind == k8s.ENDPOINT_SLICE.group_kind:
            service = service_of_slice(event.obj)  # tolerates a malformed label (schema-refused)
            if service:
                self._endpoint_services.add((k8s.namespace_of(event.obj), service))
        # A refused object is reported at once: the build after it writes its status.
        self._dirty = self._dirty or relevant or key in self.pipeline.rejected

    async def _publish_rebuild(self) -> None:
        self._dirty = False
        self._endpoint_services.clear()  # a rebuild recomputes every endpoint anyway
        self._last_rebuild = time.monotonic()
        try:
            snapshot = await asyncio.to_thread(self.pipeline.rebuild)
        except Exception:
            log.exception("DAG rebuild failed; still serving the last good configuration")
            return
        log.info(
            "rebuilt the DAG in %.1f ms (rebuild %d)",
            self.pipeline.last_build_seconds * 1000,
            self.pipeline.rebuilds,
        )
        await self._publish(snapshot)
        try:
            self.on_rebuild(self.pipeline)
        except Exception:
            log.exception("status reporting failed")

    async def _publish_endpoints(self) -> None:
        services, self._endpoint_services = self._endpoint_services, set()
        try:
            snapshot = self.pipeline.endpoints_changed(services)
        except Exception:
            log.exception("endpoint update failed; still serving the last good endpoints")
            return
        if snapshot is not None:
            await self._publish(snapshot)

    async def _publish(self, snapshot: Snapshot) -> None:
        self.on_snapshot(snapshot)
        async with self._changed:
            self.sequence += 1
            self._changed.notify_all()


def describe(event: Event) -> dict[str, Any]:
    return {
        "op": event.op.value,
        "object": str(ObjectKey.of(event.obj)) if event.obj else None,
        "source": event.source,
    }
