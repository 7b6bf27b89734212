"""Upstream HTTPRouteHTTPSListener (conformance/tests/httproute-https-listener.go).

Routes on the HTTPS listeners of ``same-namespace-with-https-listener``: TLS with SNI = Host, a
route with hostnames and one without; an unknown host gets a 404 (Contour builds no filter chain
for a host without routes, so its handshake fails; the plugin gives the hostname-less HTTPS
listener a catch-all ``*`` host with its certificate instead).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import HTTPS_GATEWAY, INFRA_NS, INFRA_V1, INFRA_V2, Conformance, Expect

MANIFEST = "httproute-https-listener.yaml"


def test_httproute_https_listener(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(
        HTTPS_GATEWAY, (INFRA_NS, "httproute-https-test"), (INFRA_NS, "httproute-https-test-no-hostname")
    )
    upstream.expect_all(
        HTTPS_GATEWAY,
        [
            Expect(host="example.org", backend=INFRA_V1, namespace=INFRA_NS),
            Expect(host="unknown-example.org", status=(404,)),
            Expect(host="second-example.org", backend=INFRA_V2, namespace=INFRA_NS),
        ],
        port=443,
        scheme="https",
    )
