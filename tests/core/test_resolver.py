"""cpx.sources.resolver: cached DNS answers, and builds that never wait long for them."""

from __future__ import annotations

import asyncio
import threading
import time

from cpx.config import Config
from cpx.events import EventHandler
from cpx.plugins import PluginHost
from cpx.serving import rebuild_on_late_dns_answers
from cpx.snapshot import SnapshotHandler
from cpx.sources.resolver import PENDING, Resolver


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_answers_are_cached_for_their_ttl() -> None:
    calls: list[str] = []

    def lookup(name: str) -> list[str]:
        calls.append(name)
        if name == "gone.test":
            raise OSError("Name or service not known")
        return ["192.0.2.1", "192.0.2.1"]

    clock = Clock()
    resolver = Resolver(lookup, ttl=30.0, negative_ttl=5.0, clock=clock)
    assert resolver.resolve("a.test").addresses == ("192.0.2.1",)
    gone = resolver.resolve("gone.test")
    assert gone.addresses is None and "not known" in gone.error
    clock.now = 4.0
    resolver.resolve("a.test"), resolver.resolve("gone.test")
    assert calls == ["a.test", "gone.test"]
    clock.now = 6.0  # the failure expired, the answer did not
    resolver.resolve("a.test"), resolver.resolve("gone.test")
    assert calls == ["a.test", "gone.test", "gone.test"]
    clock.now = 31.0
    resolver.resolve("a.test")
    assert calls[-1] == "a.test" and len(calls) == 4


def test_a_hanging_resolver_costs_one_timeout_not_one_per_name() -> None:
    release = threading.Event()
    late: list[str] = []

    def lookup(name: str) -> list[str]:
        release.wait(10)
        return ["192.0.2.1"]

    resolver = Resolver(lookup, timeout=0.1, window=60.0)
    resolver.on_late_answer = lambda: late.append("rebuild")
    started = time.monotonic()
    answers = [resolver.resolve(f"n{i}.test") for i in range(20)]
    assert answers == [PENDING] * 20
    assert time.monotonic() - started < 1.0
    # The lookups finish in the background; each late answer asks for a rebuild.
    release.set()
    deadline = time.monotonic() + 5
    while len(late) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(late) == 20
    assert resolver.resolve("n7.test").addresses == ("192.0.2.1",)


def test_an_answer_within_the_budget_is_waited_for_and_not_reported_late() -> None:
    late: list[str] = []

    def lookup(name: str) -> list[str]:
        time.sleep(0.05)
        return ["192.0.2.1"]

    resolver = Resolver(lookup, timeout=1.0)
    resolver.on_late_answer = lambda: late.append("rebuild")
    assert resolver.resolve("a.test").addresses == ("192.0.2.1",)
    time.sleep(0.1)
    assert late == []


def test_a_failing_lookup_function_does_not_stop_the_workers() -> None:
    def lookup(name: str) -> list[str]:
        if name == "bad.test":
            raise ValueError("embedded null byte")
        return ["192.0.2.1"]

    resolver = Resolver(lookup)
    assert resolver.resolve("bad.test").error == "embedded null byte"
    for n in range(10):  # more names than workers
        assert resolver.resolve(f"n{n}.test").addresses == ("192.0.2.1",)


def test_a_bounded_number_of_names_is_kept() -> None:
    resolver = Resolver(lambda name: ["192.0.2.1"], max_names=16)
    for n in range(100):
        resolver.resolve(f"n{n}.test")
    assert len(resolver._cache) <= 16


async def test_cpx_serve_rebuilds_when_a_late_answer_arrives() -> None:
    pipeline = SnapshotHandler.create(PluginHost.load([]), Config())
    handler = EventHandler(pipeline, on_snapshot=lambda snapshot: None)
    task = asyncio.create_task(handler.run())
    try:
        rebuild_on_late_dns_answers(pipeline, handler)
        callback = pipeline.source.external_names.resolver.on_late_answer
        assert callback is not None
        # Called on a resolver thread, as cpx.sources.resolver does.
        thread = threading.Thread(target=callback)
        thread.start()
        thread.join()
        await handler.wait_for_sequence(1, timeout=5)
        assert pipeline.rebuilds == 1
    finally:
        task.cancel()
