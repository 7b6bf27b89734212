"""Upstream HTTPRouteMatching (conformance/tests/httproute-matching.go).

PathPrefix matches whole segments (``/v2example`` is not under ``/v2``) and a header match beats a
bare prefix.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-matching.yaml"


def test_httproute_matching(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "matching"))

    def to(backend: str, path: str, version: str | None = None) -> Expect:
        headers = {"Version": version} if version else {}
        return Expect(path=path, headers=headers, backend=backend, namespace=INFRA_NS)

    upstream.expect_all(
        SAME_NAMESPACE,
        [
            to(INFRA_V1, "/"),
            to(INFRA_V1, "/example"),
            to(INFRA_V1, "/", "one"),
            to(INFRA_V2, "/v2"),
            to(INFRA_V2, "/v2/example"),
            to(INFRA_V2, "/", "two"),
            to(INFRA_V2, "/v2/"),
            to(INFRA_V1, "/v2example"),
            to(INFRA_V1, "/foo/v2/example"),
        ],
    )
