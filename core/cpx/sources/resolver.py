"""Cached, time-bounded DNS lookups, for checks that must not stall a DAG build.

The ExternalName check (:mod:`cpx.sources.externalname`) resolves names the way Envoy will; a build
thread must not wait long on a slow resolver, so lookups run on a few daemon threads and a build
waits for them only within a small budget.  What the budget leaves unanswered is
:data:`PENDING`; when such a lookup completes, ``on_late_answer`` is called (``cpx serve`` then
schedules a rebuild) so the answer is used without waiting for an unrelated change.
"""

from __future__ import annotations

import concurrent.futures
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence

import attrs

# name -> the addresses it resolves to; raises OSError (socket.gaierror) when it does not resolve.
Lookup = Callable[[str], Sequence[str]]
WORKERS = 4


def system_lookup(name: str) -> Sequence[str]:
    """Every address the system resolver gives for ``name`` (both families, as Envoy's AUTO)."""
    infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@attrs.frozen
class Answer:
    """A lookup's outcome: the addresses, or ``None`` with ``error`` saying why there are none."""

    addresses: tuple[str, ...] | None
    error: str = ""


PENDING = Answer(None, "pending")


class Resolver:
    """Answers are kept ``ttl`` seconds (failures ``negative_ttl``), at most ``max_names`` of them.

    Waiting is budgeted: at most ``timeout`` seconds in total per ``window`` seconds (a build
    with many new names, or a resolver that hangs, costs one ``timeout``, not one per name).
    """

    def __init__(
        self,
        lookup: Lookup = system_lookup,
        *,
        timeout: float = 1.0,
        window: float = 5.0,
        ttl: float = 30.0,
        negative_ttl: float = 5.0,
        max_names: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self.timeout = timeout
        self._window = window
        self._ttl = ttl
        self._negative_ttl = negative_ttl
        self._max_names = max_names
        self._clock = clock
        self.on_late_answer: Callable[[], None] | None = None
        self._lock = threading.Lock()
        # name -> (expiry, future); a lookup under way has no expiry yet (inf).
        self._cache: dict[str, tuple[float, concurrent.futures.Future[Answer]]] = {}
        self._late: set[str] = set()  # answered PENDING: report when they complete
        self._window_start = float("-inf")
        self._waited = 0.0
        self._queue: queue.SimpleQueue[tuple[str, concurrent.futures.Future[Answer]]] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []

    def resolve(self, name: str) -> Answer:
        with self._lock:
            entry = self._cache.get(name)
            if entry is None or (entry[1].done() and entry[0] <= self._clock()):
                entry = (float("inf"), self._submit(name))
        future = entry[1]
        answer = future.result() if future.done() else self._wait(future)
        if answer is PENDING:
            with self._lock:
                if not future.done():
                    self._late.add(name)
                    return PENDING
            answer = future.result()
        return answer

    def _wait(self, future: concurrent.futures.Future[Answer]) -> Answer:
        with self._lock:
            now = self._clock()
            if now - self._window_start >= self._window:
                self._window_start, self._waited = now, 0.0
            allowed = self.timeout - self._waited
        if allowed <= 0:
            return PENDING
        started = time.monotonic()
        try:
            return future.result(timeout=allowed)
        except concurrent.futures.TimeoutError:
            return PENDING
        finally:
            with self._lock:
                self._waited += time.monotonic() - started

    def _submit(self, name: str) -> concurrent.futures.Future[Answer]:
        if len(self._cache) >= self._max_names:
            self._evict()
        future: concurrent.futures.Future[Answer] = concurrent.futures.Future()
        self._cache[name] = (float("inf"), future)
        self._queue.put((name, future))
        if len(self._workers) < WORKERS:
            # Daemon threads: a lookup stuck in getaddrinfo must not hold up the process's exit.
            worker = threading.Thread(target=self._work, name="cpx-dns", daemon=True)
            self._workers.append(worker)
            worker.start()
        return future

    def _work(self) -> None:
        while True:
            name, future = self._queue.get()
            try:
                answer, ttl = Answer(tuple(dict.fromkeys(self._lookup(name)))), self._ttl
            except Exception as err:  # any failure means "does not resolve"; the worker lives on
                answer, ttl = Answer(None, str(err) or type(err).__name__), self._negative_ttl
            with self._lock:
                if self._cache.get(name, (0, None))[1] is future:
                    self._cache[name] = (self._clock() + ttl, future)
                late = name in self._late
                self._late.discard(name)
                future.set_result(answer)
            callback = self.on_late_answer
            if late and callback is not None:
                callback()

    def _evict(self) -> None:
        now = self._clock()
        expired = [n for n, (expiry, f) in self._cache.items() if f.done() and expiry <= now]
        for name in expired or list(self._cache)[: max(1, self._max_names // 8)]:
            del self._cache[name]
