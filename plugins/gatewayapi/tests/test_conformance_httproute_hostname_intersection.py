"""Upstream HTTPRouteHostnameIntersection (conformance/tests/httproute-hostname-intersection.go).

Route hostnames intersected with listener hostnames (exact and wildcard on both sides, the Host's
port ignored); a route intersecting no listener is ``NoMatchingListenerHostname`` and not counted
in attachedRoutes; a listener without hostname takes the route's hostnames.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, Conformance, Expect

MANIFEST = "httproute-hostname-intersection.yaml"
GATEWAY = (INFRA_NS, "httproute-hostname-intersection")
GATEWAY_ALL = (INFRA_NS, "httproute-hostname-intersection-all")


def to(backend: str, host: str, path: str) -> Expect:
    return Expect(host=host, path=path, backend=backend, namespace=INFRA_NS)


def missing(host: str, path: str) -> Expect:
    return Expect(host=host, path=path, status=(404,))


def test_routes_intersecting_listener_hostnames(upstream: Conformance) -> None:
    routes = [
        (INFRA_NS, "specific-host-matches-listener-specific-host"),
        (INFRA_NS, "specific-host-matches-listener-wildcard-host"),
        (INFRA_NS, "wildcard-host-matches-listener-specific-host"),
        (INFRA_NS, "wildcard-host-matches-listener-wildcard-host"),
    ]
    upstream.wait_routes_accepted(GATEWAY, *routes)
    upstream.expect_all(
        GATEWAY,
        [
            to(INFRA_V1, "very.specific.com", "/s1"),
            to(INFRA_V1, "very.specific.com:1234", "/s1"),
            missing("non.matching.com", "/s1"),
            missing("foo.nonmatchingwildcard.io", "/s1"),
            missing("foo.wildcard.io", "/s1"),
            missing("very.specific.com", "/non-matching-prefix"),
            to(INFRA_V2, "foo.wildcard.io", "/s2"),
            to(INFRA_V2, "bar.wildcard.io", "/s2"),
            to(INFRA_V2, "foo.bar.wildcard.io", "/s2"),
            missing("non.matching.com", "/s2"),
            missing("wildcard.io", "/s2"),
            missing("very.specific.com", "/s2"),
            missing("foo.wildcard.io", "/non-matching-prefix"),
            to(INFRA_V3, "very.specific.com", "/s3"),
            missing("non.matching.com", "/s3"),
            missing("foo.specific.com", "/s3"),
            missing("foo.wildcard.io", "/s3"),
            missing("very.specific.com", "/non-matching-prefix"),
            to(INFRA_V1, "foo.anotherwildcard.io", "/s4"),
            to(INFRA_V1, "bar.anotherwildcard.io", "/s4"),
            to(INFRA_V1, "foo.bar.anotherwildcard.io", "/s4"),
            missing("anotherwildcard.io", "/s4"),
            missing("foo.wildcard.io", "/s4"),
            missing("very.specific.com", "/s4"),
            missing("foo.anotherwildcard.io", "/non-matching-prefix"),
        ],
    )


def test_routes_not_intersecting_listener_hostnames(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(GATEWAY, [])
    upstream.wait_route_parents(
        INFRA_NS,
        "no-intersecting-hosts",
        [
            {
                "name": GATEWAY[1],
                "namespace": INFRA_NS,
                "conditions": [("Accepted", "False", "NoMatchingListenerHostname")],
            }
        ],
        namespace_required=True,
    )
    upstream.expect_all(GATEWAY, [missing("specific.but.wrong.com", "/s5"), missing("wildcard.io", "/s5")])


def test_only_accepted_routes_counted(upstream: Conformance) -> None:
    ready = [("Accepted", "True", ""), ("ResolvedRefs", "True", "")]
    upstream.wait_listener_statuses(
        *GATEWAY,
        [
            {"name": "listener-1", "supportedKinds": ["HTTPRoute"], "conditions": ready, "attachedRoutes": 2},
            {"name": "listener-2", "supportedKinds": ["HTTPRoute"], "conditions": ready, "attachedRoutes": 1},
            {"name": "listener-3", "supportedKinds": ["HTTPRoute"], "conditions": ready, "attachedRoutes": 1},
        ],
    )


def test_routes_on_listener_without_hostname(upstream: Conformance) -> None:
    route = (INFRA_NS, "httproute-hostname-intersection-all")
    upstream.wait_routes_accepted(GATEWAY_ALL, route)
    upstream.expect_all(
        GATEWAY_ALL,
        [
            to(INFRA_V2, "first.com", "/"),
            to(INFRA_V2, "sub.first.com", "/"),
            to(INFRA_V2, "second.com", "/"),
            to(INFRA_V2, "sub.second.com", "/"),
            missing("third.com", "/"),
            missing("sub.third.com", "/"),
        ],
    )
