"""The ``gatewayapi`` plugin's hook implementations: declarations only, the work is elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

from cpx import Config, OptionSpec, Phase, ProcessorSpec, StatusWriterSpec, WatchSpec, hookimpl

from cpx_gatewayapi import routeschema, schema, status
from cpx_gatewayapi.kinds import GATEWAY, GATEWAY_CLASS, HTTPROUTE, REFERENCE_GRANT
from cpx_gatewayapi.processor import GatewayAPIProcessor
from cpx_gatewayapi.settings import CONTROLLER_NAME_OPTION, Settings


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    yield CONTROLLER_NAME_OPTION


@hookimpl
def cpx_configure(config: Config) -> None:
    Settings.from_config(config)


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=GATEWAY_CLASS, validate=schema.validate_gateway_class)
    yield WatchSpec(gvk=GATEWAY, validate=schema.validate_gateway)
    yield WatchSpec(gvk=HTTPROUTE, validate=routeschema.validate_httproute)
    yield WatchSpec(gvk=REFERENCE_GRANT, validate=schema.validate_reference_grant)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="gatewayapi",
        factory=GatewayAPIProcessor.from_config,
        phase=Phase.ROUTES,
        # Contour's order: Ingress, HTTPProxy, then Gateway API.  A constraint on a processor
        # that is not loaded is ignored.
        after=("listeners", "ingress", "httpproxy"),
        description="gateway.networking.k8s.io GatewayClasses, Gateways, HTTPRoutes, ReferenceGrants",
        accessors_only=True,
    )


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    yield StatusWriterSpec(name="gatewayclass", gvk=GATEWAY_CLASS, merge=status.merge_gateway_class)
    yield StatusWriterSpec(name="gateway", gvk=GATEWAY, merge=status.merge_gateway)
    yield StatusWriterSpec(name="httproute", gvk=HTTPROUTE, merge=status.merge_route)
