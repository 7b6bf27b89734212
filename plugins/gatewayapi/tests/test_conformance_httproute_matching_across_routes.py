"""Upstream HTTPRouteMatchingAcrossRoutes (conformance/tests/httproute-matching-across-routes.go).

Match precedence merged across two routes on one listener, each scoped by its own hostnames.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-matching-across-routes.yaml"


def test_httproute_matching_across_routes(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "matching-part1"), (INFRA_NS, "matching-part2"))

    def to(backend: str, host: str, path: str, version: str | None = None) -> Expect:
        headers = {"Version": version} if version else {}
        return Expect(host=host, path=path, headers=headers, backend=backend, namespace=INFRA_NS)

    upstream.expect_all(
        SAME_NAMESPACE,
        [
            to(INFRA_V1, "example.com", "/"),
            to(INFRA_V1, "example.com", "/example"),
            to(INFRA_V1, "example.net", "/example"),
            to(INFRA_V1, "example.com", "/example", "one"),
            to(INFRA_V2, "example.com", "/v2"),
            to(INFRA_V1, "example.net", "/v2"),
            to(INFRA_V2, "example.com", "/v2/example"),
            to(INFRA_V2, "example.com", "/", "two"),
        ],
    )
