"""Upstream HTTPRouteBackendProtocolH2C (conformance/tests/httproute-backend-protocol-h2c.go).

A backendRef to a Service port with appProtocol ``kubernetes.io/h2c``: an HTTP/2 request with prior
knowledge reaches the backend (over h2c upstream).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-backend-protocol-h2c.yaml"


def test_httproute_backend_protocol_h2c(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [(INFRA_NS, "backend-protocol-h2c")])
    upstream.expect(SAME_NAMESPACE, Expect(path="/", h2c=True, backend=INFRA_V1, namespace=INFRA_NS))
