"""Test support for TLSRoutes and TCPRoutes without a cluster: the upstream conformance manifests as
the suite applies them (:func:`upstream_docs`), and the suite's TCP echo backend (:class:`TCPEcho`).

Upstream's ``echo-basic`` image in TCP mode (``gateway-api-conformance-images``
``echo-basic/tcpserver``) greets every connection with :data:`WELCOME`, then answers lines:
``PING`` -> ``PONG``, ``IS_TLS`` -> ``true``/``false``, ``TEST`` -> one JSON line with the pod's
context (namespace, pod, whether the connection is TLS and, if so, its SNI and version).  The
suite's TCPRoute and TLSRoute checks (``conformance/utils/tcp``) speak exactly that, so this server
does too: one plain port and, given a certificate, one TLS port.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

WELCOME = b"Gateway API Test TCP Server\n"
INFRA_NS = "gateway-conformance-infra"
CONTROLLER_NAME = "projectcontour.io/gateway-controller"
PASSTHROUGH_HOST = "abc.example.com"  # tls-passthrough-checks-certificate (the backends')
TERMINATE_HOST = "tls.example.com"  # tls-terminate-checks-certificate (Envoy's)


def upstream_docs(
    manifests: Path, name: str, *extra: Mapping[str, Any], first_address: int = 10
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The GatewayClass ``contour``, the base set, the suite's TLS Secrets (from the test CA), the
    test's YAML (``{GATEWAY_CLASS_NAME}`` substituted) and ``extra``; each Gateway on its own
    loopback address from ``127.0.0.<first_address>`` on.  Returns them and the addresses by
    Gateway name."""
    from cpx.testing import make_tls_secret  # noqa: PLC0415 (test material, loaded only here)

    from cpx_gatewayapi.testing.objects import gateway_class  # noqa: PLC0415 (likewise)

    secrets = [
        make_tls_secret(INFRA_NS, "tls-passthrough-checks-certificate", [PASSTHROUGH_HOST])[0],
        make_tls_secret(INFRA_NS, "tls-terminate-checks-certificate", [TERMINATE_HOST])[0],
    ]
    docs = [gateway_class(), *_load(manifests / "base.yaml"), *secrets, *_load(manifests / name)]
    docs += [dict(doc) for doc in extra]
    addresses: dict[str, str] = {}
    for doc in docs:
        if doc["kind"] == "Gateway":
            address = f"127.0.0.{first_address + len(addresses)}"
            doc["spec"]["addresses"] = [{"type": "IPAddress", "value": address}]
            addresses[doc["metadata"]["name"]] = address
    return docs, addresses


def _load(path: Path) -> list[dict[str, Any]]:
    text = path.read_text().replace("{GATEWAY_CLASS_NAME}", "contour")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def newer_tcproute(gateway: str, backend: str) -> dict[str, Any]:
    """The TCPRoute TCPRouteMultipleRoutesAttachment adds once the older one is Accepted."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "TCPRoute",
        "metadata": {
            "name": "tcproute-attach-newer",
            "namespace": INFRA_NS,
            "creationTimestamp": "2999-01-01T00:00:00Z",
        },
        "spec": {
            "parentRefs": [{"name": gateway, "sectionName": "tcp"}],
            "rules": [{"backendRefs": [{"name": backend, "port": 3000}]}],
        },
    }


class _Handler(socketserver.StreamRequestHandler):
    server: _Server
    timeout = 30  # seconds a connection may stay idle

    def handle(self) -> None:
        echo = self.server.echo
        tls: dict[str, str] | None = None
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.do_handshake()
            except (OSError, ssl.SSLError):
                return
            tls = {
                "version": _version(self.connection.version()),
                "serverName": getattr(self.connection, "sni", "") or "",
                "cipherSuite": (self.connection.cipher() or ("",))[0],
            }
        context: dict[str, Any] = {
            "namespace": echo.namespace,
            "pod": echo.pod,
            "isTLS": tls is not None,
            **({"tls": tls} if tls is not None else {}),
        }
        answers = {
            b"PING": b"PONG\n",
            b"IS_TLS": b"true\n" if tls is not None else b"false\n",
            b"TEST": json.dumps(context).encode() + b"\n",
        }
        with contextlib.suppress(OSError):
            self.wfile.write(WELCOME)
            for line in self.rfile:
                answer = answers.get(line.strip())
                if answer is not None:
                    self.wfile.write(answer)


def _version(name: str | None) -> str:
    return (name or "").replace("TLSv", "TLS ")  # Go's tls.VersionName: "TLS 1.3"


def _record_sni(sock: Any, name: str | None, _context: ssl.SSLContext) -> None:
    sock.sni = name  # the handler reports it as tls.serverName


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, echo: TCPEcho, context: ssl.SSLContext | None) -> None:
        self.echo, self.context = echo, context
        super().__init__((echo.host, 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.context is None:
            return sock, address
        # The handshake happens in the connection's thread, not the one accepting.
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that leaves mid-handshake is no error of the test


class TCPEcho:
    """One echo-basic TCP "pod": ``port`` (plain) and, with ``tls=(cert_pem, key_pem)``, ``tls_port``."""

    def __init__(
        self, namespace: str, pod: str, *, tls: tuple[bytes, bytes] | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.namespace, self.pod, self.host = namespace, pod, host
        self._servers = [_Server(self, None)]
        if tls is not None:
            self._servers.append(_Server(self, _tls_context(*tls)))
        for server in self._servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._servers[0].server_address[1])

    @property
    def tls_port(self) -> int:
        if len(self._servers) < 2:
            raise ValueError(f"{self.pod} has no TLS port")
        return int(self._servers[1].server_address[1])

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


def _tls_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    from cpx.testing import server_tls_context  # noqa: PLC0415 (test material, loaded only here)

    context = server_tls_context(cert_pem, key_pem)
    context.set_alpn_protocols([])
    context.sni_callback = _record_sni
    return context
