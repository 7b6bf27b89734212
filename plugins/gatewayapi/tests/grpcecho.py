"""A loopback gRPC echo service for the GRPCRoute end-to-end tests, without protobuf.

Each method of the services served (``Echo``, ``EchoTwo``, ``EchoThree``, the conformance echo's)
answers with a small JSON document of bytes: the server's name, the
method's full path and the call's metadata, so a test sees which backend served it and with what
headers.  Requests are raw bytes (identity serializers): gRPC does not care what the payload is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc

SERVICES = ("echo.Echo", "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho")
METHODS = ("Echo", "EchoTwo", "EchoThree")


def _answer(name: str, method: str) -> Any:
    def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        return json.dumps({"backend": name, "method": method, "metadata": metadata}).encode()

    return grpc.unary_unary_rpc_method_handler(unary)


@contextmanager
def grpc_echo(name: str, services: Sequence[str] = SERVICES) -> Iterator[int]:
    """Serve the echo ``services`` as backend ``name`` on 127.0.0.1; yields its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        tuple(
            grpc.method_handlers_generic_handler(
                service, {method: _answer(name, f"/{service}/{method}") for method in METHODS}
            )
            for service in services
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(grace=None)


def call(
    target: str, method: str, authority: str, metadata: Sequence[tuple[str, str]] = (), timeout: float = 2.0
) -> dict[str, Any]:
    """One unary call of ``method`` (``/<service>/<method>``) through ``target``; its JSON answer.
    grpc.RpcError (with the status code) when the call fails."""
    options = [("grpc.default_authority", authority)]
    with grpc.insecure_channel(target, options=options) as channel:
        stub = channel.unary_unary(method)
        answer = stub(b"ping", timeout=timeout, metadata=tuple(metadata))
        return dict(json.loads(answer))
