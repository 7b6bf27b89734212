"""Upstream HTTPRouteRewriteHost (conformance/tests/httproute-rewrite-host.go).

URLRewrite ``hostname`` changes the Host the backend sees, also together with header edits.
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

MANIFEST = "httproute-rewrite-host.yaml"


def test_httproute_rewrite_host(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "rewrite-host"))
    host = "rewrite.example"
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(
                host=host, path="/one", expected_host="one.example.org", backend=INFRA_V1, namespace=INFRA_NS
            ),
            Expect(host=host, path="/two", expected_host="example.org", backend=INFRA_V2, namespace=INFRA_NS),
            Expect(
                host=host,
                path="/rewrite-host-and-modify-headers",
                headers=EDITS_SENT,
                expected_host="test.example.org",
                expected_headers=EDITS_SEEN,
                absent_headers=EDITS_REMOVED,
                backend=INFRA_V2,
                namespace=INFRA_NS,
            ),
        ],
    )
