"""Upstream HTTPRouteMethodMatching (conformance/tests/httproute-method-matching.go).

Method alone or with path and headers, ANDed within a match and ORed across matches; precedence
path > method > headers.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-method-matching.yaml"


def test_httproute_method_matching(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "method-matching"))

    def to(backend: str, method: str, path: str, version: str | None = None) -> Expect:
        headers = {"version": version} if version else {}
        return Expect(method=method, path=path, headers=headers, backend=backend, namespace=INFRA_NS)

    upstream.expect_all(
        SAME_NAMESPACE,
        [
            to(INFRA_V1, "POST", "/"),
            to(INFRA_V2, "GET", "/"),
            Expect(method="HEAD", path="/", status=(404,)),
            to(INFRA_V1, "GET", "/path1"),
            to(INFRA_V2, "PUT", "/", "one"),
            to(INFRA_V3, "POST", "/path2", "two"),
            to(INFRA_V1, "PATCH", "/path3"),
            to(INFRA_V1, "DELETE", "/path4", "three"),
            Expect(method="PUT", path="/", status=(404,)),
            Expect(method="DELETE", path="/path4", status=(404,)),
            to(INFRA_V1, "PATCH", "/path5"),
            to(INFRA_V2, "PATCH", "/", "four"),
        ],
    )
