"""Upstream HTTPRouteWeight (conformance/tests/httproute-weight.go).

backendRefs weighted 70/30/0: 500 requests (10 in flight) split within +-5%, the weight-0 backend
never answers; up to 10 tries, as upstream's weight.TestWeightedDistribution.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, INFRA_V2, INFRA_V3, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-weight.yaml"
EXPECTED = {INFRA_V1: 0.7, INFRA_V2: 0.3, INFRA_V3: 0.0}
TOLERANCE = 0.05
REQUESTS = 500


def test_httproute_weight(upstream: Conformance) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "weighted-backends"))
    upstream.expect(SAME_NAMESPACE, Expect(path="/", namespace=INFRA_NS))
    problems = []
    for _ in range(10):
        counts = upstream.weights(SAME_NAMESPACE, Expect(path="/"), requests=REQUESTS)
        problem = _distribution_problem(counts)
        if problem is None:
            return
        problems.append(problem)
    raise AssertionError("weighted distribution never matched:\n" + "\n".join(problems))


def _distribution_problem(counts: dict[str, int]) -> str | None:
    unexpected = set(counts) - set(EXPECTED)
    if unexpected:
        return f"answers from elsewhere: {counts}"
    for backend, share in EXPECTED.items():
        got = counts.get(backend, 0) / REQUESTS
        if share == 0 and got:
            return f"{backend} has weight 0 but answered {counts.get(backend)}: {counts}"
        if abs(got - share) > TOLERANCE:
            return f"{backend}: {got:.3f} of the requests, expected {share} +- {TOLERANCE}: {counts}"
    return None
