"""The plugin's options, read once per run."""

from __future__ import annotations

import attrs
from cpx import STATUS_ADDRESS_OPTION, Config, OptionSpec

from cpx_gatewayapi.kinds import DEFAULT_CONTROLLER_NAME

CONTROLLER_NAME_OPTION = OptionSpec(
    name="gateway_controller_name",
    help="the controllerName of the GatewayClasses cpx serves (Contour's --gateway-controller-name)",
    default=DEFAULT_CONTROLLER_NAME,
    config_key="gateway.controllerName",  # Contour's (before gateway.gatewayRef replaced it)
)


@attrs.frozen(kw_only=True)
class Settings:
    controller_name: str
    # Where a Gateway without an IPAddress in spec.addresses is served (Contour's
    # --envoy-service-http-address): the core's HTTP listener address.
    default_address: str
    # The core's static listeners: a Gateway listener on the same address and Envoy port shares
    # the DAG listener (Contour serves HTTPProxy, Ingress and HTTPRoute hosts on one listener).
    http_port: int
    https_port: int
    # --ingress-status-address: what Gateways report in status.addresses when they have none.
    status_address: str | None

    @classmethod
    def from_config(cls, config: Config) -> Settings:
        return cls(
            controller_name=str(config.option("gateway_controller_name") or DEFAULT_CONTROLLER_NAME),
            default_address=config.http_address,
            http_port=config.http_port,
            https_port=config.https_port,
            status_address=config.option(STATUS_ADDRESS_OPTION.name),
        )
