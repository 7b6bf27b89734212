"""The ``gatewayapi`` plugin's hook implementations: declarations only, the work is elsewhere."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cpx import (
    Config,
    Deferred,
    HttpFilterSpec,
    ObjectKey,
    OptionSpec,
    Phase,
    ProcessorSpec,
    SourceView,
    StatusWriterSpec,
    WatchSpec,
    hookimpl,
)

# Declarations only: the model, processors and filter configs are imported when a source first
# holds an object of the plugin's kinds (Deferred, ProcessorSpec.inputs), so that a run of
# Ingresses or HTTPProxies alone never loads them.
from cpx_gatewayapi import sessionfilter, status
from cpx_gatewayapi.kinds import (
    BACKEND_TLS_POLICY,
    CONFIG_MAP,
    DEFAULT_CONTROLLER_NAME,
    GATEWAY,
    GATEWAY_CLASS,
    GROUP,
    GRPCROUTE,
    HTTPROUTE,
    REFERENCE_GRANT,
    TCPROUTE,
    TLSROUTE,
)
from cpx_gatewayapi.processor import GatewayAPIProcessor
from cpx_gatewayapi.settings import CONTROLLER_NAME_OPTION, Settings


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    yield CONTROLLER_NAME_OPTION


@hookimpl
def cpx_configure(config: Config) -> None:
    _configured["controller_name"] = Settings.from_config(config).controller_name


# What cpx_status_writers (which gets no Config) needs from the configuration: the route merges
# tell our status.parents entries from other controllers' by our controller name.
_configured = {"controller_name": DEFAULT_CONTROLLER_NAME}


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    # The schemas are imported at the first object of their kind (a run without any spares them).
    yield WatchSpec(gvk=GATEWAY_CLASS, validate=Deferred("cpx_gatewayapi.schema:validate_gateway_class"))
    yield WatchSpec(gvk=GATEWAY, validate=Deferred("cpx_gatewayapi.schema:validate_gateway"))
    yield WatchSpec(gvk=HTTPROUTE, validate=Deferred("cpx_gatewayapi.routeschema:validate_httproute"))
    yield WatchSpec(gvk=GRPCROUTE, validate=Deferred("cpx_gatewayapi.grpcschema:validate_grpcroute"))
    yield WatchSpec(gvk=REFERENCE_GRANT, validate=Deferred("cpx_gatewayapi.schema:validate_reference_grant"))
    yield WatchSpec(gvk=TLSROUTE, validate=Deferred("cpx_gatewayapi.l4schema:validate_tlsroute"))
    yield WatchSpec(gvk=TCPROUTE, validate=Deferred("cpx_gatewayapi.l4schema:validate_tcproute"))
    yield WatchSpec(
        gvk=BACKEND_TLS_POLICY,
        validate=Deferred("cpx_gatewayapi.backendtlsschema:validate_backend_tls_policy"),
    )
    yield WatchSpec(gvk=CONFIG_MAP, triggers_rebuild=_config_map_in_use)


def _config_map_in_use(obj: Mapping[str, Any], source: SourceView) -> bool:
    """Only the ConfigMaps a BackendTLSPolicy or a Gateway's frontend validation names matter."""
    from cpx_gatewayapi import backendtls, frontend_tls  # noqa: PLC0415 - see the imports above

    return backendtls.references_config_map(obj, source) or frontend_tls.references_config_map(obj, source)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="gatewayapi",
        factory=GatewayAPIProcessor.from_config,
        phase=Phase.ROUTES,
        # Contour's order: Ingress, HTTPProxy, then Gateway API.  A constraint on a processor
        # that is not loaded is ignored.
        after=("listeners", "ingress", "httpproxy"),
        description=(
            "gateway.networking.k8s.io GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes, TLSRoutes, "
            "TCPRoutes, ReferenceGrants; BackendTLSPolicies on route backends"
        ),
        accessors_only=True,
    )
    yield ProcessorSpec(
        name="gatewayapi-backendtls",
        factory=Deferred("cpx_gatewayapi.backendtlsstatus:BackendTLSStatusProcessor.from_config"),
        phase=Phase.ROUTES,
        # It reads the route statuses the gatewayapi processor computed.
        after=("gatewayapi",),
        description="gateway.networking.k8s.io BackendTLSPolicy status (ancestors)",
        accessors_only=True,
        inputs=(BACKEND_TLS_POLICY,),
    )


@hookimpl
def cpx_http_filters() -> Iterator[HttpFilterSpec]:
    yield from sessionfilter.http_filters()


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    yield StatusWriterSpec(name="gatewayclass", gvk=GATEWAY_CLASS, merge=status.merge_gateway_class)
    yield StatusWriterSpec(
        name="gateway", gvk=GATEWAY, merge=status.merge_gateway, load_balancer=status.envoy_load_balancer
    )
    route_merge = status.route_merge(_configured["controller_name"])
    yield StatusWriterSpec(name="httproute", gvk=HTTPROUTE, merge=route_merge)
    yield StatusWriterSpec(name="grpcroute", gvk=GRPCROUTE, merge=route_merge)
    yield StatusWriterSpec(name="tlsroute", gvk=TLSROUTE, merge=route_merge)
    yield StatusWriterSpec(name="tcproute", gvk=TCPROUTE, merge=route_merge)
    yield StatusWriterSpec(
        name="backendtlspolicy",
        gvk=BACKEND_TLS_POLICY,
        merge=status.ancestors_merge(_configured["controller_name"]),
    )


@hookimpl
def cpx_secret_access_permitted(
    secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView
) -> bool | None:
    """A Gateway's certificateRefs reach another namespace's Secret only through a ReferenceGrant
    (Gateway → Secret) in that namespace; other referrers are not this plugin's to judge."""
    if referrer.group != GROUP or referrer.kind != "Gateway":
        return None
    from cpx_gatewayapi import grants  # noqa: PLC0415 - see the imports above
    from cpx_gatewayapi.gateway_tls import secret_reference  # noqa: PLC0415

    return grants.permitted(source, secret_reference(referrer, secret_namespace, secret_name))


@hookimpl
def cpx_fuzz_strategies() -> Iterator[Any]:
    from cpx_gatewayapi.strategies import STRATEGIES  # noqa: PLC0415 - hypothesis only when fuzzing

    yield from STRATEGIES
