"""Upstream HTTPRouteCrossNamespace (conformance/tests/httproute-cross-namespace.go).

A route in gateway-conformance-web-backend attaches to ``backend-namespaces``, whose listener
admits namespaces by label selector, and reaches web-backend.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import BACKEND_NAMESPACES, WEB_BACKEND, WEB_NS, Conformance, Expect

MANIFEST = "httproute-cross-namespace.yaml"


def test_httproute_cross_namespace(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(BACKEND_NAMESPACES, (WEB_NS, "cross-namespace"))
    upstream.expect(BACKEND_NAMESPACES, Expect(path="/", backend=WEB_BACKEND, namespace=WEB_NS))
