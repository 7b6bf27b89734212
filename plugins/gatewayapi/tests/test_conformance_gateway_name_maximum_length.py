"""Upstream GatewayNameMaximumLength (conformance/tests/gateway-name-maximum-length.go).

A Gateway named with the 253 characters Kubernetes allows still gets its conditions at the
current generation (the test asserts no particular condition value).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-name-maximum-length.yaml"
PREFIX = "gateway-name-maximum-length-"
NAME = PREFIX + "a" * (253 - len(PREFIX))


def test_gateway_name_maximum_length(upstream: Conformance) -> None:
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)
