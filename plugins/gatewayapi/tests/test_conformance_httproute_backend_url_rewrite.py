"""Upstream HTTPRouteBackendURLRewrite (conformance/tests/httproute-backend-url-rewrite.go).

URLRewrite among a backendRef's filters: ReplaceFullPath and ReplacePrefixMatch reach the backend.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-backend-url-rewrite.yaml"


def test_httproute_backend_url_rewrite(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "backend-url-rewrite"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(
                path="/full/original", expected_path="/rewritten-full", backend=INFRA_V1, namespace=INFRA_NS
            ),
            Expect(
                path="/prefix/original",
                expected_path="/rewritten-prefix/original",
                backend=INFRA_V1,
                namespace=INFRA_NS,
            ),
        ],
    )
