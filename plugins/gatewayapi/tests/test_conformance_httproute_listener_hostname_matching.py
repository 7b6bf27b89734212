"""Upstream HTTPRouteListenerHostnameMatching (conformance/tests/httproute-listener-hostname-matching.go).

Listeners ``bar.com``, ``foo.bar.com``, ``*.bar.com`` and ``*.foo.com`` on one port: the exact
listener beats the wildcard one, a wildcard spans several labels, anything else is a 404.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, Conformance, Expect

MANIFEST = "httproute-listener-hostname-matching.yaml"
GATEWAY = (INFRA_NS, "httproute-listener-hostname-matching")


def test_httproute_listener_hostname_matching(upstream: Conformance) -> None:
    for route, sections in (
        ("backend-v1", ["listener-1"]),
        ("backend-v2", ["listener-2"]),
        ("backend-v3", ["listener-3", "listener-4"]),
    ):
        upstream.wait_gateway_and_routes(GATEWAY, [(INFRA_NS, route)], section_names=sections)
        upstream.wait_route_condition(INFRA_NS, route, GATEWAY, "ResolvedRefs", "True", "ResolvedRefs")

    def to(backend: str, host: str) -> Expect:
        return Expect(host=host, backend=backend, namespace=INFRA_NS)

    upstream.expect_all(
        GATEWAY,
        [
            to(INFRA_V1, "bar.com"),
            to(INFRA_V2, "foo.bar.com"),
            to(INFRA_V3, "baz.bar.com"),
            to(INFRA_V3, "boo.bar.com"),
            to(INFRA_V3, "multiple.prefixes.bar.com"),
            to(INFRA_V3, "multiple.prefixes.foo.com"),
            Expect(host="foo.com", status=(404,)),
            Expect(host="no.matching.host", status=(404,)),
        ],
    )
