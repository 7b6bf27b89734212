"""Upstream HTTPRouteRedirectPort (conformance/tests/httproute-redirect-port.go).

RequestRedirect to port 8083, alone or with a hostname or a status code.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-redirect-port.yaml"


def test_httproute_redirect_port(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "redirect-port"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/port", status=(302,), redirect=Redirect(port="8083")),
            Expect(path="/port-and-host", status=(302,), redirect=Redirect(host="example.org", port="8083")),
            Expect(path="/port-and-status", status=(301,), redirect=Redirect(port="8083")),
            Expect(
                path="/port-and-host-and-status",
                status=(302,),
                redirect=Redirect(port="8083", host="example.org"),
            ),
        ],
    )
