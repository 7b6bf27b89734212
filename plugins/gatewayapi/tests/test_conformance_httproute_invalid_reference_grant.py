"""Upstream HTTPRouteInvalidReferenceGrant (conformance/tests/httproute-invalid-reference-grant.go).

Near-miss ReferenceGrants (one field wrong each) are ignored: ResolvedRefs=False
``RefNotPermitted`` and a 500.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-invalid-reference-grant.yaml"
ROUTE = (INFRA_NS, "reference-grant")


def test_httproute_invalid_reference_grant(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [ROUTE])
    upstream.wait_route_condition(*ROUTE, SAME_NAMESPACE, "ResolvedRefs", "False", "RefNotPermitted")
    upstream.expect(SAME_NAMESPACE, Expect(path="/", status=(500,)))
