"""TLSRoutes and TCPRoutes through the real ``cpx serve`` and a real Envoy, on a Gateway at its own
loopback address: TLS passthrough to a backend that terminates TLS itself (SNI routing), TLS
terminated by Envoy to a plain TCP echo, a TCP listener to a TCP echo, and an SNI nobody owns
refused."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from cpx.testing import (
    EchoServer,
    TCPEchoServer,
    backend,
    client_tls_context,
    eventually,
    issue_cert,
    make_tls_secret,
    request,
)

pytestmark = pytest.mark.e2e

ADDRESS = "127.0.0.78"
PASS_HOST, TERM_HOST = "abc.example.com", "tls.example.org"

GATEWAY = f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: contour}}
spec: {{controllerName: projectcontour.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress, value: "{ADDRESS}"}}]
  listeners:
  - {{name: pass, port: 443, protocol: TLS, hostname: "*.example.com", tls: {{mode: Passthrough}}}}
  - name: term
    port: 443
    protocol: TLS
    hostname: {TERM_HOST}
    tls: {{mode: Terminate, certificateRefs: [{{name: term-cert}}]}}
  - {{name: tcp, port: 9000, protocol: TCP}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: pass, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: pass}}]
  hostnames: [{PASS_HOST}]
  rules: [{{backendRefs: [{{name: tls-echo, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: term, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: term}}]
  hostnames: [{TERM_HOST}]
  rules: [{{backendRefs: [{{name: tcp-echo, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {{name: tcp, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: tcp}}]
  rules: [{{backendRefs: [{{name: tcp-echo, port: 80}}]}}]
"""


@pytest.fixture
def echoes() -> Iterator[tuple[EchoServer, TCPEchoServer]]:
    pair = issue_cert([PASS_HOST])
    tls_echo = EchoServer("tls-echo", tls=(pair.cert_pem, pair.key_pem)).start()
    tcp_echo = TCPEchoServer("tcp-echo").start()
    try:
        yield tls_echo, tcp_echo
    finally:
        tls_echo.stop()
        tcp_echo.stop()


def _echo(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    data = b""
    while len(data) < len(payload):
        chunk = sock.recv(1024)
        assert chunk, "connection closed"
        data += chunk
    return data


def test_tls_and_tcp_routes_through_envoy(
    cpx_envoy: Callable[..., Any], echoes: tuple[EchoServer, TCPEchoServer]
) -> None:
    tls_echo, tcp_echo = echoes
    term_secret, ca_pem = make_tls_secret("default", "term-cert", [TERM_HOST])
    objects = [*backend("tls-echo", tls_echo.port), *backend("tcp-echo", tcp_echo.port), term_secret]
    served = cpx_envoy(GATEWAY + "---\n" + yaml.safe_dump_all(objects), plugins=["gatewayapi"])

    # Passthrough: the backend terminates TLS itself (its own certificate) and sees the client's SNI.
    def passed() -> Any:
        response = request(f"https://{ADDRESS}:8443/hello", sni=PASS_HOST, ca_pem=ca_pem, timeout=2.0)
        assert response.status == 200
        return response

    response = eventually(passed, 20.0)
    assert response.headers["x-backend"] == "tls-echo"
    assert response.json()["tls"]["sni"] == PASS_HOST
    assert response.peer_dns_names() == [PASS_HOST]

    # Terminate: Envoy's certificate for the listener's hostname, then plain TCP to the echo.
    def terminated() -> tuple[bytes, Any]:
        context = client_tls_context(ca_pem, check_hostname=True)
        with context.wrap_socket(
            socket.create_connection((ADDRESS, 8443), timeout=5), server_hostname=TERM_HOST
        ) as conn:
            return _echo(conn, b"ping over tls"), conn.getpeercert()

    data, cert = eventually(terminated, 20.0)
    assert data == b"ping over tls"
    assert ("DNS", TERM_HOST) in cert["subjectAltName"]

    # TCP: listener port 9000 -> Envoy 17000, every connection to the TCP echo.
    def tcp() -> bytes:
        with socket.create_connection((ADDRESS, 17000), timeout=5) as conn:
            return _echo(conn, b"ping over tcp")

    assert eventually(tcp, 20.0) == b"ping over tcp"

    # An SNI no route owns: no filter chain, Envoy closes the connection.
    context = client_tls_context(ca_pem, check_hostname=False)
    with (
        pytest.raises((ssl.SSLError, ConnectionError, OSError)),
        context.wrap_socket(
            socket.create_connection((ADDRESS, 8443), timeout=5), server_hostname="nobody.example.net"
        ),
    ):
        pass
    assert served.rejected_updates() == 0
