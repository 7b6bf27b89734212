"""Upstream HTTPRouteInvalidNonExistentBackendRef
(conformance/tests/httproute-invalid-nonexistent-backendref.go).

A backendRef to a missing Service: the route stays Accepted with ResolvedRefs=False
``BackendNotFound``, and its requests get a 500.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-invalid-nonexistent-backendref.yaml"
ROUTE = (INFRA_NS, "invalid-nonexistent-backend-ref")


def test_httproute_invalid_nonexistent_backendref(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [ROUTE])
    upstream.wait_route_condition(*ROUTE, SAME_NAMESPACE, "ResolvedRefs", "False", "BackendNotFound")
    upstream.expect(SAME_NAMESPACE, Expect(path="/", status=(500,)))
