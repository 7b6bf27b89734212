"""Upstream HTTPRouteInvalidParentRefSectionNameNotMatchingPort
(conformance/tests/httproute-invalid-parentref-section-name-not-matching-port.go).

A parentRef whose sectionName names the port-80 listener but whose ``port`` is 81: both must hold,
so Accepted=False ``NoMatchingParent`` and no route attached.  (Contour skips it: its Gateway name
is too long for a Kubernetes label; no such limit here.)
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "httproute-invalid-parentref-section-name-not-matching-port.yaml"
ROUTE = "httproute-listener-section-name-not-matching-port"
GATEWAY = (INFRA_NS, "gateway-with-one-not-matching-port-and-section-name-route")


def test_httproute_invalid_parentref_section_name_not_matching_port(upstream: Conformance) -> None:
    upstream.wait_route_condition(INFRA_NS, ROUTE, GATEWAY, "Accepted", "False", "NoMatchingParent")
    upstream.wait_no_accepted_parents(INFRA_NS, ROUTE)
    upstream.wait_zero_routes(*GATEWAY)
