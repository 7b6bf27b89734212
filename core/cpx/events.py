"""The event handler: applies object changes to the pipeline and debounces DAG rebuilds.

Like Contour's EventHandler: every relevant change (re)arms a ``holdoff_delay`` timer (100 ms),
but a rebuild is never deferred more than ``holdoff_max_delay`` (500 ms) after the previous one,
so bursts coalesce and steady churn still converges.  EndpointSlice changes skip the DAG and take
the EDS fast path at once.  Nothing is built before every source has reported its initial sync.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs

from cpx import objects as k8s
from cpx.eventtypes import Event, Op
from cpx.isolation import sanitize
from cpx.objects import KubeObject, ObjectKey
from cpx.snapshot import SnapshotHandler, UnknownKindError
from cpx.sources.cache import service_of_slice
from cpx.xds.resource import Snapshot

# Event and Op are cpx.eventtypes' (apart so that reading manifests needs no asyncio), still
# importable from here.
__all__ = ["MAX_RETRY_DELAY", "Event", "EventHandler", "Op", "describe"]
log = logging.getLogger("cpx.events")

MAX_RETRY_DELAY = 30.0  # seconds between retries of a build that keeps failing


@attrs.define(eq=False)
class EventHandler:
    pipeline: SnapshotHandler
    on_snapshot: Callable[[Snapshot], None]
    on_rebuild: Callable[[SnapshotHandler], None] = lambda pipeline: None
    on_build_failed: Callable[[SnapshotHandler], None] = lambda pipeline: None
    on_statuses: Callable[[SnapshotHandler], None] = lambda pipeline: None  # statuses changed, no rebuild
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
    # Consecutive failed builds: the changes stay pending and the build is retried with backoff.
    failures: int = 0
    _retry_at: float = 0.0

    def submit(self, event: Event) -> None:
        self._queue.put_nowait(event)

    def upsert(self, obj: KubeObject, source: str = "", *, admitted: bool = False) -> None:
        self.submit(Event(Op.UPSERT, obj, source, admitted=admitted))

    def delete(self, obj: KubeObject, source: str = "") -> None:
        self.submit(Event(Op.DELETE, obj, source))

    def synced(self, source: str) -> None:
        self.submit(Event(Op.SYNCED, None, source))

    def envoy_rejected(self, type_url: str, names: tuple[str, ...], message: str, *, leave_out: bool) -> None:
        """From the event loop's thread (the xDS server's callbacks run there)."""
        self.submit(Event(Op.REJECTED, rejected=(type_url, names, message, leave_out)))

    @property
    def ready(self) -> bool:
        return self.not_ready() is None

    def not_ready(self) -> str | None:
        """Why cpx is not ready to serve (None: it is)."""
        if self.pipeline.snapshot is None:
            if self.pipeline.last_build_error is not None:
                return f"the first DAG build failed: {self.pipeline.last_build_error}"
            return "waiting for the initial sync and first DAG build"
        if self.pipeline.last_build_error is not None:
            error = self.pipeline.last_build_error
            return f"the last DAG build failed (serving the last good configuration): {error}"
        return None

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
        now = time.monotonic()
        if self.failures:
            return max(self._retry_at - now, 0.0)
        since_last = now - self._last_rebuild
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
        if event.op is Op.REJECTED:
            assert event.rejected is not None
            # Applied here, between builds, like any change to the source cache.
            type_url, names, message, leave_out = event.rejected
            if self.pipeline.envoy_rejected(type_url, names, message, leave_out=leave_out):
                if leave_out:
                    self._dirty = True  # rebuild without them (statuses are reported then)
                else:
                    self.on_statuses(self.pipeline)
            return
        assert event.obj is not None
        try:
            if event.op is Op.UPSERT:
                relevant = self.pipeline.upsert(event.obj, validate=not event.admitted)
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
        relevant = relevant or key in self.pipeline.rejected
        if relevant and self.failures:
            # While builds fail, a new change may be the fix: try it soon, not after the backoff.
            self._retry_at = min(self._retry_at, time.monotonic() + self.holdoff_delay)
        self._dirty = self._dirty or relevant

    async def _publish_rebuild(self) -> None:
        self._dirty = False
        self._endpoint_services.clear()  # a rebuild recomputes every endpoint anyway
        self._last_rebuild = time.monotonic()
        try:
            snapshot = await asyncio.to_thread(self.pipeline.rebuild)
        except Exception as err:
            # Keep the changes pending: they are built again, with backoff, until a build succeeds.
            self._dirty = True
            self.failures += 1
            delay = min(self.holdoff_max_delay * 2**self.failures, MAX_RETRY_DELAY)
            self._retry_at = time.monotonic() + delay
            log.error(
                "DAG rebuild failed (%s); still serving the last good configuration, retrying in %.1f s",
                sanitize(str(err)),
                delay,
            )
            self.on_build_failed(self.pipeline)
            return
        self.failures = 0
        log.info(
            "rebuilt the DAG in %.1f ms (rebuild %d)",
            self.pipeline.last_build_seconds * 1000,
            self.pipeline.rebuilds,
        )
        await self._publish(snapshot)
        # Statuses are reported before the woken xDS streams run (this is synchronous): once an
        # Envoy has a change, its objects' statuses say so.
        try:
            self.on_rebuild(self.pipeline)
        except Exception:
            log.exception("status reporting failed")
        # The replaced DAG is freed once the streams have sent the new configuration.
        await asyncio.sleep(0)
        self.pipeline.release_retired()

    async def _publish_endpoints(self) -> None:
        services, self._endpoint_services = self._endpoint_services, set()
        left_out = len(self.pipeline.quarantined)
        try:
            snapshot = self.pipeline.endpoints_changed(services)
        except Exception as err:
            log.error("endpoint update failed; still serving the last good endpoints: %s", sanitize(str(err)))
            return
        if snapshot is not None:
            await self._publish(snapshot)
        if len(self.pipeline.quarantined) != left_out:
            self.on_statuses(self.pipeline)  # an EndpointSlice was left out: say so at once

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
