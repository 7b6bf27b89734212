"""Upstream HTTPRoute308Redirect (conformance/tests/httproute-308-redirect.go, provisional).

RequestRedirect with ``statusCode: 308`` answers 308 (a GET request), keeping the path.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-308-redirect.yaml"


def test_httproute_308_redirect(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "308-redirect"))
    upstream.expect(
        SAME_NAMESPACE,
        Expect(
            method="GET",
            path="/permanent",
            status=(308,),
            redirect=Redirect(path="/permanent"),
            namespace=INFRA_NS,
        ),
    )
