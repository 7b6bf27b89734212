"""Upstream HTTPRouteMultipleGateways (conformance/tests/httproute-multiple-gateways.go).

A route with two Gateway parents is served by both; each Gateway's dedicated route only by it.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import (
    ALL_NAMESPACES,
    INFRA_NS,
    INFRA_V1,
    INFRA_V2,
    INFRA_V3,
    SAME_NAMESPACE,
    Conformance,
    Expect,
)

MANIFEST = "httproute-multiple-gateways.yaml"
SHARED = (INFRA_NS, "multiple-gateways-shared-route")


def test_httproute_multiple_gateways(upstream: Conformance) -> None:
    for gateway, dedicated, backend in (
        (SAME_NAMESPACE, "same-namespace-dedicated-route", INFRA_V2),
        (ALL_NAMESPACES, "all-namespaces-dedicated-route", INFRA_V3),
    ):
        upstream.wait_gateway_and_routes(gateway, [SHARED, (INFRA_NS, dedicated)])
        upstream.expect(gateway, Expect(path="/shared", backend=INFRA_V1, namespace=INFRA_NS))
        upstream.expect(gateway, Expect(path="/", backend=backend, namespace=INFRA_NS))
