"""Upstream HTTPRouteRequestMirror (conformance/tests/httproute-request-mirror.go).

RequestMirror copies requests to infra-backend-v2 while infra-backend-v1 answers, also with header
edits.  Upstream reads the mirror pod's log for the uniquely tagged path; here the echo server
records what it saw.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import (
    EDITS_REMOVED,
    EDITS_SEEN,
    EDITS_SENT,
    INFRA_NS,
    INFRA_V1,
    INFRA_V2,
    SAME_NAMESPACE,
    Conformance,
    Expect,
)

MANIFEST = "httproute-request-mirror.yaml"
MIRRORS = [(INFRA_NS, INFRA_V2)]


def test_httproute_request_mirror(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [(INFRA_NS, "request-mirror")])
    upstream.expect_mirrored(
        SAME_NAMESPACE, Expect(path="/mirror", backend=INFRA_V1, namespace=INFRA_NS), MIRRORS
    )
    edited = Expect(
        path="/mirror-and-modify-headers",
        headers=EDITS_SENT,
        expected_headers=EDITS_SEEN,
        absent_headers=EDITS_REMOVED,
        backend=INFRA_V1,
        namespace=INFRA_NS,
    )
    upstream.expect_mirrored(SAME_NAMESPACE, edited, MIRRORS)
