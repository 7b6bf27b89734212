"""Upstream HTTPRouteRedirectPortAndScheme (conformance/tests/httproute-redirect-port-and-scheme.go).

The ``Location`` port of redirects on listeners 80, 8080 and 443 (HTTPS): an unset port follows
the scheme when one is given (80/443, left out) and else the listener's port; an explicit port is
kept unless it is the scheme's default.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import HTTPS_GATEWAY, INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-redirect-port-and-scheme.yaml"
GATEWAY_8080 = (INFRA_NS, "same-namespace-with-http-listener-on-8080")


def to(path: str, scheme: str, port: str = "", host: str = "") -> Expect:
    return Expect(
        host=host,
        path=path,
        status=(302,),
        redirect=Redirect(scheme=scheme, host="example.org", port=port),
        namespace=INFRA_NS,
    )


def test_httproute_redirect_port_and_scheme(upstream: Conformance) -> None:
    for gateway, route in (
        (SAME_NAMESPACE, "http-route-for-listener-on-port-80"),
        (GATEWAY_8080, "http-route-for-listener-on-port-8080"),
        (HTTPS_GATEWAY, "http-route-for-listener-on-port-443"),
    ):
        upstream.wait_routes_accepted(gateway, (INFRA_NS, route))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            to("/scheme-nil-and-port-nil", "http"),
            to("/scheme-nil-and-port-80", "http"),
            to("/scheme-nil-and-port-8080", "http", "8080"),
            to("/scheme-https-and-port-nil", "https"),
            to("/scheme-https-and-port-443", "https"),
            to("/scheme-https-and-port-8443", "https", "8443"),
        ],
    )
    upstream.expect_all(
        GATEWAY_8080,
        [
            to("/scheme-nil-and-port-nil", "http", "8080"),
            to("/scheme-nil-and-port-80", "http"),
            to("/scheme-https-and-port-nil", "https"),
        ],
        port=8080,
    )
    host = "example.org"
    upstream.expect_all(
        HTTPS_GATEWAY,
        [
            to("/scheme-nil-and-port-nil", "https", host=host),
            to("/scheme-nil-and-port-443", "https", host=host),
            to("/scheme-nil-and-port-8443", "https", "8443", host=host),
            to("/scheme-http-and-port-nil", "http", host=host),
            to("/scheme-http-and-port-80", "http", host=host),
            to("/scheme-http-and-port-8080", "http", "8080", host=host),
        ],
        port=443,
        scheme="https",
    )
