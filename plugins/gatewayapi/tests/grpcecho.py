"""A loopback gRPC echo service for the GRPCRoute end-to-end tests, without protobuf.

Each method of the services served (``Echo``, ``EchoTwo``, ``EchoThree``, the conformance echo's)
answers with a small JSON document of bytes: the server's pod name and namespace (what upstream's
echo-basic reports), the method's full path and the call's metadata, so a test sees which backend
served it and with what headers.  Requests are raw bytes (identity serializers): gRPC does not
care what the payload is.
"""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc

SERVICES = ("echo.Echo", "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho")
METHODS = ("Echo", "EchoTwo", "EchoThree")


def _answer(pod: str, namespace: str, method: str) -> Any:
    def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
        metadata: dict[str, list[str]] = {}
        for key, value in context.invocation_metadata():
            if isinstance(value, str):
                metadata.setdefault(key, []).append(value)
        answer = {"pod": pod, "namespace": namespace, "method": method, "metadata": metadata}
        return json.dumps(answer).encode()

    return grpc.unary_unary_rpc_method_handler(unary)


@contextmanager
def grpc_echo(pod: str, namespace: str = "default", services: Sequence[str] = SERVICES) -> Iterator[int]:
    """Serve the echo ``services`` as ``pod`` of ``namespace`` on 127.0.0.1; yields its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        tuple(
            grpc.method_handlers_generic_handler(
                service, {method: _answer(pod, namespace, f"/{service}/{method}") for method in METHODS}
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
    target: str,
    method: str,
    authority: str | None = None,
    metadata: Sequence[tuple[str, str]] = (),
    timeout: float = 2.0,
) -> dict[str, Any]:
    """One unary call of ``method`` (``/<service>/<method>``) through ``target``; its JSON answer.
    grpc.RpcError (with the status code) when the call fails."""
    options = [("grpc.default_authority", authority)] if authority else []
    with grpc.insecure_channel(target, options=options) as channel:
        return unary(channel, method, metadata, timeout)


def unary(
    channel: grpc.Channel, method: str, metadata: Sequence[tuple[str, str]] = (), timeout: float = 2.0
) -> dict[str, Any]:
    answer = channel.unary_unary(method)(b"ping", timeout=timeout, metadata=tuple(metadata))
    return dict(json.loads(answer))


def free_loopback(port: int) -> str:
    """A random 127.x.y.z where nobody holds ``port``: concurrent test runs never meet there."""
    rng = random.SystemRandom()
    while True:
        address = f"127.{rng.randint(1, 254)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((address, port))
            except OSError:
                continue
        return address
