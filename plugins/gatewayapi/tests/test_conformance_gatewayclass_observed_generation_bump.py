"""Upstream GatewayClassObservedGenerationBump (conformance/tests/gatewayclass-observed-generation-bump.go).

Editing a GatewayClass's ``spec.description`` bumps its generation; its Accepted condition then
reports it.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import Conformance

MANIFEST = "gatewayclass-observed-generation-bump.yaml"
NAME = "gatewayclass-observed-generation-bump"


def test_gatewayclass_observed_generation_bump(upstream: Conformance) -> None:
    upstream.wait_class_accepted_any(NAME)
    upstream.wait_latest_conditions("GatewayClass", "", NAME)
    original = upstream.generation("GatewayClass", "", NAME)
    gateway_class = upstream.get("GatewayClass", "", NAME)
    gateway_class["spec"]["description"] = "new"
    upstream.update(gateway_class)
    upstream.wait_class_accepted_any(NAME)
    upstream.wait_latest_conditions("GatewayClass", "", NAME)
    assert upstream.generation("GatewayClass", "", NAME) != original
