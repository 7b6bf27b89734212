"""Upstream GatewayOptionalAddressValue (conformance/tests/gateway-optional-address-value.go, provisional).

An ``IPAddress`` entry without a value asks the implementation for an address: the Gateway gets
one in ``status.addresses``.  Adapted: the harness leaves such addresses alone; cpx serves the
Gateway on its default address and reports ``--ingress-status-address`` (as a deployment reports
its Envoy Service's address), both a loopback address of the session's own.
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance, NotYet, wait_until

MANIFEST = "gateway-optional-address-value.yaml"
NAME = "gateway-without-address-value"


def test_gateway_optional_address_value(upstream: Conformance) -> None:
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)

    def assigned() -> list[object]:
        addresses = upstream.gateway_status(INFRA_NS, NAME).get("addresses") or []
        typed = [a.get("value") for a in addresses if a.get("type") and a.get("value")]
        if not typed:
            raise NotYet(f"no typed address in status: {addresses}")
        return typed

    assert wait_until(assigned) == [upstream.default_address]
