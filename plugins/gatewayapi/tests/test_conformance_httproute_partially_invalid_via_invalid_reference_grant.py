"""Upstream HTTPRoutePartiallyInvalidViaInvalidReferenceGrant
(conformance/tests/httproute-partially-invalid-via-invalid-reference-grant.go).

The grant covers app-backend-v1 only: the rule to v2 answers 500 (``RefNotPermitted``), the rule
to v1 still answers, and the route stays Accepted.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import APP_NS, APP_V1, INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-partially-invalid-via-invalid-reference-grant.yaml"
ROUTE = (INFRA_NS, "invalid-reference-grant")


def test_httproute_partially_invalid_via_invalid_reference_grant(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [ROUTE])
    upstream.wait_route_condition(*ROUTE, SAME_NAMESPACE, "ResolvedRefs", "False", "RefNotPermitted")
    upstream.expect(SAME_NAMESPACE, Expect(path="/v2", status=(500,)))
    upstream.expect(SAME_NAMESPACE, Expect(path="/", backend=APP_V1, namespace=APP_NS))
