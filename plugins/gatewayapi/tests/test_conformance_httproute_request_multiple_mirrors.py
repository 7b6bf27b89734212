"""Upstream HTTPRouteRequestMultipleMirrors (conformance/tests/httproute-request-multiple-mirrors.go).

Two RequestMirror filters copy requests to infra-backend-v2 and v3 while infra-backend-v1 answers,
also with header edits; each mirror must see each (uniquely tagged) request.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import (
    EDITS_REMOVED,
    EDITS_SEEN,
    EDITS_SENT,
    INFRA_NS,
    INFRA_V1,
    INFRA_V2,
    INFRA_V3,
    SAME_NAMESPACE,
    Conformance,
    Expect,
)

MANIFEST = "httproute-request-multiple-mirrors.yaml"
MIRRORS = [(INFRA_NS, INFRA_V2), (INFRA_NS, INFRA_V3)]


def test_httproute_request_multiple_mirrors(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [(INFRA_NS, "request-multiple-mirrors")])
    upstream.expect_mirrored(
        SAME_NAMESPACE, Expect(path="/multi-mirror", backend=INFRA_V1, namespace=INFRA_NS), MIRRORS
    )
    edited = Expect(
        path="/multi-mirror-and-modify-request-headers",
        headers=EDITS_SENT,
        expected_headers=EDITS_SEEN,
        absent_headers=EDITS_REMOVED,
        backend=INFRA_V1,
        namespace=INFRA_NS,
    )
    upstream.expect_mirrored(SAME_NAMESPACE, edited, MIRRORS)
