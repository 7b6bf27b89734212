"""Upstream GatewayInvalidParametersRef (conformance/tests/gateway-invalid-parameters-ref.go).

A Gateway whose ``infrastructure.parametersRef`` names a missing object: Accepted=False
``InvalidParameters`` at the current generation.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-invalid-parameters-ref.yaml"
NAME = "gateway-invalid-parameters-ref"


def test_gateway_invalid_parameters_ref(upstream: Conformance) -> None:
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)
    upstream.wait_gateway_condition(INFRA_NS, NAME, "Accepted", "False", "InvalidParameters")
