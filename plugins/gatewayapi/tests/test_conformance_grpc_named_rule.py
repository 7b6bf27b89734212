"""Upstream GRPCRouteNamedRule (conformance/tests/grpcroute-named-rule.go): a named and an
unnamed rule both route."""

from __future__ import annotations

from pathlib import Path

import pytest

from .grpcconformance import SAME_NAMESPACE, Expected, GRPCConformance

pytestmark = pytest.mark.e2e


def test_grpc_route_named_rule(tmp_path: Path) -> None:
    with GRPCConformance(tmp_path, "grpcroute-named-rule.yaml") as upstream:
        target = upstream.wait_accepted(SAME_NAMESPACE, "grpc-named-rules")
        upstream.expect(target, Expected(method="Echo", backend="grpc-infra-backend-v1"))
        upstream.expect(target, Expected(method="EchoTwo", backend="grpc-infra-backend-v2"))
