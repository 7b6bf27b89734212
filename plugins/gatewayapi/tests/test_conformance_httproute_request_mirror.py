"""Upstream HTTPRouteRequestMirror (conformance/tests/httproute-request-mirror.go).

RequestMirror copies requests to infra-backend-v2 while infra-backend-v1 answers, also with header
edits.  Upstream reads the mirror pod's log for the uniquely tagged path; here the echo server
records what it saw.
"""

from __future__ import annotations

import uuid

import attrs

from cpx_gatewayapi.testing import (
    INFRA_NS,
    INFRA_V1,
    INFRA_V2,
    SAME_NAMESPACE,
    Conformance,
    Expect,
    wait_until,
)

MANIFEST = "httproute-request-mirror.yaml"


def test_httproute_request_mirror(upstream: Conformance) -> None:
    upstream.wait_gateway_and_routes(SAME_NAMESPACE, [(INFRA_NS, "request-mirror")])
    mirror = upstream.backend(INFRA_NS, INFRA_V2)
    plain = Expect(path="/mirror", backend=INFRA_V1, namespace=INFRA_NS)
    with_edits = Expect(
        path="/mirror-and-modify-headers",
        headers={"X-Header-Remove": "remove-val", "X-Header-Add-Append": "append-val-1"},
        expected_headers={
            "X-Header-Add": "header-val-1",
            "X-Header-Add-Append": "append-val-1,header-val-2",
            "X-Header-Set": "set-overwrites-values",
        },
        absent_headers=("X-Header-Remove",),
        backend=INFRA_V1,
        namespace=INFRA_NS,
    )
    for case in (plain, with_edits):
        # AddRequestIDQueryParam: a unique path the mirror must have seen.
        tagged = f"{case.path}?gateway-api-conformance-request-id={uuid.uuid4()}"
        upstream.expect(SAME_NAMESPACE, attrs.evolve(case, path=tagged))

        def mirrored(tagged: str = tagged) -> None:
            assert tagged in mirror.seen_paths(), f"{INFRA_V2} never saw {tagged}"

        wait_until(mirrored)
