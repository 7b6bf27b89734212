"""Contour's default HTTP filters through a real Envoy: the gzip compressor (above Envoy's minimum
size, only for clients that accept it) and gRPC-Web to an h2c gRPC backend (grpcio)."""

from __future__ import annotations

import gzip
import struct
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest

from cpx.testing import Response, envoy_binary, http_get, request
from cpx.testing.cpxproc import backend, cpx_with_envoy, eventually, write_manifest

pytestmark = pytest.mark.e2e

BIG = b"compressible text " * 200  # far above Envoy's 30-byte minimum
SMALL = b"tiny"  # below it


class _TextHandler(BaseHTTPRequestHandler):
    """``/big`` and ``/small``: text/plain bodies of known sizes."""

    def do_GET(self) -> None:
        body = BIG if self.path == "/big" else SMALL
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _reverse(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request[::-1]


def _grpc_server() -> tuple[grpc.Server, int]:
    """An h2c gRPC server with one raw-bytes method, ``/test.Reverse/Call``."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler(
        "test.Reverse", {"Call": grpc.unary_unary_rpc_method_handler(_reverse)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def _proxy(name: str, fqdn: str, service: str, protocol: str | None = None) -> dict[str, Any]:
    upstream: dict[str, Any] = {"name": service, "port": 80}
    if protocol is not None:
        upstream["protocol"] = protocol
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"virtualhost": {"fqdn": fqdn}, "routes": [{"services": [upstream]}]},
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """cpx (default filters) and Envoy in front of the text server and the gRPC server; the
    Envoy HTTP port."""
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("default-filters")
    text = ThreadingHTTPServer(("127.0.0.1", 0), _TextHandler)
    threading.Thread(target=text.serve_forever, daemon=True).start()
    grpc_server, grpc_port = _grpc_server()
    objects = [
        *backend("text", text.server_address[1]),
        *backend("grpc", grpc_port),
        _proxy("text", "text.test", "text"),
        _proxy("grpc", "grpc.test", "grpc", protocol="h2c"),
    ]
    write_manifest(workdir / "manifests", "all.yaml", objects)
    try:
        with cpx_with_envoy(workdir / "manifests", workdir, plugins=["httpproxy"]) as (cpx, envoy):
            envoy.wait_ready()
            yield cpx.http_port
    finally:
        grpc_server.stop(None)
        text.shutdown()
        text.server_close()


def _get(port: int, path: str, accept: str | None) -> Response:
    headers = {"Accept-Encoding": accept} if accept else {}
    url = f"http://127.0.0.1:{port}{path}"

    def served() -> Response:
        response = http_get(url, host_header="text.test", headers=headers)
        assert response.status == 200, response
        return response

    return eventually(served, timeout=15)


def test_a_large_response_is_gzipped_for_a_client_that_accepts_it(served: int) -> None:
    response = _get(served, "/big", "gzip")
    assert response.headers.get("content-encoding") == "gzip"
    assert gzip.decompress(response.body) == BIG
    assert len(response.body) < len(BIG)


def test_no_compression_without_accept_encoding_or_below_the_minimum_size(served: int) -> None:
    plain = _get(served, "/big", None)
    assert "content-encoding" not in plain.headers and plain.body == BIG
    small = _get(served, "/small", "gzip")
    assert "content-encoding" not in small.headers and small.body == SMALL


def _grpc_web_frame(flags: int, payload: bytes) -> bytes:
    return struct.pack(">BI", flags, len(payload)) + payload


def _grpc_web_frames(body: bytes) -> list[tuple[int, bytes]]:
    frames = []
    while body:
        flags, length = struct.unpack(">BI", body[:5])
        frames.append((flags, body[5 : 5 + length]))
        body = body[5 + length :]
    return frames


def test_a_grpc_web_request_reaches_the_h2c_grpc_backend(served: int) -> None:
    def call() -> Response:
        response = request(
            f"http://127.0.0.1:{served}/test.Reverse/Call",
            method="POST",
            host_header="grpc.test",
            headers={"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"},
            body=_grpc_web_frame(0, b"hello grpc-web"),
        )
        assert response.status == 200, response
        return response

    response = eventually(call, timeout=15)
    assert response.headers["content-type"].startswith("application/grpc-web")
    frames = _grpc_web_frames(response.body)
    # The message, then the trailers as a frame of their own (flag 0x80): gRPC status OK.
    assert frames[0] == (0, b"bew-cprg olleh")
    trailer_flags, trailers = frames[-1]
    assert trailer_flags & 0x80 and b"grpc-status:0" in trailers.replace(b" ", b"")
