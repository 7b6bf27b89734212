"""Upstream HTTPRouteRedirectPath (conformance/tests/httproute-redirect-path.go).

RequestRedirect path modifiers ReplacePrefixMatch and ReplaceFullPath, alone or with a hostname
or a status code.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect, Redirect

MANIFEST = "httproute-redirect-path.yaml"


def test_httproute_redirect_path(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "redirect-path"))
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            Expect(
                path="/original-prefix/lemon",
                status=(302,),
                redirect=Redirect(path="/replacement-prefix/lemon"),
            ),
            Expect(
                path="/full/path/original", status=(302,), redirect=Redirect(path="/full-path-replacement")
            ),
            Expect(
                path="/path-and-host",
                status=(302,),
                redirect=Redirect(host="example.org", path="/replacement-prefix"),
            ),
            Expect(path="/path-and-status", status=(301,), redirect=Redirect(path="/replacement-prefix")),
            Expect(
                path="/full-path-and-host",
                status=(302,),
                redirect=Redirect(host="example.org", path="/replacement-full"),
            ),
            Expect(path="/full-path-and-status", status=(301,), redirect=Redirect(path="/replacement-full")),
        ],
    )
