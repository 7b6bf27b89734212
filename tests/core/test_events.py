"""The event handler's debounce and initial-sync gate, on a recording pipeline."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import attrs

from cpx.events import EventHandler
from cpx.xds.resource import Snapshot


@attrs.define
class RecordingPipeline:
    rebuild_times: list[float] = attrs.field(factory=list)
    snapshot: Snapshot | None = None
    dag: object | None = None
    last_build_seconds: float = 0.0
    rebuilds: int = 0
    endpoint_calls: list[set[tuple[str, str]]] = attrs.field(factory=list)
    last_build_error: str | None = None
    quarantined: dict[object, object] = attrs.field(factory=dict)
    failing: int = 0  # how many of the next builds fail
    rejected: dict[object, object] = attrs.field(factory=dict)

    def upsert(self, obj: dict[str, Any], validate: bool = False) -> bool:
        kind: str = obj["kind"]
        return kind != "EndpointSlice"

    def delete(self, obj: dict[str, Any]) -> bool:
        return True

    def rebuild(self) -> Snapshot:
        self.rebuild_times.append(time.monotonic())
        if self.failing:
            self.failing -= 1
            self.last_build_error = "broken"
            raise RuntimeError("broken")
        self.last_build_error = None
        self.snapshot = Snapshot({})
        self.dag = object()
        self.rebuilds += 1
        return self.snapshot

    def release_retired(self) -> None:
        pass

    def endpoints_changed(self, services: set[tuple[str, str]]) -> Snapshot | None:
        self.endpoint_calls.append(set(services))
        return Snapshot({})


def _svc(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "default"}}


async def _start(
    pipeline: RecordingPipeline, **kw: Any
) -> tuple[EventHandler, asyncio.Task[None], list[Snapshot]]:
    published: list[Snapshot] = []
    handler = EventHandler(pipeline, on_snapshot=published.append, **kw)  # type: ignore[arg-type]
    return handler, asyncio.create_task(handler.run()), published


async def test_nothing_is_built_before_every_source_synced() -> None:
    pipeline = RecordingPipeline()
    handler, task, published = await _start(pipeline, pending_sources={"a", "b"})
    handler.upsert(_svc(1), "a")
    handler.synced("a")
    await asyncio.sleep(0.3)
    assert pipeline.rebuild_times == [] and published == []
    handler.synced("b")
    await handler.wait_for_sequence(1, timeout=2)
    assert len(pipeline.rebuild_times) == 1
    task.cancel()


async def test_a_burst_is_one_rebuild_after_the_holdoff() -> None:
    pipeline = RecordingPipeline()
    handler, task, _ = await _start(pipeline, holdoff_delay=0.1, holdoff_max_delay=0.5)
    handler.synced("x")
    await handler.wait_for_sequence(1)
    await asyncio.sleep(0.6)  # the next change is past the max hold-off: built at once
    start = time.monotonic()
    for i in range(50):
        handler.upsert(_svc(i))
    await handler.wait_for_sequence(2)
    assert len(pipeline.rebuild_times) == 2
    assert pipeline.rebuild_times[-1] - start < 0.08
    # A second burst right after: waits for the 100 ms hold-off and coalesces.
    start = time.monotonic()
    for i in range(50):
        handler.upsert(_svc(i))
        await asyncio.sleep(0.001)
    await handler.wait_for_sequence(3)
    assert len(pipeline.rebuild_times) == 3
    assert pipeline.rebuild_times[-1] - start >= 0.09
    task.cancel()


async def test_steady_churn_still_rebuilds_every_max_holdoff() -> None:
    pipeline = RecordingPipeline()
    handler, task, _ = await _start(pipeline, holdoff_delay=0.1, holdoff_max_delay=0.3)
    handler.synced("x")
    await handler.wait_for_sequence(1)
    end = time.monotonic() + 1.0
    i = 0
    while time.monotonic() < end:  # a change every 50 ms never leaves 100 ms of quiet
        handler.upsert(_svc(i))
        i += 1
        await asyncio.sleep(0.05)
    assert len(pipeline.rebuild_times) >= 3
    task.cancel()


async def test_endpoint_slices_take_the_fast_path() -> None:
    pipeline = RecordingPipeline()
    handler, task, _ = await _start(pipeline)
    handler.synced("x")
    await handler.wait_for_sequence(1)
    handler.upsert(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "s1-abc",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "s1"},
            },
        }
    )
    await handler.wait_for_sequence(2)
    assert pipeline.endpoint_calls == [{("default", "s1")}]
    assert len(pipeline.rebuild_times) == 1  # no DAG rebuild
    task.cancel()


async def test_a_failed_build_keeps_its_changes_pending_and_is_retried_with_backoff() -> None:
    pipeline = RecordingPipeline()
    handler, task, published = await _start(pipeline, holdoff_delay=0.01, holdoff_max_delay=0.05)
    handler.upsert(_svc(1))
    await asyncio.sleep(0.2)
    assert len(published) == 1 and handler.ready
    pipeline.failing = 2
    handler.upsert(_svc(2))  # nothing else happens: the retries alone must publish it
    await asyncio.sleep(0.05)
    assert handler.not_ready() == ("the last DAG build failed (serving the last good configuration): broken")
    for _ in range(100):
        if len(published) == 2:
            break
        await asyncio.sleep(0.02)
    assert len(published) == 2 and handler.ready and handler.failures == 0
    gaps = [b - a for a, b in zip(pipeline.rebuild_times[1:], pipeline.rebuild_times[2:], strict=False)]
    assert gaps[0] >= 0.09 and gaps[1] >= 0.19  # 0.05 * 2**n: backing off
    task.cancel()


async def test_a_change_while_builds_fail_is_tried_soon_not_after_the_backoff() -> None:
    pipeline = RecordingPipeline()
    handler, task, published = await _start(pipeline, holdoff_delay=0.01, holdoff_max_delay=0.05)
    handler.upsert(_svc(1))
    await asyncio.sleep(0.2)
    pipeline.failing = 5  # 0.1, 0.2, 0.4, 0.8 s of backoff after each failure
    handler.upsert(_svc(2))
    await asyncio.sleep(0.5)
    failed = len(pipeline.rebuild_times)
    pipeline.failing = 0  # "the fix"
    handler.upsert(_svc(3))
    for _ in range(15):  # the backoff alone would retry ~0.25 s from now
        if len(published) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(published) == 2 and len(pipeline.rebuild_times) == failed + 1
    task.cancel()
