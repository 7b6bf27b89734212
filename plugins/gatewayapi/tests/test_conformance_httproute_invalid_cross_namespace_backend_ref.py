"""Upstream HTTPRouteInvalidCrossNamespaceBackendRef
(conformance/tests/httproute-invalid-cross-namespace-backend-ref.go).

A backendRef to another namespace without a ReferenceGrant: ResolvedRefs=False
``RefNotPermitted``, requests get a 500.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-invalid-cross-namespace-backend-ref.yaml"
ROUTE = (INFRA_NS, "invalid-cross-namespace-backend-ref")


def test_httproute_invalid_cross_namespace_backend_ref(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [ROUTE])
    upstream.wait_route_condition(*ROUTE, SAME_NAMESPACE, "ResolvedRefs", "False", "RefNotPermitted")
    upstream.expect(SAME_NAMESPACE, Expect(path="/", status=(500,)))
