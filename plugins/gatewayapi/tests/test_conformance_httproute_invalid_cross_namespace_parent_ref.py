"""Upstream HTTPRouteInvalidCrossNamespaceParentRef
(conformance/tests/httproute-invalid-cross-namespace-parent-ref.go).

A route in gateway-conformance-web-backend names ``same-namespace``, whose listener admits only its
own namespace: Accepted=False ``NotAllowedByListeners``, and the Gateway counts no route.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import SAME_NAMESPACE, WEB_NS, Conformance

MANIFEST = "httproute-invalid-cross-namespace-parent-ref.yaml"
ROUTE = "invalid-cross-namespace-parent-ref"


def test_httproute_invalid_cross_namespace_parent_ref(upstream: Conformance) -> None:
    upstream.wait_route_condition(WEB_NS, ROUTE, SAME_NAMESPACE, "ResolvedRefs", "True", "ResolvedRefs")
    upstream.wait_route_condition(WEB_NS, ROUTE, SAME_NAMESPACE, "Accepted", "False", "NotAllowedByListeners")
    upstream.wait_no_accepted_parents(WEB_NS, ROUTE)
    upstream.wait_zero_routes(*SAME_NAMESPACE)
