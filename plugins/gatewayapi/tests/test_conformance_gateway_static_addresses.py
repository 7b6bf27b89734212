"""Upstream GatewayStaticAddresses (conformance/tests/gateway-static-addresses.go).

``spec.addresses`` = [an unsupported type, an unusable address, a usable one]: the Gateway is
Accepted=False ``UnsupportedAddress``; without the first, Accepted but Programmed=False
``AddressNotUsable``; without the second too, Programmed with only the usable address in status.
Adapted: the suite's placeholders become an IPAddress that is no IP (unusable) and the Gateway's
own loopback address (usable).
"""

from __future__ import annotations

from cpx_gatewayapi.testing import INFRA_NS, Conformance

MANIFEST = "gateway-static-addresses.yaml"
NAME = "gateway-static-addresses"


def test_gateway_static_addresses(upstream: Conformance) -> None:
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)
    gateway = upstream.get("Gateway", INFRA_NS, NAME)
    invalid, unusable, usable = upstream.spec_addresses(INFRA_NS, NAME)
    upstream.wait_gateway_condition(INFRA_NS, NAME, "Accepted", "False", "UnsupportedAddress")

    gateway["spec"]["addresses"] = gateway["spec"]["addresses"][1:]
    upstream.update(gateway)
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)
    upstream.wait_gateway_condition(INFRA_NS, NAME, "Accepted", "True", "Accepted")
    upstream.wait_gateway_condition(INFRA_NS, NAME, "Programmed", "False", "AddressNotUsable")

    gateway["spec"]["addresses"] = gateway["spec"]["addresses"][1:]
    upstream.update(gateway)
    upstream.wait_latest_conditions("Gateway", INFRA_NS, NAME)
    upstream.wait_gateway_condition(INFRA_NS, NAME, "Accepted", "True", "Accepted")
    upstream.wait_gateway_condition(INFRA_NS, NAME, "Programmed", "True", "Programmed")
    ready = [("Accepted", "True", ""), ("ResolvedRefs", "True", ""), ("Programmed", "True", "")]
    upstream.wait_listener_statuses(
        INFRA_NS,
        NAME,
        [{"name": "http", "supportedKinds": ["HTTPRoute"], "conditions": ready, "attachedRoutes": 0}],
    )
    addresses = upstream.gateway_status(INFRA_NS, NAME).get("addresses") or []
    assert [(a.get("type"), a.get("value")) for a in addresses] == [(usable["type"], usable["value"])], (
        f"status addresses {addresses}: expected only {usable}, never {invalid} or {unusable}"
    )
