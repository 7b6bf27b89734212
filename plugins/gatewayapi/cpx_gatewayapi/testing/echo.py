"""Backends answering like upstream's ``echo-basic`` image (HTTP/1.1 and h2c)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import socketserver
import struct
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h2.config
import h2.connection
import h2.events

from cpx_gatewayapi.testing.base import ECHO_TARGET_PORT


def _duration(text: str) -> float:
    """Go's time.ParseDuration for what the suite sends (``1s``, ``500ms``, ``1m``)."""
    total = 0.0
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "us": 1e-6}
    for number, unit in re.findall(r"([0-9.]+)(ms|us|s|m|h)", text):
        total += float(number) * units[unit]
    return total


def _canonical(name: str) -> str:
    # Go's http.CanonicalHeaderKey: what echo-basic's JSON shows.
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


class _EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "echo-basic"
    disable_nagle_algorithm = True
    server: _EchoHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        echo = self.server.echo
        body_length = int(self.headers.get("Content-Length") or 0)
        if body_length:
            self.rfile.read(body_length)
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        headers: dict[str, list[str]] = {}
        for name, value in self.headers.items():
            if name.lower() != "host":
                headers.setdefault(_canonical(name), []).append(value)
        info = {
            "path": self.path,
            "host": self.headers.get("Host", ""),
            "method": self.command,
            "proto": self.request_version,
            "headers": headers,
            "namespace": echo.namespace,
            "ingress": "",
            "service": "",
            "pod": echo.pod,
            "httpPort": str(ECHO_TARGET_PORT),
        }
        echo.record(info)
        if url.path.startswith("/retry/") and echo.fails(self, query):
            return
        if "delay" in query:
            echo.stopping.wait(_duration(query["delay"][-1]))
        status = 200
        if url.path.startswith("/status/"):
            with contextlib.suppress(ValueError):
                status = int(url.path.rpartition("/")[2])
        payload = json.dumps(info).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Content-Type-Options", "nosniff")
        for item in self.headers.get("X-Echo-Set-Header", "").split(","):
            name, sep, value = item.partition(":")
            if sep and name.strip():
                self.send_header(name.strip(), value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


for _method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE"):
    setattr(_EchoHandler, f"do_{_method}", _EchoHandler._handle)


class _EchoHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # Envoy keeps upstream connections open

    def __init__(self, echo: EchoBackend) -> None:
        self.echo = echo
        super().__init__(("127.0.0.1", 0), _EchoHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # Envoy hangs up on timeouts and at the end: nothing to report


class EchoBackend:
    """An HTTP echo server answering like upstream's ``echo-basic`` image.

    JSON body ``{path (with query), host, method, proto, headers (canonical name -> values),
    namespace, pod, httpPort}``; ``X-Echo-Set-Header: Name:value,...`` becomes response headers;
    ``?delay=1s`` answers late; ``/status/NNN`` answers NNN.  A second port (:attr:`h2c_port`)
    answers HTTP/2 with prior knowledge.  ``requests`` keeps what it saw
    (upstream reads the mirror backend's log for that).
    """

    def __init__(self, namespace: str, pod: str) -> None:
        self.namespace = namespace
        self.pod = pod
        self.stopping = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self._attempts: dict[str, int] = {}  # /retry: requests seen per uuid
        self._lock = threading.Lock()
        self._server = _EchoHTTPServer(self)
        self._h2c = _H2CServer(self)
        for server in (self._server, self._h2c):
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"echo-{pod}", daemon=True
            )
            thread.start()

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def h2c_port(self) -> int:
        """Where it answers HTTP/2 with prior knowledge (echo-basic's port 3001)."""
        port: int = self._h2c.server_address[1]
        return port

    def record(self, info: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(info)

    def fails(self, handler: BaseHTTPRequestHandler, query: Mapping[str, list[str]]) -> bool:
        """echo-basic's ``/retry/...?uuid=U&succeedAfter=N[&responseCode=C][&delayRetry=D]``: the
        first N requests of U fail (after D) with status C, or with a TCP reset without C.  Returns
        whether this one failed (its answer is then already given)."""
        uuid_ = query.get("uuid", [""])[-1]
        with self._lock:
            self._attempts[uuid_] = self._attempts.get(uuid_, 0) + 1
            attempt = self._attempts[uuid_]
        if attempt > int(query.get("succeedAfter", ["0"])[-1]):
            return False
        if "delayRetry" in query:
            self.stopping.wait(_duration(query["delayRetry"][-1]))
        if "responseCode" in query:
            handler.send_response(int(query["responseCode"][-1]))
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        else:
            handler.close_connection = True
            # SO_LINGER 0: close() sends a reset, the connection error retries are about.
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return True

    def seen_paths(self) -> list[str]:
        with self._lock:
            return [str(info["path"]) for info in self.requests]

    def stop(self) -> None:
        self.stopping.set()
        for server in (self._server, self._h2c):
            server.shutdown()
            server.server_close()


class _H2CHandler(socketserver.BaseRequestHandler):
    """HTTP/2 with prior knowledge (h2c): echo-basic's answer on its h2c port."""

    server: _H2CServer

    def handle(self) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        self.request.sendall(conn.data_to_send())
        requests: dict[int, list[tuple[str, str]]] = {}
        while data := self.request.recv(65536):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    requests[event.stream_id] = [(_text(k), _text(v)) for k, v in event.headers or ()]
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    self._answer(conn, event.stream_id, requests.pop(event.stream_id, []))
            self.request.sendall(conn.data_to_send())

    def _answer(
        self, conn: h2.connection.H2Connection, stream_id: int, headers: list[tuple[str, str]]
    ) -> None:
        pseudo = {name: value for name, value in headers if name.startswith(":")}
        echo = self.server.echo
        info = {
            "path": pseudo.get(":path", ""),
            "host": pseudo.get(":authority", ""),
            "method": pseudo.get(":method", ""),
            "proto": "HTTP/2.0",
            "headers": {_canonical(k): [v] for k, v in headers if not k.startswith(":")},
            "namespace": echo.namespace,
            "pod": echo.pod,
        }
        echo.record(info)
        body = json.dumps(info).encode()
        conn.send_headers(
            stream_id,
            [(":status", "200"), ("content-type", "application/json"), ("content-length", str(len(body)))],
        )
        conn.send_data(stream_id, body, end_stream=True)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class _H2CServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, echo: EchoBackend) -> None:
        self.echo = echo
        super().__init__(("127.0.0.1", 0), _H2CHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass
