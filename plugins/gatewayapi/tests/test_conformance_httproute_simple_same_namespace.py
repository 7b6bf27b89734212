"""Upstream HTTPRouteSimpleSameNamespace (conformance/tests/httproute-simple-same-namespace.go).

A single HTTPRoute in gateway-conformance-infra attaches to the Gateway of the same namespace and
sends ``/`` to infra-backend-v1.  Adapted: no cluster (see cpx_gatewayapi.testing).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-simple-same-namespace.yaml"


def test_httproute_simple_same_namespace(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "gateway-conformance-infra-test"))
    upstream.expect(SAME_NAMESPACE, Expect(path="/", backend=INFRA_V1, namespace=INFRA_NS))
