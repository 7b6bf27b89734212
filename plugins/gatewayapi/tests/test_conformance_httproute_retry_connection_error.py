"""Upstream HTTPRouteRetryConnectionError
(conformance/tests/httproute-retry-connection-error.go, experimental ``retry``).

A retry stanza without codes still retries connection errors (the echo resets the connection
``succeedAfter`` times): two resets then 200 with 3 attempts, four resets give a 500 or 503.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance

MANIFEST = "httproute-retry-connection-error.yaml"
PATH = "/retry/no-status-code-attempts-3"


def test_httproute_retry_connection_error(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "retries-connection-error"))
    upstream.expect_retries(SAME_NAMESPACE, PATH, {"succeedAfter": "2"}, (200,))
    upstream.expect_retries(SAME_NAMESPACE, PATH, {"succeedAfter": "4"}, (500, 503))
