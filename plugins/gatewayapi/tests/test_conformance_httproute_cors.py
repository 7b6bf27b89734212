"""Upstream HTTPRouteCORS (conformance/tests/httproute-cors.go).

The CORS filter: the Gateway answers preflight requests itself (200/204) with the allowed origin
echoed (``https://*.bar.com`` spans labels), methods, headers, exposed headers, max-age and
credentials; other origins get no CORS headers; ``*`` may come back only without credentials;
simple requests reach the backend with ``Access-Control-Allow-Origin``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cpx_gatewayapi.testing import INFRA_NS, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-cors.yaml"
ROUTES = (
    "cors-multiple-origins-methods-headers",
    "cors-wildcard-methods",
    "cors-wildcard-origin",
    "cors-wildcard-methods-headers",
)
FOO, BAR, OTHER = "https://www.foo.com", "https://www.bar.com", "https://other.foo.com"
REQUESTED = {"access-control-request-headers": "x-header-1, x-header-2"}
BOTH_HEADERS = ["x-header-1, x-header-2", "x-header-2, x-header-1"]
ABSENT_CREDENTIALS = ("access-control-allow-credentials",)


def preflight(
    path: str,
    origin: str,
    method: str,
    *,
    extra: Mapping[str, str] | None = None,
    status: tuple[int, ...] = (200, 204),
    valid: Mapping[str, Sequence[str]] | None = None,
    exact: Mapping[str, str] | None = None,
    absent: Sequence[str] = (),
) -> Expect:
    """A preflight the Gateway answers itself: the backend must see nothing of it."""
    return Expect(
        method="OPTIONS",
        path=path,
        headers={"Origin": origin, "access-control-request-method": method, **(extra or {})},
        status=status,
        expected_path="",
        valid_header_values=valid or {},
        response_headers=exact or {},
        absent_response_headers=absent,
        ignore_whitespace=True,
    )


def simple(
    method: str,
    path: str,
    origin: str,
    *,
    extra: Mapping[str, str] | None = None,
    valid: Mapping[str, Sequence[str]] | None = None,
    exact: Mapping[str, str] | None = None,
    absent: Sequence[str] = (),
) -> Expect:
    return Expect(
        method=method,
        path=path,
        headers={"Origin": origin, **(extra or {})},
        namespace=INFRA_NS,
        valid_header_values=valid or {},
        response_headers=exact or {},
        absent_response_headers=absent,
    )


def allowed_cors_1(origin: str) -> Expect:
    return preflight(
        "/cors-1",
        origin,
        "GET",
        extra=REQUESTED,
        valid={
            "access-control-allow-origin": [origin],
            "access-control-allow-methods": ["GET, OPTIONS", "OPTIONS, GET"],
            "access-control-allow-headers": BOTH_HEADERS,
            "access-control-expose-headers": ["x-header-3, x-header-4", "x-header-4, x-header-3"],
            "access-control-max-age": ["3600"],
            "access-control-allow-credentials": ["true"],
        },
    )


def test_httproute_cors(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, *((INFRA_NS, name) for name in ROUTES))
    get = {"access-control-request-method": "GET"}
    wildcard_origin = ["https://foobar.com", "*"]
    wildcard_origin_port = ["https://foobar.com:12345", "*"]
    upstream.expect_all(
        SAME_NAMESPACE,
        [
            allowed_cors_1(FOO),
            allowed_cors_1(BAR),
            allowed_cors_1("https://xpto.www.bar.com"),
            preflight(
                "/cors-1",
                "https://foobar.com",
                "GET",
                status=(200, 204, 403),
                absent=("access-control-allow-origin",),
            ),
            simple(
                "GET", "/cors-1", FOO, extra={**get, **REQUESTED}, exact={"access-control-allow-origin": FOO}
            ),
            simple(
                "GET", "/cors-1", BAR, extra={**get, **REQUESTED}, exact={"access-control-allow-origin": BAR}
            ),
            simple(
                "GET", "/cors-1", "https://foobar.com", extra=get, absent=("access-control-allow-origin",)
            ),
            preflight(
                "/cors-2",
                FOO,
                "POST",
                valid={"access-control-allow-methods": ["POST", "*"]},
                exact={"access-control-allow-origin": FOO},
                absent=ABSENT_CREDENTIALS,
            ),
            preflight("/cors-2", FOO, "POST", absent=("Access-Control-Allow-Credentials",)),
            preflight(
                "/cors-wildcard-origin",
                "https://foobar.com",
                "PUT",
                valid={
                    "access-control-allow-origin": wildcard_origin,
                    "access-control-allow-methods": ["PUT"],
                },
                absent=ABSENT_CREDENTIALS,
            ),
            preflight(
                "/cors-wildcard-origin",
                "https://foobar.com:12345",
                "PUT",
                valid={
                    "access-control-allow-origin": wildcard_origin_port,
                    "access-control-allow-methods": ["PUT"],
                },
                absent=ABSENT_CREDENTIALS,
            ),
            simple(
                "PUT",
                "/cors-wildcard-origin",
                "https://foobar.com:12345",
                valid={"access-control-allow-origin": wildcard_origin_port},
            ),
            simple(
                "PUT",
                "/cors-wildcard-origin",
                "https://foobar.com",
                valid={"access-control-allow-origin": wildcard_origin},
                absent=ABSENT_CREDENTIALS,
            ),
            preflight(
                "/cors-wildcard-methods-headers",
                OTHER,
                "PUT",
                extra=REQUESTED,
                valid={
                    "access-control-allow-origin": [OTHER],
                    "access-control-allow-methods": ["PUT"],
                    "access-control-allow-headers": BOTH_HEADERS,
                    "access-control-allow-credentials": ["true"],
                },
            ),
            preflight(
                "/cors-wildcard-methods-headers-unauth",
                OTHER,
                "PUT",
                extra=REQUESTED,
                valid={
                    "access-control-allow-origin": [OTHER, "*"],
                    "access-control-allow-methods": ["PUT", "*"],
                    "access-control-allow-headers": [*BOTH_HEADERS, "*"],
                },
                absent=ABSENT_CREDENTIALS,
            ),
            simple(
                "GET",
                "/cors-wildcard-methods-headers",
                OTHER,
                valid={"access-control-allow-origin": [OTHER], "access-control-allow-credentials": ["true"]},
            ),
            simple(
                "GET",
                "/cors-wildcard-methods-headers-unauth",
                OTHER,
                valid={"access-control-allow-origin": [OTHER, "*"]},
                absent=ABSENT_CREDENTIALS,
            ),
        ],
    )
