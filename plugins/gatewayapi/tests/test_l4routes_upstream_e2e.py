"""The traffic of the upstream TLSRoute* and TCPRoute* conformance tests, through the real ``cpx serve``
and a real Envoy, on the vendored upstream manifests (``manifests/``).

As the suite would in a cluster: the base set and the test's YAML with ``{GATEWAY_CLASS_NAME}`` =
contour, each Gateway on its own loopback address (Envoy on listener port + 8000), the suite's TLS
Secrets (from the test CA), and the echo "pods" behind the Services: the echo-basic TCP server
(:mod:`cpx_gatewayapi.l4testing`) for ``tcp-*`` Services, an HTTPS echo for ``tls-backend*``.  The
checks are upstream's: ``conformance/utils/tcp`` (welcome, ``IS_TLS``, ``TEST`` names the pod and
the SNI it saw), ``conformance/utils/tls`` (HTTPS answered by the expected backend, an unknown SNI
refused), ``conformance/utils/weight`` (shares within 5 points).  The statuses each test waits for
are checked in ``test_l4routes_upstream.py``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml
from cpx.testing import (
    EchoServer,
    client_tls_context,
    default_ca,
    endpoint_slice,
    eventually,
    issue_cert,
    request,
)

from cpx_gatewayapi.l4testing import (
    INFRA_NS,
    PASSTHROUGH_HOST,
    TERMINATE_HOST,
    WELCOME,
    TCPEcho,
    newer_tcproute,
    upstream_docs,
)
from cpx_gatewayapi.listeners import envoy_port

pytestmark = pytest.mark.e2e

MANIFESTS = Path(__file__).parent / "manifests"
INFRA = INFRA_NS
FIRST_ADDRESS = 150  # 127.0.0.150 and up: away from the other e2e tests' Gateways


@attrs.define
class Upstream:
    """One upstream test's objects served by cpx and Envoy, with its echo pods."""

    served: Any
    docs: list[dict[str, Any]]  # what cpx serves (test.yaml)
    addresses: dict[str, str]
    ca_pem: str

    def address(self, gateway: str, port: int) -> tuple[str, int]:
        return self.addresses[gateway], envoy_port(port)

    def tcp_test(self, gateway: str, port: int, sni: str | None = None) -> dict[str, Any]:
        """Upstream's TCP exchange (TLS with ``sni``): the echo's ``TEST`` answer."""
        with self._connect(gateway, port, sni) as conn:
            stream = conn.makefile("rwb")
            assert stream.readline() == WELCOME
            stream.write(b"PING\nIS_TLS\nTEST\n")
            stream.flush()
            assert stream.readline() == b"PONG\n"
            is_tls = stream.readline().strip() == b"true"
            answer: dict[str, Any] = json.loads(stream.readline())
            assert answer["isTLS"] is is_tls
            return answer

    def expect_tcp(
        self,
        gateway: str,
        port: int,
        backend: str,
        *,
        sni: str | None = None,
        backend_tls: bool = False,
        namespace: str = INFRA,
    ) -> None:
        def answered() -> None:
            answer = self.tcp_test(gateway, port, sni)
            assert answer["pod"].startswith(f"{backend}-") and answer["namespace"] == namespace, answer
            assert answer["isTLS"] is backend_tls
            if backend_tls and sni is not None:
                assert answer["tls"]["serverName"] == sni

        _three_in_a_row(answered)

    def expect_refused(self, gateway: str, port: int, sni: str | None = None) -> None:
        def refused() -> None:
            try:
                with self._connect(gateway, port, sni) as conn:
                    data = conn.recv(1)
            except OSError:  # refused, reset, or a TLS handshake cut short (SSLError is one)
                return
            assert data == b"", "the connection was served"  # closed at once is refused too

        _three_in_a_row(refused)

    def https_backend(self, gateway: str, port: int, sni: str) -> str:
        address, envoy_port = self.address(gateway, port)
        response = request(f"https://{address}:{envoy_port}/", sni=sni, ca_pem=self.ca_pem, timeout=5.0)
        assert response.status == 200
        assert response.json()["tls"]["sni"] == sni
        return str(response.headers["x-backend"])

    @contextlib.contextmanager
    def _connect(self, gateway: str, port: int, sni: str | None) -> Iterator[socket.socket]:
        sock = socket.create_connection(self.address(gateway, port), timeout=5)
        if sni is not None:
            sock = client_tls_context(self.ca_pem, check_hostname=True).wrap_socket(sock, server_hostname=sni)
        with sock:
            yield sock


