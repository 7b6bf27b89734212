"""Upstream HTTPRouteTimeoutBackendRequest (conformance/tests/httproute-timeout-backend-request.go).

``timeouts.backendRequest: 500ms``: a backend answering after 1 s gives a 504; ``0s`` disables it.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-timeout-backend-request.yaml"


def test_httproute_timeout_backend_request(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "backend-request-timeout"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/backend-timeout", namespace=INFRA_NS),
            Expect(path="/backend-timeout?delay=1s", status=(504,)),
            Expect(path="/disable-backend-timeout?delay=1s", namespace=INFRA_NS),
        ],
    )
