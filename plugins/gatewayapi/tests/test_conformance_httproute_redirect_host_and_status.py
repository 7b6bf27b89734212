"""Upstream HTTPRouteRedirectHostAndStatus (conformance/tests/httproute-redirect-host-and-status.go).

RequestRedirect to another hostname, with the default 302 or an explicit 301.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-redirect-host-and-status.yaml"


def test_httproute_redirect_host_and_status(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "redirect-host-and-status"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/hostname-redirect", status=(302,), redirect=Redirect(host="example.org")),
            Expect(path="/host-and-status", status=(301,), redirect=Redirect(host="example.org")),
        ],
    )
