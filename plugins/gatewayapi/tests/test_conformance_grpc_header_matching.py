"""Upstream GRPCRouteHeaderMatching (conformance/tests/grpcroute-header-matching.go): the
HTTPRouteHeaderMatching matrix on gRPC metadata; more headers win, then the earlier rule; no match
is UNIMPLEMENTED."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from .grpcconformance import SAME_NAMESPACE, Expected, GRPCConformance

pytestmark = pytest.mark.e2e

V1, V2 = "grpc-infra-backend-v1", "grpc-infra-backend-v2"
CASES = [
    ((("version", "one"),), V1),
    ((("version", "two"),), V2),
    ((("version", "two"), ("color", "orange")), V1),
    ((("version", "two"), ("color", "blue")), V2),
    ((("color", "orange"),), None),
    ((("some-other-header", "one"),), None),
    ((("color", "blue"),), V1),
    ((("color", "green"),), V1),
    ((("color", "red"),), V2),
    ((("color", "yellow"),), V2),
    ((("color", "purple"),), None),
]


def test_grpc_route_header_matching(tmp_path: Path) -> None:
    with GRPCConformance(tmp_path, "grpcroute-header-matching.yaml") as upstream:
        target = upstream.wait_accepted(SAME_NAMESPACE, "grpc-header-matching")
        for metadata, backend in CASES:
            code = grpc.StatusCode.OK if backend else grpc.StatusCode.UNIMPLEMENTED
            upstream.expect(target, Expected(method="Echo", metadata=metadata, backend=backend, code=code))
