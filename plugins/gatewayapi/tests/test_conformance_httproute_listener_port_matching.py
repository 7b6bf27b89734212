"""Upstream HTTPRouteListenerPortMatching (conformance/tests/httproute-listener-port-matching.go).

Listeners on ports 80, 8080 and 8090; routes attach by parentRef ``port`` (with or without
sectionName) and each port serves only its routes.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, Conformance, Expect

MANIFEST = "httproute-listener-port-matching.yaml"
GATEWAY = (INFRA_NS, "httproute-listener-port-matching")


def test_httproute_listener_port_matching(upstream: Conformance) -> None:
    for route, listener in (
        ("backend-v1", "listener-1"),
        ("backend-v2", "listener-2"),
        ("backend-v3", "listener-4"),
    ):
        upstream.wait_gateway_and_routes(GATEWAY, [(INFRA_NS, route)], section_names=[listener])
        upstream.wait_route_condition(INFRA_NS, route, GATEWAY, "ResolvedRefs", "True", "ResolvedRefs")
    for host, port, backend in (
        ("foo.com", 80, INFRA_V1),
        ("foo.com:8080", 8080, INFRA_V2),
        ("bar.com:8080", 8080, INFRA_V2),
        ("foo.com:8090", 8090, INFRA_V3),
        ("bar.com:8090", 8090, None),
    ):
        expect = (
            Expect(host=host, backend=backend, namespace=INFRA_NS)
            if backend
            else Expect(host=host, status=(404,))
        )
        upstream.expect(GATEWAY, expect, port=port)
