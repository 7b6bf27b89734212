"""Upstream HTTPRoutePathMatchOrder (conformance/tests/httproute-path-match-order.go).

Exact before prefix, then the longest prefix wins.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-path-match-order.yaml"


def test_httproute_path_match_order(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "path-matching-order"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/match/exact/one", backend=INFRA_V3, namespace=INFRA_NS),
            Expect(path="/match/exact", backend=INFRA_V2, namespace=INFRA_NS),
            Expect(path="/match", backend=INFRA_V1, namespace=INFRA_NS),
            Expect(path="/match/prefix/one/any", backend=INFRA_V2, namespace=INFRA_NS),
            Expect(path="/match/prefix/any", backend=INFRA_V1, namespace=INFRA_NS),
            Expect(path="/match/any", backend=INFRA_V3, namespace=INFRA_NS),
        ],
    )
