"""Upstream HTTPRouteExactPathMatching (conformance/tests/httproute-exact-path-matching.go).

Exact matches ``/one`` and ``/two`` only: a longer path, a trailing slash or another case is a 404.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-exact-path-matching.yaml"


def test_httproute_exact_path_matching(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "exact-matching"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/one", backend=INFRA_V1, namespace=INFRA_NS),
            Expect(path="/two", backend=INFRA_V2, namespace=INFRA_NS),
            Expect(path="/", status=(404,)),
            Expect(path="/one/example", status=(404,)),
            Expect(path="/two/", status=(404,)),
            Expect(path="/Two", status=(404,)),
        ],
    )
