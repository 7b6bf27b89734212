"""Upstream GatewayListenerUnsupportedProtocol
(conformance/tests/gateway-invalid-listeners-unsupported-protocol.go).

A listener of an unknown protocol is Accepted=False ``UnsupportedProtocol`` with no supportedKinds;
the Gateway is Accepted=False ``ListenersNotValid`` when no listener is valid, True (same reason)
when some are.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-invalid-listeners-unsupported-protocol.yaml"
UNSUPPORTED = {
    "name": "invalid",
    "supportedKinds": [],
    "conditions": [("Accepted", "False", "UnsupportedProtocol")],
    "attachedRoutes": 0,
}


def test_only_unsupported_protocols(upstream: Conformance) -> None:
    name = "gateway-only-unsupported-protocols"
    upstream.wait_gateway_condition(INFRA_NS, name, "Accepted", "False", "ListenersNotValid")
    upstream.wait_listener_statuses(INFRA_NS, name, [UNSUPPORTED])


def test_supported_and_unsupported_protocols(upstream: Conformance) -> None:
    name = "gateway-supported-and-unsupported-protocols"
    upstream.wait_gateway_condition(INFRA_NS, name, "Accepted", "True", "ListenersNotValid")
    http = {
        "name": "http",
        "supportedKinds": ["HTTPRoute"],
        "conditions": [("Accepted", "True", "Accepted")],
        "attachedRoutes": 0,
    }
    upstream.wait_listener_statuses(INFRA_NS, name, [http, UNSUPPORTED])