def _three_in_a_row(check: Callable[[], None]) -> None:
    """Upstream's eventual consistency: three consecutive passes."""

    def thrice() -> None:
        for _ in range(3):
            check()

    eventually(thrice, 20.0)


@pytest.fixture
def l4_served(cpx_envoy: Callable[..., Any]) -> Iterator[Callable[..., Upstream]]:
    stack = contextlib.ExitStack()
    pair = issue_cert([PASSTHROUGH_HOST])

    def serve(manifest: str, *extra: dict[str, Any]) -> Upstream:
        docs, addresses = upstream_docs(MANIFESTS, manifest, *extra, first_address=FIRST_ADDRESS)
        for doc in [d for d in docs if d["kind"] == "Service"]:
            docs += _echo_pods(stack, doc, (pair.cert_pem, pair.key_pem))
        served = cpx_envoy(yaml.safe_dump_all(docs), plugins=["gatewayapi"])
        return Upstream(served, docs, addresses, default_ca().cert_pem.decode())

    with stack:
        yield serve


def _echo_pods(
    stack: contextlib.ExitStack, service: Mapping[str, Any], tls: tuple[bytes, bytes]
) -> list[Any]:
    """Echo pods for a Service the L4 tests reach, and the EndpointSlice pointing at them."""
    name, namespace = service["metadata"]["name"], service["metadata"].get("namespace", "default")
    ports = service["spec"]["ports"]
    pod = f"{name}-7d9f8c6b5-x2x4q"  # a Deployment pod's name: the suite reads the backend from it
    if name.startswith("tcp-"):
        echo = TCPEcho(namespace, pod, tls=tls)
        stack.callback(echo.stop)
        targets = {3000: echo.port, 8443: echo.tls_port}
    elif name.startswith("tls-backend"):
        https = EchoServer(name, tls=tls).start()
        stack.callback(https.stop)
        targets = {8443: https.port}
    else:
        return []
    slice_ = endpoint_slice(name, 0, namespace=namespace)
    slice_["ports"] = [
        # An unnamed Service port has an unnamed slice port (no name at all: "" is no DNS label).
        {**({"name": p["name"]} if p.get("name") else {}), "port": targets[target], "protocol": "TCP"}
        for p in ports
        if (target := p.get("targetPort", p["port"])) in targets
    ]
    return [slice_]


# -- TLSRoute ----------------------------------------------------------------------------------------


