"""The health/metrics/debug HTTP server: its routes, and what an idle or abusive client can hold."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from cpx.ops.httpserver import HTTPLimits, HTTPService, health_routes


def get(service: HTTPService, path: str, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=5)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture
def service() -> Iterator[HTTPService]:
    registry = CollectorRegistry()
    Counter("cpx_test", "a test counter", registry=registry).inc()
    ready = threading.Event()

    def ready_now() -> tuple[int, str, bytes]:
        ready.set()
        return 204, "text/plain", b""

    def boom() -> tuple[int, str, bytes]:
        raise RuntimeError("a bug in a route")

    routes = health_routes(registry, lambda: None if ready.is_set() else "not yet")
    routes.update({"/ready-now": ready_now, "/boom": boom})
    limits = HTTPLimits(head_timeout=1.0, max_connections=8)
    started = HTTPService("127.0.0.1", 0, routes, limits).start()
    yield started
    started.stop()


def test_routes(service: HTTPService) -> None:
    assert get(service, "/healthz") == (200, b"OK\n")
    assert get(service, "/readyz") == (503, b"not yet\n")
    assert get(service, "/ready-now")[0] == 204
    assert get(service, "/readyz?verbose=1") == (200, b"OK\n")
    status, body = get(service, "/metrics")
    assert status == 200 and b"cpx_test_total 1.0" in body
    assert get(service, "/nope") == (404, b"not found\n")
    assert get(service, "/boom") == (500, b"internal error\n")
    assert get(service, "/healthz", "HEAD") == (200, b"")
    assert get(service, "/healthz", "POST")[0] == 405


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(1.0)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:  # closed with our unread request in its buffer
        return True


def _idle(service: HTTPService, count: int) -> list[socket.socket]:
    """Connections that send half a request and then nothing (slowloris)."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", service.port))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        sockets.append(sock)
    return sockets


def test_idle_half_sent_requests_neither_lock_out_probes_nor_add_threads(service: HTTPService) -> None:
    threads = threading.active_count()
    idle = _idle(service, 200)
    try:
        started = time.monotonic()
        assert get(service, "/healthz") == (200, b"OK\n")
        assert time.monotonic() - started < 1.0
        assert threading.active_count() <= threads + 2  # the route workers, never one per connection
        time.sleep(1.5)  # past the head timeout: every idle connection was closed by the server
        assert all(closed_by_server(sock) for sock in idle)
    finally:
        for sock in idle:
            sock.close()


def test_a_request_head_over_8_kib_is_dropped(service: HTTPService) -> None:
    with socket.create_connection(("127.0.0.1", service.port)) as sock:
        sock.settimeout(2.0)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"x" * 10_000 + b"\r\n\r\n")
        assert closed_by_server(sock)
    assert get(service, "/healthz")[0] == 200


def test_the_port_is_bound_at_construction() -> None:
    first = HTTPService("127.0.0.1", 0, {})
    try:
        with pytest.raises(OSError):
            HTTPService("127.0.0.1", first.port, {})
    finally:
        first.stop()
