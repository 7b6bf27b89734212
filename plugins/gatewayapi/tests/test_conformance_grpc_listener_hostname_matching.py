"""Upstream GRPCRouteListenerHostnameMatching (conformance/tests/grpcroute-listener-hostname-matching.go):
four listeners on port 80 with exact and wildcard hostnames; the call's ``:authority`` picks the
most specific listener's route; a host no listener owns is UNIMPLEMENTED."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from .grpcconformance import Expected, GRPCConformance

pytestmark = pytest.mark.e2e

GATEWAY = "grpcroute-listener-hostname-matching"
CASES = [
    ("bar.com", "grpc-infra-backend-v1"),
    ("foo.bar.com", "grpc-infra-backend-v2"),
    ("baz.bar.com", "grpc-infra-backend-v3"),
    ("boo.bar.com", "grpc-infra-backend-v3"),
    ("multiple.prefixes.bar.com", "grpc-infra-backend-v3"),
    ("multiple.prefixes.foo.com", "grpc-infra-backend-v3"),
    ("foo.com", None),
    ("no.matching.host", None),
]


def test_grpc_route_listener_hostname_matching(tmp_path: Path) -> None:
    with GRPCConformance(tmp_path, "grpcroute-listener-hostname-matching.yaml") as upstream:
        target = upstream.wait_accepted(GATEWAY, "backend-v1", "backend-v2", "backend-v3")
        for authority, backend in CASES:
            code = grpc.StatusCode.OK if backend else grpc.StatusCode.UNIMPLEMENTED
            upstream.expect(target, Expected(method="Echo", authority=authority, backend=backend, code=code))