def test_tlsroute_simple_same_namespace(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tlsroute-simple-same-namespace.yaml")
    up.expect_tcp("gateway-tlsroute", 443, "tcp-backend", sni=PASSTHROUGH_HOST, backend_tls=True)


def test_tlsroute_terminate_simple_same_namespace(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tlsroute-terminate-simple-same-namespace.yaml")
    up.expect_tcp("gateway-tlsroute-terminate", 8443, "tcp-backend", sni=TERMINATE_HOST)


def test_tlsroute_mixed_termination_same_namespace(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tlsroute-mixed-termination-same-namespace.yaml")
    gateway = "gateway-tlsroute-mixed-termination"
    up.expect_tcp(gateway, 8883, "tcp-backend", sni=TERMINATE_HOST)  # Envoy terminates, plain to :3000
    up.expect_tcp(gateway, 8883, "tcp-backend", sni=PASSTHROUGH_HOST, backend_tls=True)  # :8443 terminates


def test_tlsroute_hostname_intersection(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tlsroute-hostname-intersection.yaml")
    expected = {
        "gw-tlsroute-exact-hostname-x-1": {PASSTHROUGH_HOST: "tls-backend"},
        "gw-tlsroute-more-specific-wc-hostname-x-2": {
            PASSTHROUGH_HOST: "tls-backend",
            "other.example.com": "tls-backend-2",
        },
        "gw-tlsroute-less-specific-wc-hostname-x-3": {
            PASSTHROUGH_HOST: "tls-backend",
            "other.example.com": "tls-backend-2",
        },
        "gw-tlsroute-empty-hostname-x-4": {
            PASSTHROUGH_HOST: "tls-backend",
            "other.example.com": "tls-backend-2",
        },
    }
    for gateway, backends in expected.items():
        for sni, backend in backends.items():
            _three_in_a_row(_answered_by(up, gateway, sni, backend))
        up.expect_refused(gateway, 443, "non.matching.com")


def _answered_by(up: Upstream, gateway: str, sni: str, backend: str) -> Callable[[], None]:
    def check() -> None:
        # The backends' certificate names abc.example.com only: other names are not verified.
        found = (
            up.https_backend(gateway, 443, sni)
            if sni == PASSTHROUGH_HOST
            else _backend_unverified(up, gateway, sni)
        )
        assert found == backend

    return check


def _backend_unverified(up: Upstream, gateway: str, sni: str) -> str:
    """Which HTTPS echo answers ``sni`` (its certificate names another host: not verified)."""
    address, port = up.address(gateway, 443)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with context.wrap_socket(
        socket.create_connection((address, port), timeout=5), server_hostname=sni
    ) as conn:
        conn.sendall(f"GET / HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode().lower()
    return next(line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith("x-backend:"))


@pytest.mark.parametrize(
    ("manifest", "gateway"),
    [
        ("tlsroute-invalid-backendref-nonexistent.yaml", "gateway-tlsroute-invalid-backend-ref-nonexistent"),
        (
            "tlsroute-invalid-backendref-unknown-kind.yaml",
            "gateway-tlsroute-invalid-backend-ref-unknown-kind",
        ),
    ],
)
def test_tlsroute_invalid_backends_refuse_connections(
    l4_served: Callable[..., Upstream], manifest: str, gateway: str
) -> None:
    up = l4_served(manifest)
    up.expect_refused(gateway, 443, PASSTHROUGH_HOST)


# -- TCPRoute ----------------------------------------------------------------------------------------


def test_tcproute_multiple_routes_attachment(l4_served: Callable[..., Upstream]) -> None:
    gateway = "tcp-multi-route-attach-gateway"
    newer = newer_tcproute(gateway, "tcp-attach-backend-2")  # added once the older one is Accepted
    up = l4_served("tcproute-multiple-routes-attachment.yaml", newer)
    up.expect_tcp(gateway, 9310, "tcp-attach-backend-1")
    pods = Counter(up.tcp_test(gateway, 9310)["pod"].rsplit("-", 2)[0] for _ in range(20))
    assert pods == {"tcp-attach-backend-1": 20}  # never the newer route's backend


def test_tcproute_parentref_attach_all(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tcproute-parentref-attach-all.yaml")
    for port in (9310, 9311, 9312, 9313):
        up.expect_tcp("tcp-attach-all-gateway", port, "tcp-echo-attach-all")


def test_tcproute_parentref_port_and_section_name(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tcproute-parentref-port-and-section-name.yaml")
    for port, backend in ((9300, "tcp-echo-one"), (9301, "tcp-echo-two"), (9302, "tcp-echo-three")):
        up.expect_tcp("tcp-multi-listener-gateway", port, backend)


def test_tcproute_reference_grant(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tcproute-reference-grant.yaml")
    gateway = "tcp-reference-grant-gateway"
    # The backend lives in another namespace, which a ReferenceGrant there lets the route use.
    up.expect_tcp(gateway, 9320, "tcp-reference-grant-backend", namespace="gateway-conformance-web-backend")
    # The grant deleted: the reference is no longer permitted, connections are refused.
    up.served.apply([d for d in up.docs if d["kind"] != "ReferenceGrant"], name="test.yaml")
    up.expect_refused(gateway, 9320)


def test_tcproute_weighted_routing(l4_served: Callable[..., Upstream]) -> None:
    up = l4_served("tcproute-weighted-routing.yaml")
    gateway = "tcp-weighted-gateway"
    eventually(lambda: up.tcp_test(gateway, 9300), 20.0)
    expected = {"tcp-backend-v1": 0.7, "tcp-backend-v2": 0.3}

    def distributed() -> None:
        seen = Counter(up.tcp_test(gateway, 9300)["pod"].rsplit("-", 2)[0] for _ in range(500))
        assert set(seen) <= set(expected), seen  # weight 0 never answers
        for backend, share in expected.items():
            assert abs(seen[backend] / 500 - share) <= 0.05, seen

    eventually(distributed, 60.0)
