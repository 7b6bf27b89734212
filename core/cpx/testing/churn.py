"""Route churn under load: rewrite one manifest back and forth while keep-alive clients send GETs.

The scenario of issue #10 (make-before-break): every answer that is not a 200 is a failed request.
Used by the end-to-end test and by ``tests/bench/route_flips.py``.
"""

from __future__ import annotations

import collections
import http.client
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpx.testing.cpxproc import write_manifest

# Status 0: no HTTP answer at all (connection refused or cut, timeout).
NO_ANSWER = 0


@attrs.frozen
class ChurnResult:
    flips: int
    statuses: Mapping[int, int]  # HTTP status (or NO_ANSWER) -> count
    failure_bodies: Mapping[str, int]  # the start of each non-200 answer (or the error) -> count

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def failures(self) -> int:
        return self.requests - self.statuses.get(200, 0)


@attrs.define(eq=False)
class _Client:
    """One keep-alive connection sending GETs until stopped; reconnects like any HTTP client would."""

    port: int
    host: str
    stop: threading.Event
    statuses: collections.Counter[int] = attrs.field(factory=collections.Counter)
    bodies: collections.Counter[str] = attrs.field(factory=collections.Counter)

    def run(self) -> None:
        conn: http.client.HTTPConnection | None = None
        while not self.stop.is_set():
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5.0)
            status, body = self._get(conn)
            if status == NO_ANSWER:
                # A pooled connection the server closed: retried once on a new one (as clients do).
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5.0)
                status, body = self._get(conn)
            self.statuses[status] += 1
            if status != 200:
                self.bodies[body[:80]] += 1
                conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def _get(self, conn: http.client.HTTPConnection) -> tuple[int, str]:
        try:
            conn.request("GET", "/", headers={"Host": self.host})
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as err:
            return NO_ANSWER, type(err).__name__
        return response.status, body.decode(errors="replace")


def flip_routes(  # noqa: PLR0913  (why: the scenario's knobs, all keyword)
    *,
    manifests: Path,
    file_name: str,
    documents: Callable[[str], Sequence[Mapping[str, Any]]],
    targets: Sequence[str],
    flips: int,
    interval: float,
    http_port: int,
    host: str,
    clients: int = 3,
    settle: float = 0.5,
) -> ChurnResult:
    """Rewrite ``file_name`` with ``documents(target)``, cycling through ``targets`` every
    ``interval`` seconds, ``flips`` times, while ``clients`` keep-alive clients GET ``host``."""
    stop = threading.Event()
    workers = [_Client(http_port, host, stop) for _ in range(clients)]
    threads = [threading.Thread(target=w.run, name=f"churn-client-{i}") for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    try:
        next_at = time.monotonic()
        for flip in range(1, flips + 1):
            write_manifest(manifests, file_name, documents(targets[flip % len(targets)]))
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))
        time.sleep(settle)  # the last change settles under load too
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10.0)
    statuses: collections.Counter[int] = collections.Counter()
    bodies: collections.Counter[str] = collections.Counter()
    for worker in workers:
        statuses.update(worker.statuses)
        bodies.update(worker.bodies)
    return ChurnResult(flips, dict(statuses), dict(bodies))
