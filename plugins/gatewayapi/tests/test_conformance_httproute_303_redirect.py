"""Upstream HTTPRoute303Redirect (conformance/tests/httproute-303-redirect.go, provisional).

RequestRedirect with ``statusCode: 303`` answers 303 (a POST request), keeping the path.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-303-redirect.yaml"


def test_httproute_303_redirect(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "303-redirect"))
    upstream.expect(
        SAME_NAMESPACE,
        Expect(
            method="POST",
            path="/see-other",
            status=(303,),
            redirect=Redirect(path="/see-other"),
            namespace=INFRA_NS,
        ),
    )
