"""Upstream GatewayWithAttachedRoutes (conformance/tests/gateway-with-attached-routes.go).

``status.listeners[].attachedRoutes`` counts the routes Accepted on a listener: 1, then 2 (a route
whose hostname intersects no listener is ``NoMatchingListenerHostname`` and not counted), and a
listener with an unresolvable certificate still counts its route.  The same file's
GatewayWithAttachedRoutesWithPort8080: a route with a sectionName counts only on that listener.
"""

from __future__ import annotations

from pathlib import Path

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-with-attached-routes.yaml"
READY = [("Accepted", "True", ""), ("ResolvedRefs", "True", "")]


def test_one_attached_route(upstream: Conformance) -> None:
    upstream.wait_listener_statuses(
        INFRA_NS,
        "gateway-with-one-attached-route",
        [{"name": "http", "supportedKinds": ["HTTPRoute"], "conditions": READY, "attachedRoutes": 1}],
    )


def test_two_attached_routes(upstream: Conformance) -> None:
    gateway = (INFRA_NS, "gateway-with-two-attached-routes")
    upstream.wait_listener_statuses(
        *gateway,
        [{"name": "http", "supportedKinds": ["HTTPRoute"], "conditions": READY, "attachedRoutes": 2}],
    )
    upstream.wait_route_condition(
        INFRA_NS, "http-route-not-accepted", gateway, "Accepted", "False", "NoMatchingListenerHostname"
    )


def test_attached_routes_despite_unresolved_refs(upstream: Conformance) -> None:
    gateway = (INFRA_NS, "unresolved-gateway-with-one-attached-unresolved-route")
    unresolved = [("Programmed", "False", ""), ("ResolvedRefs", "False", "")]
    upstream.wait_listener_statuses(
        *gateway,
        [{"name": "tls", "supportedKinds": ["HTTPRoute"], "conditions": unresolved, "attachedRoutes": 1}],
    )
    upstream.wait_route_condition(INFRA_NS, "http-route-4", gateway, "ResolvedRefs", "False")


def test_attached_route_by_section_name_with_port_8080(conformance: Conformance) -> None:
    with conformance.applied(
        Path(__file__).parent / "manifests" / "gateway-with-attached-routes-with-port-8080.yaml"
    ):
        conformance.wait_listener_statuses(
            INFRA_NS,
            "gateway-with-two-listeners-and-one-attached-route",
            [
                {
                    "name": "http-unattached",
                    "supportedKinds": ["HTTPRoute"],
                    "conditions": READY,
                    "attachedRoutes": 0,
                },
                {"name": "http", "supportedKinds": ["HTTPRoute"], "conditions": READY, "attachedRoutes": 1},
            ],
        )
