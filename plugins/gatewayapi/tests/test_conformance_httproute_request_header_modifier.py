"""Upstream HTTPRouteRequestHeaderModifier (conformance/tests/httproute-request-header-modifier.go).

``set`` overwrites, ``add`` appends (``a`` + ``b`` -> ``a,b``), ``remove`` deletes, several at once,
header names case-insensitive.  The same upstream file's HTTPRouteBackendRequestHeaderModifier runs
the same checks with the filters on the backendRefs (manifest
httproute-request-header-modifier-backend.yaml).
"""

from __future__ import annotations

from pathlib import Path

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-request-header-modifier.yaml"


def case(path: str, sent: dict[str, str], seen: dict[str, str], absent: tuple[str, ...] = ()) -> Expect:
    return Expect(
        path=path,
        headers=sent,
        expected_headers=seen,
        absent_headers=absent,
        backend=INFRA_V1,
        namespace=INFRA_NS,
    )


def test_httproute_request_header_modifier(upstream: Conformance) -> None:
    check_request_header_modifier(upstream)


def test_httproute_backend_request_header_modifier(conformance: Conformance) -> None:
    with conformance.applied(
        Path(__file__).parent / "manifests" / "httproute-request-header-modifier-backend.yaml"
    ):
        check_request_header_modifier(conformance)


def check_request_header_modifier(upstream: Conformance) -> None:
    """The upstream test's body, shared with HTTPRouteBackendRequestHeaderModifier."""
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "request-header-modifier"))
    other = {"Some-Other-Header": "val"}
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            case("/set", other, {**other, "X-Header-Set": "set-overwrites-values"}),
            case(
                "/set",
                {**other, "X-Header-Set": "some-other-value"},
                {**other, "X-Header-Set": "set-overwrites-values"},
            ),
            case("/add", other, {**other, "X-Header-Add": "add-appends-values"}),
            case(
                "/add",
                {**other, "X-Header-Add": "some-other-value"},
                {**other, "X-Header-Add": "some-other-value,add-appends-values"},
            ),
            case("/remove", {"X-Header-Remove": "val"}, {}, ("X-Header-Remove",)),
            case(
                "/multiple",
                {
                    "X-Header-Set-2": "set-val-2",
                    "X-Header-Add-2": "add-val-2",
                    "X-Header-Remove-2": "remove-val-2",
                    "Another-Header": "another-header-val",
                },
                {
                    "X-Header-Set-1": "header-set-1",
                    "X-Header-Set-2": "header-set-2",
                    "X-Header-Add-1": "header-add-1",
                    "X-Header-Add-2": "add-val-2,header-add-2",
                    "X-Header-Add-3": "header-add-3",
                    "Another-Header": "another-header-val",
                },
                ("X-Header-Remove-1", "X-Header-Remove-2"),
            ),
            case(
                "/case-insensitivity",
                {
                    "x-header-set": "original-val-set",
                    "x-header-add": "original-val-add",
                    "x-header-remove": "original-val-remove",
                    "Another-Header": "another-header-val",
                },
                {
                    "X-Header-Set": "header-set",
                    "X-Header-Add": "original-val-add,header-add",
                    "Another-Header": "another-header-val",
                },
                ("x-header-remove", "X-Header-Remove"),
            ),
        ],
    )
