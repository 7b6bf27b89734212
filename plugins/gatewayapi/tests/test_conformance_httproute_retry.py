"""Upstream HTTPRouteRetry (conformance/tests/httproute-retry.go, experimental ``retry``).

Only the listed codes are retried, up to ``attempts``; when they run out the last backend code
comes back.  The echo's ``/retry/...`` endpoint fails ``succeedAfter`` times per uuid with
``responseCode`` (a fresh uuid per probe, 3 consistent probes).
"""

from __future__ import annotations

import pytest

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance

MANIFEST = "httproute-retry.yaml"
THREE_ON_500 = "/retry/code-500-attempts-3"
TWO_ON_ALL = "/retry/code-all-attempts-2"


@pytest.mark.parametrize(
    ("path", "code", "succeed_after", "status"),
    [
        (THREE_ON_500, 500, 2, 200),
        (THREE_ON_500, 500, 4, 500),
        (THREE_ON_500, 503, 2, 503),
        *((TWO_ON_ALL, code, 1, 200) for code in (500, 502, 503, 504)),
        *((TWO_ON_ALL, code, 3, code) for code in (500, 502, 503, 504)),
    ],
)
def test_httproute_retry(
    upstream: Conformance, path: str, code: int, succeed_after: int, status: int
) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "retries"))
    simulation = {"responseCode": str(code), "succeedAfter": str(succeed_after)}
    upstream.expect_retries(SAME_NAMESPACE, path, simulation, (status,))
