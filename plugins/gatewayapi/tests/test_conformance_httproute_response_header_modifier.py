"""Upstream HTTPRouteResponseHeaderModifier (conformance/tests/httproute-response-header-modifier.go).

``set``/``add``/``remove`` on the headers the backend answers with (the echo sets them from
``X-Echo-Set-Header``), case-insensitive names, and together with request header edits.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-response-header-modifier.yaml"


def case(
    path: str, backend_sets: dict[str, str], answered: dict[str, str], absent: tuple[str, ...] = ()
) -> Expect:
    return Expect(
        path=path,
        backend_set_response_headers=backend_sets,
        response_headers=answered,
        absent_response_headers=absent,
        backend=INFRA_V1,
        namespace=INFRA_NS,
    )


def test_httproute_response_header_modifier(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "response-header-modifier"))
    other = {"Some-Other-Header": "val"}
    both = Expect(
        path="/response-and-request-header-modifiers",
        headers={
            "X-Header-Remove": "remove-val",
            "X-Header-Add-Append": "append-val-1",
            "X-Header-Echo": "echo",
        },
        backend_set_response_headers={
            "X-Header-Set-2": "set-val-2",
            "X-Header-Add-2": "add-val-2",
            "X-Header-Remove-2": "remove-val-2",
            "Another-Header": "another-header-val",
            "X-Header-Remove-1": "remove-val-1",
            "X-Header-Echo": "echo",
        },
        expected_headers={
            "X-Header-Add": "header-val-1",
            "X-Header-Set": "set-overwrites-values",
            "X-Header-Add-Append": "append-val-1,header-val-2",
            "X-Header-Echo": "echo",
        },
        absent_headers=("X-Header-Remove",),
        response_headers={
            "X-Header-Set-1": "header-set-1",
            "X-Header-Set-2": "header-set-2",
            "X-Header-Add-1": "header-add-1",
            "X-Header-Add-2": "add-val-2,header-add-2",
            "Another-Header": "another-header-val",
            "X-Header-Echo": "echo",
        },
        absent_response_headers=("X-Header-Remove-1", "X-Header-Remove-2"),
        backend=INFRA_V1,
        namespace=INFRA_NS,
    )
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
                    "X-Header-Remove-1": "val",
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
                    "X-Lowercase-Add": "lowercase-add",
                    "X-Mixedcase-Add-1": "mixedcase-add-1",
                    "X-Mixedcase-Add-2": "mixedcase-add-2",
                    "X-Uppercase-Add": "uppercase-add",
                    "Another-Header": "another-header-val",
                },
                ("x-header-remove", "X-Header-Remove"),
            ),
            both,
        ],
    )
