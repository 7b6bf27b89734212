"""Upstream HTTPRouteInvalidBackendRefUnknownKind
(conformance/tests/httproute-invalid-backendref-unknown-kind.go).

A backendRef of an unknown kind: the route stays Accepted with ResolvedRefs=False ``InvalidKind``,
and its requests get a 500.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-invalid-backendref-unknown-kind.yaml"
ROUTE = (INFRA_NS, "invalid-backend-ref-unknown-kind")


def test_httproute_invalid_backendref_unknown_kind(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [ROUTE])
    upstream.wait_route_condition(*ROUTE, SAME_NAMESPACE, "ResolvedRefs", "False", "InvalidKind")
    upstream.expect(SAME_NAMESPACE, Expect(path="/v2", status=(500,)))
