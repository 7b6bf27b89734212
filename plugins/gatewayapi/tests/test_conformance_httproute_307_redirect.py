"""Upstream HTTPRoute307Redirect (conformance/tests/httproute-307-redirect.go, provisional).

RequestRedirect with ``statusCode: 307`` answers 307 (a GET request), keeping the path.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-307-redirect.yaml"


def test_httproute_307_redirect(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "307-redirect"))
    upstream.expect(
        SAME_NAMESPACE,
        Expect(
            method="GET",
            path="/temporary",
            status=(307,),
            redirect=Redirect(path="/temporary"),
            namespace=INFRA_NS,
        ),
    )
