"""Upstream HTTPRouteNoBackendRefs (conformance/tests/httproute-omitted-backendrefs.go).

Rules with omitted or empty backendRefs answer 500; the sibling rule with a backend answers.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-omitted-backendrefs.yaml"


def test_httproute_no_backendrefs(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "omitted-backendrefs"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/forward", backend=INFRA_V1, namespace=INFRA_NS),
            Expect(path="/omitted-no-forward", status=(500,)),
            Expect(path="/empty-no-forward", status=(500,)),
        ],
    )
