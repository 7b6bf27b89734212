"""Upstream HTTPRouteDisallowedKind (conformance/tests/httproute-disallowed-kind.go).

An HTTPRoute on a Gateway whose listener admits only TLSRoutes: Accepted=False
``NotAllowedByListeners``, no route attached.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "httproute-disallowed-kind.yaml"
ROUTE = "disallowed-kind"
GATEWAY = (INFRA_NS, "tlsroutes-only")


def test_httproute_disallowed_kind(upstream: Conformance) -> None:
    upstream.wait_route_condition(INFRA_NS, ROUTE, GATEWAY, "ResolvedRefs", "True", "ResolvedRefs")
    upstream.wait_route_condition(INFRA_NS, ROUTE, GATEWAY, "Accepted", "False", "NotAllowedByListeners")
    upstream.wait_no_accepted_parents(INFRA_NS, ROUTE)
    upstream.wait_zero_routes(*GATEWAY)
