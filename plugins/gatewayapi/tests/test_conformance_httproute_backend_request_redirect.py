"""Upstream HTTPRouteBackendRequestRedirect (conformance/tests/httproute-backend-request-redirect.go).

RequestRedirect among a backendRef's filters: 302 with ReplaceFullPath or ReplacePrefixMatch.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-backend-request-redirect.yaml"


def test_httproute_backend_request_redirect(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "backend-request-redirect"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/full/original", status=(302,), redirect=Redirect(path="/redirected-full")),
            Expect(
                path="/prefix/original", status=(302,), redirect=Redirect(path="/redirected-prefix/original")
            ),
        ],
    )
