"""A loopback ext_authz gRPC server (envoy.service.auth.v3, xds-protos stubs) for the end-to-end
tests: it allows, denies on ``x-deny``, adds ``x-auth-user`` to allowed requests, stalls on
``x-slow`` and records what each check carried (path, context extensions, body)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import attrs
import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.auth.v3 import external_auth_pb2, external_auth_pb2_grpc
from envoy.type.v3 import http_status_pb2
from google.rpc import code_pb2, status_pb2


@attrs.frozen
class Check:
    path: str
    context: dict[str, str]
    body: str
    headers: dict[str, str]


@attrs.define
class AuthServer(external_auth_pb2_grpc.AuthorizationServicer):  # type: ignore[misc]
    checks: list[Check] = attrs.field(factory=list)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        http = request.attributes.request.http
        seen = Check(
            path=http.path,
            context=dict(request.attributes.context_extensions),
            body=http.body,
            headers=dict(http.headers),
        )
        with self.lock:
            self.checks.append(seen)
        if "x-slow" in seen.headers:
            time.sleep(1.5)
        if "x-deny" in seen.headers:
            denied = external_auth_pb2.DeniedHttpResponse(
                status=http_status_pb2.HttpStatus(code=http_status_pb2.Forbidden), body="denied by test"
            )
            return external_auth_pb2.CheckResponse(
                status=status_pb2.Status(code=code_pb2.PERMISSION_DENIED), denied_response=denied
            )
        header = base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key="x-auth-user", value="alice"))
        return external_auth_pb2.CheckResponse(
            status=status_pb2.Status(code=code_pb2.OK),
            ok_response=external_auth_pb2.OkHttpResponse(headers=[header]),
        )

    def seen(self, path: str) -> list[Check]:
        with self.lock:
            return [check for check in self.checks if check.path == path]


@contextmanager
def auth_server(tls: tuple[bytes, bytes] | None = None) -> Iterator[tuple[AuthServer, int]]:
    """Serve :class:`AuthServer` on 127.0.0.1, over h2c or, given ``tls`` (certificate and key
    PEM), over TLS (h2); yields it and its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    servicer = AuthServer()
    external_auth_pb2_grpc.add_AuthorizationServicer_to_server(servicer, server)
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        credentials = grpc.ssl_server_credentials([(tls[1], tls[0])])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        yield servicer, port
    finally:
        server.stop(grace=None)
