"""Upstream GRPCExactMethodMatching (conformance/tests/grpcroute-exact-method-matching.go):
Echo goes to v1, EchoTwo to v2, EchoThree (no rule) is UNIMPLEMENTED."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from .grpcconformance import SAME_NAMESPACE, Expected, GRPCConformance

pytestmark = pytest.mark.e2e


def test_grpc_exact_method_matching(tmp_path: Path) -> None:
    with GRPCConformance(tmp_path, "grpcroute-exact-method-matching.yaml") as upstream:
        target = upstream.wait_accepted(SAME_NAMESPACE, "exact-matching")
        upstream.expect(target, Expected(method="Echo", backend="grpc-infra-backend-v1"))
        upstream.expect(target, Expected(method="EchoTwo", backend="grpc-infra-backend-v2"))
        upstream.expect(target, Expected(method="EchoThree", code=grpc.StatusCode.UNIMPLEMENTED))
