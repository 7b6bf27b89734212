"""Upstream HTTPRouteRequestPercentageMirror
(conformance/tests/httproute-request-percentage-mirror.go, provisional).

RequestMirror with ``percent: 20``, ``fraction: 25/50`` and ``percent: 35`` (with header edits):
of 500 uniquely tagged requests (10 in flight), all answered by infra-backend-v1, the mirror
infra-backend-v2 sees the share within 3 binomial standard deviations; up to 5 tries, as upstream.
Upstream counts the mirror pod's log lines; here the echo server counts what it saw.
"""

from __future__ import annotations

import math
import uuid

import attrs
import pytest

from cpx_gatewayapi.testing import (
    EDITS_REMOVED,
    EDITS_SEEN,
    EDITS_SENT,
    INFRA_NS,
    INFRA_V1,
    INFRA_V2,
    SAME_NAMESPACE,
    Conformance,
    Expect,
)

MANIFEST = "httproute-request-percentage-mirror.yaml"
REQUESTS = 500
TRIES = 5
TOLERANCE_STDDEVS = 3.0


@pytest.mark.parametrize(
    ("path", "percent"),
    [("/percent-mirror", 20), ("/percent-mirror-fraction", 50), ("/percent-mirror-and-modify-headers", 35)],
)
def test_httproute_request_percentage_mirror(upstream: Conformance, path: str, percent: int) -> None:
    upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "request-percentage-mirror"))
    case = Expect(path=path, backend=INFRA_V1, namespace=INFRA_NS)
    if "headers" in path:
        case = attrs.evolve(
            case, headers=EDITS_SENT, expected_headers=EDITS_SEEN, absent_headers=EDITS_REMOVED
        )
    upstream.expect(SAME_NAMESPACE, case)
    share = percent / 100
    margin = TOLERANCE_STDDEVS * math.sqrt(REQUESTS * share * (1 - share))
    seen = []
    for _ in range(TRIES):
        tagged = attrs.evolve(case, path=f"{path}?gateway-api-conformance-request-id={uuid.uuid4()}")
        answers = upstream.send_many(SAME_NAMESPACE, tagged, requests=REQUESTS)
        wrong = [answer.status for answer in answers if answer.status != 200]
        assert not wrong, f"answers other than 200: {wrong[:10]}"
        mirrored = upstream.mirrored(INFRA_NS, INFRA_V2, tagged.path)
        if abs(mirrored - REQUESTS * share) <= margin:
            return
        seen.append(mirrored)
    raise AssertionError(f"mirrored {seen} of {REQUESTS}, expected {REQUESTS * share:.0f} +- {margin:.1f}")
