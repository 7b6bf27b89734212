"""Upstream HTTPRouteReferenceGrant (conformance/tests/httproute-reference-grant.go).

A ReferenceGrant lets the route reach web-backend in another namespace; deleting the grant turns
the answers into 500s.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, WEB_BACKEND, WEB_NS, Conformance, Expect

MANIFEST = "httproute-reference-grant.yaml"
ROUTE = (INFRA_NS, "reference-grant")


def test_httproute_reference_grant(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, ROUTE)
    upstream.expect(SAME_NAMESPACE, Expect(path="/", backend=WEB_BACKEND, namespace=WEB_NS))
    upstream.delete("ReferenceGrant", WEB_NS, "reference-grant")
    upstream.expect(SAME_NAMESPACE, Expect(path="/", status=(500,)))
