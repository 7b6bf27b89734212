"""Upstream HTTPRouteInvalidParentRefNotMatchingListenerPort
(conformance/tests/httproute-invalid-parentref-not-matching-listener-port.go).

A parentRef ``port`` no listener has: Accepted=False ``NoMatchingParent``, no route attached.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance

MANIFEST = "httproute-invalid-parentref-not-matching-listener-port.yaml"
ROUTE = "httproute-listener-not-matching-route-port"


def test_httproute_invalid_parentref_not_matching_listener_port(upstream: Conformance) -> None:
    upstream.wait_route_condition(INFRA_NS, ROUTE, SAME_NAMESPACE, "ResolvedRefs", "True", "ResolvedRefs")
    upstream.wait_route_condition(INFRA_NS, ROUTE, SAME_NAMESPACE, "Accepted", "False", "NoMatchingParent")
    upstream.wait_no_accepted_parents(INFRA_NS, ROUTE)
    upstream.wait_zero_routes(*SAME_NAMESPACE)
