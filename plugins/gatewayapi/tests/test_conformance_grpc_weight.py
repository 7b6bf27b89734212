"""Upstream GRPCRouteWeight (conformance/tests/grpcroute-weight.go): backendRefs weighted
70/30/0; 500 calls (10 in flight) split within +-5%, the weight-0 backend never answers; up to 10
tries, as upstream's weight.TestWeightedDistribution."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from .grpcconformance import SAME_NAMESPACE, Expected, GRPCConformance

pytestmark = pytest.mark.e2e

EXPECTED = {"grpc-infra-backend-v1": 0.7, "grpc-infra-backend-v2": 0.3, "grpc-infra-backend-v3": 0.0}
TOLERANCE, REQUESTS = 0.05, 500


def test_grpc_route_weight(tmp_path: Path) -> None:
    with GRPCConformance(tmp_path, "grpcroute-weight.yaml") as upstream:
        target = upstream.wait_accepted(SAME_NAMESPACE, "weighted-backends")
        upstream.expect(target, Expected(method="Echo", backend="grpc-infra-backend-v"))
        problems = []
        for _ in range(10):
            problem = _distribution_problem(upstream.weights(target, "Echo", REQUESTS))
            if problem is None:
                return
            problems.append(problem)
        raise AssertionError("weighted distribution never matched:\n" + "\n".join(problems))


def _distribution_problem(counts: Counter[str]) -> str | None:
    if set(counts) - set(EXPECTED):
        return f"answers from elsewhere: {counts}"
    for backend, share in EXPECTED.items():
        got = counts.get(backend, 0) / REQUESTS
        if share == 0 and got:
            return f"{backend} has weight 0 but answered {counts[backend]}: {counts}"
        if abs(got - share) > TOLERANCE:
            return f"{backend}: {got:.3f} of the calls, expected {share} +- {TOLERANCE}: {counts}"
    return None
