"""Upstream HTTPRouteRedirectScheme (conformance/tests/httproute-redirect-scheme.go).

RequestRedirect to https, alone or with a hostname or a status code; the Location then carries no
port (or 443).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-redirect-scheme.yaml"


def test_httproute_redirect_scheme(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "redirect-scheme"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(path="/scheme", status=(302,), redirect=Redirect(scheme="https")),
            Expect(
                path="/scheme-and-host", status=(302,), redirect=Redirect(scheme="https", host="example.org")
            ),
            Expect(path="/scheme-and-status", status=(301,), redirect=Redirect(scheme="https")),
            Expect(
                path="/scheme-and-host-and-status",
                status=(302,),
                redirect=Redirect(scheme="https", host="example.org"),
            ),
        ],
    )
