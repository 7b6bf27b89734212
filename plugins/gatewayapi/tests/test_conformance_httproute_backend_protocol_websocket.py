"""Upstream HTTPRouteBackendProtocolWebSocket (conformance/tests/httproute-backend-protocol-websocket.go).

A backendRef to a Service port with appProtocol ``kubernetes.io/ws``: a WebSocket through the
Gateway echoes a text and a binary frame.  Adapted: that port's endpoint is cpx's WebSocket echo
server (echo-basic serves both on one port).
"""

from __future__ import annotations

from websockets.sync.client import connect
from websockets.typing import Origin

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, await_convergence, envoy_port

MANIFEST = "httproute-backend-protocol-websocket.yaml"


def test_httproute_backend_protocol_websocket(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [(INFRA_NS, "backend-protocol-ws")])
    url = f"ws://{upstream.addresses[SAME_NAMESPACE]}:{envoy_port(80)}/ws"

    def echoed() -> str | None:
        try:
            with connect(url, origin=Origin("ws://gateway/test"), open_timeout=5.0) as ws:
                ws.send("Websocket Support!")
                text = ws.recv(timeout=5)
                ws.send(bytes([1, 2, 3, 4, 5, 6, 7]))
                binary = ws.recv(timeout=5)
        except (OSError, TimeoutError, ValueError) as err:
            return f"websocket failed: {err!r}"
        if text != "Websocket Support!" or binary != bytes([1, 2, 3, 4, 5, 6, 7]):
            return f"echoed {text!r} and {binary!r}"
        return None

    await_convergence(echoed, "WebSocket echo through the Gateway", None)
