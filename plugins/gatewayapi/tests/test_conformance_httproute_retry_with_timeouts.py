"""Upstream HTTPRouteRetryWithTimeouts
(conformance/tests/httproute-retry-with-timeouts.go, experimental ``retry``).

``backendRequest: 200ms`` is a per-try timeout that is retried (failures delayed 300 ms: 2 then
success is 200, 3 is 504); ``request: 200ms`` bounds all tries together (one quick failure is
retried in time, four 100 ms failures are a 504).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance

MANIFEST = "httproute-retry-with-timeouts.yaml"
PER_TRY = "/retry/backend-request-timeout-200ms"
OVERALL = "/retry/request-timeout-200ms"


def test_httproute_retry_with_timeouts(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "retries-with-timeouts"))
    slow = {"responseCode": "500", "delayRetry": "300ms"}
    upstream.expect_retries(SAME_NAMESPACE, PER_TRY, {**slow, "succeedAfter": "2"}, (200,))
    upstream.expect_retries(SAME_NAMESPACE, PER_TRY, {**slow, "succeedAfter": "3"}, (504,))
    upstream.expect_retries(SAME_NAMESPACE, OVERALL, {"responseCode": "500", "succeedAfter": "1"}, (200,))
    upstream.expect_retries(
        SAME_NAMESPACE, OVERALL, {"responseCode": "500", "succeedAfter": "4", "delayRetry": "100ms"}, (504,)
    )
