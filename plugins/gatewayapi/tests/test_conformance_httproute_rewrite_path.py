"""Upstream HTTPRouteRewritePath (conformance/tests/httproute-rewrite-path.go).

URLRewrite ReplacePrefixMatch (to a prefix, or to ``/`` which strips it) and ReplaceFullPath, also
together with header edits.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-rewrite-path.yaml"


def test_httproute_rewrite_path(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "rewrite-path"))
    sent = {"X-Header-Remove": "remove-val", "X-Header-Add-Append": "append-val-1", "X-Header-Set": "set-val"}
    seen = {
        "X-Header-Add": "header-val-1",
        "X-Header-Add-Append": "append-val-1,header-val-2",
        "X-Header-Set": "set-overwrites-values",
    }

    def rewritten(path: str, to: str, *, edits: bool = False) -> Expect:
        return Expect(
            path=path,
            expected_path=to,
            headers=sent if edits else {},
            expected_headers=seen if edits else None,
            absent_headers=("X-Header-Remove",) if edits else (),
            backend=INFRA_V1,
            namespace=INFRA_NS,
        )

    upstream.expect_all(
        SAME_NAMESPACE,
        [
            rewritten("/prefix/one/two", "/one/two"),
            rewritten("/strip-prefix/three", "/three"),
            rewritten("/strip-prefix", "/"),
            rewritten("/full/one/two", "/one"),
            rewritten("/full/rewrite-path-and-modify-headers/test", "/test", edits=True),
            rewritten("/prefix/rewrite-path-and-modify-headers/one", "/prefix/one", edits=True),
        ],
    )
