"""Upstream HTTPRouteRequestHeaderModifierBackendWeights
(conformance/tests/httproute-request-header-modifier-backend-weights.go).

Each weighted backendRef sets a ``Backend`` request header naming itself: over 100 requests, the
backend that answered is always the one named by the header it received.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-request-header-modifier-backend-weights.yaml"


def test_httproute_request_header_modifier_backend_weights(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "request-header-modifier-backend-weights"))
    expect = Expect(path="/", namespace=INFRA_NS)
    upstream.expect(SAME_NAMESPACE, expect)
    for _ in range(100):
        answer = upstream.request(SAME_NAMESPACE, expect)
        assert answer.status == 200 and answer.echo is not None, answer
        named = answer.echo["headers"].get("Backend", [])
        assert len(named) == 1, f"expected one Backend header, got {named}"
        assert answer.echo["pod"].startswith(named[0]), (
            f"{answer.echo['pod']} answered a request for {named[0]}"
        )
