"""Upstream HTTPRouteHeaderMatching (conformance/tests/httproute-header-matching.go).

Exact header values with case-insensitive names; matches of one rule ANDed, rules ORed; the rule
with more header matches wins; anything else is a 404.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-header-matching.yaml"


def test_httproute_header_matching(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "header-matching"))

    def to(backend: str, **headers: str) -> Expect:
        return Expect(headers=_names(headers), backend=backend, namespace=INFRA_NS)

    def missing(**headers: str) -> Expect:
        return Expect(headers=_names(headers), status=(404,))

    upstream.expect_all(
        SAME_NAMESPACE,
        [
            to(INFRA_V1, Version="one"),
            to(INFRA_V2, Version="two"),
            to(INFRA_V1, Version="two", Color="orange"),
            to(INFRA_V2, Version="two", Color="blue"),
            missing(Color="orange"),
            missing(Some_Other_Header="one"),
            to(INFRA_V1, Color="blue"),
            to(INFRA_V1, Color="green"),
            to(INFRA_V2, Color="red"),
            to(INFRA_V2, Color="yellow"),
            missing(Color="purple"),
        ],
    )


def _names(headers: dict[str, str]) -> dict[str, str]:
    return {name.replace("_", "-"): value for name, value in headers.items()}
