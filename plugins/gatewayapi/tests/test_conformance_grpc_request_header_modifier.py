"""Upstream GRPCRouteRequestHeaderModifier (conformance/tests/grpcroute-request-header-modifier.go,
upstream main; not in v1.6.1).

Upstream checks only that each call reaches its backend (its gRPC helper compares no headers).
The manifest's first three rules share one match (method Echo), so the first rule, the ``set``
one, is the one that serves Echo: the headers checked here beyond upstream are that rule's and
the EchoTwo rule's (set, add appending, remove, several operations, names case-insensitive).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .grpcconformance import SAME_NAMESPACE, Expected, GRPCConformance

pytestmark = pytest.mark.e2e

V1, V2 = "grpc-infra-backend-v1", "grpc-infra-backend-v2"
AUTHORITY = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"


def test_grpc_route_request_header_modifier(tmp_path: Path) -> None:
    with GRPCConformance(tmp_path, "grpcroute-request-header-modifier.yaml") as upstream:
        target = upstream.wait_accepted(SAME_NAMESPACE, "grpc-request-header-modifier")
        cases = [
            Expected(
                authority=AUTHORITY,
                method="Echo",
                metadata=(("some-other-header", "this-header-should-be-set"),),
                headers={
                    "Some-Other-Header": ["this-header-should-be-set"],
                    "X-Header-Set": ["set-overwrites-values"],
                },
                backend=V1,
            ),
            Expected(
                authority=AUTHORITY,
                method="Echo",
                metadata=(
                    ("some-other-header", "this-header-should-be-set"),
                    ("x-header-set", "this-value-should-be-overwritten"),
                ),
                headers={"X-Header-Set": ["set-overwrites-values"]},
                backend=V1,
            ),
            Expected(
                authority=AUTHORITY,
                method="Echo",
                metadata=(("x-header-remove", "this-should-be-removed"),),
                backend=V1,
            ),
            Expected(
                authority=AUTHORITY,
                method="EchoTwo",
                metadata=(
                    ("x-header-set-2", "set-header-2"),
                    ("x-header-add-2", "add-header-2"),
                    ("x-header-remove-2", "should-be-removed-2"),
                    ("some-other-header", "another-header-val"),
                ),
                headers={
                    "X-Header-Set-1": ["header-set-1"],
                    "X-Header-Set-2": ["header-set-2"],
                    "X-Header-Add-1": ["header-add-1"],
                    "X-Header-Add-2": ["add-header-2", "header-add-2"],
                    "Some-Other-Header": ["another-header-val"],
                },
                absent=("X-Header-Remove-1", "X-Header-Remove-2"),
                backend=V2,
            ),
        ]
        for expected in cases:
            upstream.expect(target, expected)
