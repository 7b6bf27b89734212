"""Upstream HTTPRouteQueryParamMatching (conformance/tests/httproute-query-param-matching.go).

Exact, case-sensitive query parameters, ANDed within a match and ORed across matches; extra
parameters are ignored; precedence path > headers > query params.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-query-param-matching.yaml"


def test_httproute_query_param_matching(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "query-param-matching"))

    def to(backend: str, path: str, version: str | None = None) -> Expect:
        headers = {"version": version} if version else {}
        return Expect(path=path, headers=headers, backend=backend, namespace=INFRA_NS)

    def missing(path: str) -> Expect:
        return Expect(path=path, status=(404,))

    upstream.expect_all(
        SAME_NAMESPACE,
        [
            to(INFRA_V1, "/?animal=whale"),
            to(INFRA_V2, "/?animal=dolphin"),
            to(INFRA_V3, "/?animal=dolphin&color=blue"),
            to(INFRA_V3, "/?ANIMAL=Whale"),
            to(INFRA_V1, "/?animal=whale&otherparam=irrelevant"),
            to(INFRA_V2, "/?animal=dolphin&color=yellow"),
            missing("/?color=blue"),
            missing("/?animal=dog"),
            missing("/?animal=whaledolphin"),
            missing("/"),
            to(INFRA_V1, "/path1?animal=whale"),
            to(INFRA_V2, "/?animal=whale", "one"),
            to(INFRA_V3, "/path2?animal=whale", "two"),
            to(INFRA_V1, "/path3?animal=shark"),
            to(INFRA_V1, "/path4?animal=kraken", "three"),
            missing("/?animal=shark"),
            missing("/path4?animal=kraken"),
            to(INFRA_V1, "/path5?animal=hydra"),
            to(INFRA_V3, "/?animal=hydra", "four"),
        ],
    )
