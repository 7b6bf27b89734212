"""Upstream HTTPRouteInvalidParentRefNotMatchingSectionName
(conformance/tests/httproute-invalid-parentref-not-matching-section-name.go).

A parentRef whose sectionName names no listener: Accepted=False ``NoMatchingParent``, no route
attached.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance

MANIFEST = "httproute-invalid-parentref-not-matching-section-name.yaml"
ROUTE = "httproute-listener-not-matching-section-name"


def test_httproute_invalid_parentref_not_matching_section_name(upstream: Conformance) -> None:
    upstream.wait_route_condition(INFRA_NS, ROUTE, SAME_NAMESPACE, "Accepted", "False", "NoMatchingParent")
    upstream.wait_no_accepted_parents(INFRA_NS, ROUTE)
    upstream.wait_zero_routes(*SAME_NAMESPACE)
