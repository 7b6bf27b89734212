"""Backends on loopback (``cpx run``'s demo and the end-to-end tests): HTTP/WebSocket and TCP echo servers.

Both run in threads of the test process (stdlib ``socketserver``), bind ``127.0.0.1`` on an
ephemeral port, and optionally speak TLS. Their ``stop()`` also cuts the connections Envoy keeps
pooled, so no handler thread outlives the test.

EchoServer endpoints (any method; the answer is JSON unless noted):

* any path: ``{"server", "method", "path", "query", "uri", "headers", "body"}`` plus ``"tls":
  {"sni", "client_subject"}`` in TLS mode; header names are lower-case; header ``x-backend: <name>``
* ``/slow?ms=N``: the same, after N milliseconds (route and idle timeout tests)
* ``/status/<code>``: answers with that status
* ``/flaky?key=K&fail=N``: the first N requests with key K answer 503, later ones 200 (retries)
* ``?response_header=Name:Value`` (repeatable) on any path: add that header to the answer
* a request with ``Upgrade: websocket`` on any path: a WebSocket that echoes every frame
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import socketserver
import ssl
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from websockets.server import ServerProtocol

_QUIET_ERRORS = (ConnectionError, TimeoutError, ssl.SSLError, OSError)


def load_pem_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``ctx.load_cert_chain`` from PEM bytes (it reads files only; they live for the call)."""
    with tempfile.TemporaryDirectory(prefix="cpx-tls-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        key.touch(0o600)
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)


