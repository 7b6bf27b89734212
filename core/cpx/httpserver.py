"""Small HTTP endpoints: health, readiness and metrics; and a debug server for ``/debug/dag``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("cpx.http")

Route = Callable[[], tuple[int, str, bytes]]


class _Handler(BaseHTTPRequestHandler):
    routes: dict[str, Route] = {}

    def do_GET(self) -> None:
        route = self.routes.get(self.path.split("?", 1)[0])
        if route is None:
            status, ctype, body = 404, "text/plain", b"not found\n"
        else:
            try:
                status, ctype, body = route()
            except Exception:
                log.exception("handler for %s failed", self.path)
                status, ctype, body = 500, "text/plain", b"internal error\n"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class HTTPService:
    """A threaded HTTP server serving a fixed table of GET routes."""

    def __init__(self, address: str, port: int, routes: dict[str, Route]) -> None:
        handler = type("Handler", (_Handler,), {"routes": routes})
        self.server = ThreadingHTTPServer((address, port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name=f"http-{port}", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> HTTPService:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
