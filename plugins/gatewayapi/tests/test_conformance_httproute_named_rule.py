"""Upstream HTTPRouteNamedRule (conformance/tests/httproute-named-rule.go, provisional).

Rules with and without ``name`` both route.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-named-rule.yaml"


def test_httproute_named_rule(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "http-named-rules"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [Expect(path="/named", namespace=INFRA_NS), Expect(path="/unnamed", namespace=INFRA_NS)],
    )