def server_tls_context(cert_pem: bytes, key_pem: bytes, client_ca_pem: bytes | None = None) -> ssl.SSLContext:
    """A server-side SSLContext from PEM bytes; with ``client_ca_pem`` client certs are required."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_pem_chain(ctx, cert_pem, key_pem)
    if client_ca_pem is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=client_ca_pem.decode())
    ctx.set_alpn_protocols(["http/1.1"])
    ctx.sni_callback = _record_sni
    return ctx


def _record_sni(sock: ssl.SSLSocket | ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
    # Tests check which SNI Envoy sent upstream; keep it on the connection for the handler.
    with contextlib.suppress(AttributeError):
        sock.cpx_sni = name  # type: ignore[union-attr]


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    # Envoy keeps upstream connections open: joining their threads on close would hang.
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, owner: _Backend, handler: type[socketserver.BaseRequestHandler]) -> None:
        self.owner = owner
        super().__init__((owner.host, owner.requested_port), handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        conn = request
        ctx = self.owner.ssl_context
        if ctx is not None:
            request.settimeout(10)
            try:
                conn = ctx.wrap_socket(request, server_side=True)
            except _QUIET_ERRORS:
                return
            conn.settimeout(None)
        self.owner.track(conn, add=True)
        try:
            self.RequestHandlerClass(conn, client_address, self)  # type: ignore[arg-type]
        finally:
            self.owner.track(conn, add=False)
            if conn is not request:
                conn.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up mid-request on purpose (timeouts, resets); only real bugs are printed.
        if not isinstance(sys.exc_info()[1], _QUIET_ERRORS):
            super().handle_error(request, client_address)


class _Backend:
    """Start/stop, context manager and connection tracking shared by both servers."""

    handler: type[socketserver.BaseRequestHandler]

    def __init__(
        self,
        name: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: tuple[bytes, bytes] | None = None,
        client_ca_pem: bytes | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.requested_port = port
        self.ssl_context = server_tls_context(*tls, client_ca_pem) if tls is not None else None
        self.stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> _Backend:
        self._server = _Server(self, self.handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"backend-{self.name}"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)

    def track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"backend {self.name} is not running")
        port: int = self._server.server_address[1]
        return port

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def __enter__(self) -> Any:
        return self.start() if self._server is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Envoy's upstream connection pool expects
    server_version = "cpx-echo"
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for Envoy's
    # delayed ACK of the headers (~40 ms a request on a reused connection).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _handle(self) -> None:
        echo: EchoServer = self.server.owner  # type: ignore[assignment]
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket(echo)
            return
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        body = self._read_body()
        info: dict[str, Any] = {
            "server": echo.name,
            "method": self.command,
            "path": url.path,
            "query": {key: values[-1] for key, values in query.items()},
            "uri": self.path,
            "headers": _headers(self.headers.items()),
            "body": body.decode(errors="replace"),
        }
        if isinstance(self.connection, ssl.SSLSocket):
            info["tls"] = {"sni": getattr(self.connection, "cpx_sni", None), "client_subject": self._peer()}
        echo.record(info)
        status = echo.status_for(url.path, query)
        self._answer(status, info, echo, query.get("response_header", []))

    def _peer(self) -> str | None:
        cert: Any = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        if not cert:
            return None
        return ",".join(f"{key}={value}" for rdn in cert.get("subject", ()) for key, value in rdn)

    def _answer(self, status: int, info: dict[str, Any], echo: EchoServer, extra: list[str]) -> None:
        payload = b"" if status in (204, 304) or self.command == "HEAD" else json.dumps(info).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("x-backend", echo.name)
        for header in extra:
            name, _, value = header.partition(":")
            self.send_header(name.strip(), value.strip())
        if status not in (204, 304):
            length = len(json.dumps(info).encode()) if self.command == "HEAD" else len(payload)
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(payload)

    def _websocket(self, echo: EchoServer) -> None:
        from websockets.http11 import Request  # noqa: PLC0415 (a test-only dependency)
        from websockets.protocol import State  # noqa: PLC0415
        from websockets.server import ServerProtocol  # noqa: PLC0415

        self.close_connection = True
        protocol = ServerProtocol()
        # http.server already consumed the handshake request: hand it to websockets again.
        raw = self.requestline.encode() + b"\r\n"
        raw += b"".join(f"{k}: {v}\r\n".encode() for k, v in self.headers.items()) + b"\r\n"
        protocol.receive_data(raw)
        request = protocol.events_received()[0]
        assert isinstance(request, Request)
        response = protocol.accept(request)
        response.headers["x-backend"] = echo.name
        protocol.send_response(response)
        echo.record({"server": echo.name, "method": "WEBSOCKET", "path": urlsplit(self.path).path})
        while protocol.state is not State.CLOSED:
            self._send_pending(protocol)
            if protocol.close_expected():
                break
            data = self.rfile.read1(65536)
            if data:
                protocol.receive_data(data)
            else:
                protocol.receive_eof()
            _echo_frames(protocol)
        self._send_pending(protocol)

    def _send_pending(self, protocol: ServerProtocol) -> None:
        for chunk in protocol.data_to_send():
            if chunk:
                self.wfile.write(chunk)


def _echo_frames(protocol: ServerProtocol) -> None:
    """Send back each data frame received (websockets answers pings and closes itself)."""
    from websockets.frames import Frame, Opcode  # noqa: PLC0415 (a test-only dependency)

    for frame in protocol.events_received():
        if not isinstance(frame, Frame):
            continue
        if frame.opcode is Opcode.TEXT:
            protocol.send_text(frame.data, fin=frame.fin)
        elif frame.opcode is Opcode.BINARY:
            protocol.send_binary(frame.data, fin=frame.fin)
        elif frame.opcode is Opcode.CONT:
            protocol.send_continuation(frame.data, fin=frame.fin)


for _method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE"):
    setattr(_EchoHandler, f"do_{_method}", _EchoHandler._handle)


def _headers(items: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        out[key] = f"{out[key]},{value}" if key in out else value
    return out


class EchoServer(_Backend):
    """HTTP/1.1 (and WebSocket) echo backend; ``requests`` lists what it answered, in order."""

    handler = _EchoHandler

    def __init__(
        self,
        name: str = "echo",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: tuple[bytes, bytes] | None = None,
        client_ca_pem: bytes | None = None,
    ) -> None:
        super().__init__(name, host=host, port=port, tls=tls, client_ca_pem=client_ca_pem)
        self.requests: list[dict[str, Any]] = []
        self._flaky: collections.Counter[str] = collections.Counter()

    def __enter__(self) -> EchoServer:
        super().__enter__()
        return self

    def start(self) -> EchoServer:
        super().start()
        return self

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"

    def record(self, info: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(info)

    def status_for(self, path: str, query: dict[str, list[str]]) -> int:
        """The status of one request; also performs the /slow delay."""
        if path == "/slow":
            # Event.wait instead of sleep: stop() wakes the handler so it does not linger.
            self.stopping.wait(int(query.get("ms", ["1000"])[-1]) / 1000)
        elif path.startswith("/status/"):
            return int(path.rpartition("/")[2])
        elif path == "/flaky":
            key = query.get("key", [""])[-1]
            with self._lock:
                self._flaky[key] += 1
                count = self._flaky[key]
            return 503 if count <= int(query.get("fail", ["1"])[-1]) else 200
        return 200


class _TCPEchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class TCPEchoServer(_Backend):
    """Echoes every byte back (TCP proxy and TLS passthrough tests)."""

    handler = _TCPEchoHandler

    def __init__(
        self,
        name: str = "tcp-echo",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: tuple[bytes, bytes] | None = None,
    ) -> None:
        super().__init__(name, host=host, port=port, tls=tls)

    def __enter__(self) -> TCPEchoServer:
        super().__enter__()
        return self

    def start(self) -> TCPEchoServer:
        super().start()
        return self
