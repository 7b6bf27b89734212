"""Small HTTP endpoints: health, readiness and metrics; and a debug server for ``/debug/dag``.

Each server is an asyncio loop in a thread of its own, so a long build on the main loop never
delays a probe, and a connection costs a coroutine, not a thread. What a client can hold is
bounded (:class:`HTTPLimits`): the request head must arrive within a few seconds and fit in
8 KiB, at most ``max_connections`` are open at once (a new one evicts the oldest still sending its
head, so idle half-sent requests cannot lock probes out), routes run on a small thread pool, and
every response closes its connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus

import attrs
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("cpx.http")

Route = Callable[[], tuple[int, str, bytes]]


@attrs.frozen(kw_only=True)
class HTTPLimits:
    head_timeout: float = 5.0  # seconds to send the request line and headers
    write_timeout: float = 10.0  # seconds for the client to take the response
    max_head_bytes: int = 8192
    max_connections: int = 64
    workers: int = 2  # threads running routes (/metrics, /debug/dag)
    backlog: int = 128


def _response(status: int, ctype: str, body: bytes, *, head_only: bool = False) -> bytes:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + (b"" if head_only else body)


def _text(status: int, text: str) -> tuple[int, str, bytes]:
    return status, "text/plain", text.encode()


class HTTPService:
    """An HTTP/1.1 server of fixed GET routes; binds at construction (OSError if the port is taken)."""

    def __init__(
        self, address: str, port: int, routes: dict[str, Route], limits: HTTPLimits | None = None
    ) -> None:
        self.routes = routes
        self.limits = limits if limits is not None else HTTPLimits()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._sock = socket.create_server((address, port), family=family, backlog=self.limits.backlog)
        self._loop = asyncio.new_event_loop()
        self._workers = concurrent.futures.ThreadPoolExecutor(self.limits.workers, f"http-{self.port}")
        self._thread = threading.Thread(target=self._run, name=f"http-{self.port}", daemon=True)
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        # Connections still sending their request head, oldest first.
        self._reading: dict[asyncio.StreamWriter, None] = {}
        self._open = 0

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> HTTPService:
        self._thread.start()
        self._started.wait(5.0)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            stop = self._stop
            if stop is not None:
                self._loop.call_soon_threadsafe(stop.set)
            self._thread.join(5.0)
        else:
            self._sock.close()
            self._loop.close()
        self._workers.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._connection, sock=self._sock, limit=self.limits.max_head_bytes
        )
        self._started.set()
        await self._stop.wait()
        server.close()
        for writer in list(self._reading):
            writer.close()
        # A stopping process does not wait for answers in progress.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= self.limits.max_connections:
            if not self._reading:
                writer.close()  # every slot is busy answering: the client retries
                return
            next(iter(self._reading)).close()  # the oldest idle one makes room
        self._open += 1
        self._reading[writer] = None
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.head_timeout)
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return  # too slow, too big or gone: nothing worth answering
            finally:
                self._reading.pop(writer, None)
            response = await self._answer(head)
            writer.write(response)
            await asyncio.wait_for(writer.drain(), self.limits.write_timeout)
        except (TimeoutError, ConnectionError):
            pass
        finally:
            self._open -= 1
            writer.close()

    async def _answer(self, head: bytes) -> bytes:
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return _response(*_text(400, "bad request\n"))
        method, target = parts[0], parts[1].decode("latin-1")
        if method not in (b"GET", b"HEAD"):
            return _response(*_text(405, "method not allowed\n"))
        route = self.routes.get(target.split("?", 1)[0])
        log.debug("GET %r", target)
        if route is None:
            result = _text(404, "not found\n")
        else:
            try:
                result = await self._loop.run_in_executor(self._workers, route)
            except Exception:
                log.exception("handler for %r failed", target)
                result = _text(500, "internal error\n")
        return _response(*result, head_only=method == b"HEAD")


def health_routes(registry: CollectorRegistry, not_ready: Callable[[], str | None]) -> dict[str, Route]:
    """``not_ready()`` says why cpx is not ready (None: ready)."""

    def healthz() -> tuple[int, str, bytes]:
        return 200, "text/plain", b"OK\n"

    def readyz() -> tuple[int, str, bytes]:
        reason = not_ready()
        if reason is None:
            return 200, "text/plain", b"OK\n"
        return 503, "text/plain", f"{reason}\n".encode()

    def metrics() -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(registry)

    return {"/healthz": healthz, "/health": healthz, "/readyz": readyz, "/metrics": metrics}
