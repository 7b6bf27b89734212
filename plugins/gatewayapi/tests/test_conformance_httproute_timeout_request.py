"""Upstream HTTPRouteTimeoutRequest (conformance/tests/httproute-timeout-request.go).

``timeouts.request: 500ms``: a backend answering after 1 s gives a 504; ``0s`` disables the timeout.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-timeout-request.yaml"


def test_httproute_timeout_request(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "request-timeout"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/request-timeout", namespace=INFRA_NS),
            Expect(path="/request-timeout?delay=1s", status=(504,)),
            Expect(path="/disable-request-timeout?delay=1s", namespace=INFRA_NS),
        ],
    )
