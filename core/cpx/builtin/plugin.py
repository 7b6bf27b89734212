"""The core's own defaults, registered through the same hooks as any third-party plugin.

It watches the four kinds the core knows (Service, EndpointSlice, Secret, Namespace), creates the
two static listeners, registers the Envoy v3 LDS/RDS/CDS/EDS/SDS caches and answers the
secret-access question with "same namespace only" (trylast, so any other plugin answers first).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cpx import objects as k8s
from cpx.builtin import filters
from cpx.builtin.httpoptions import (
    CLUSTER_CONNECT_TIMEOUT_OPTION,
    CLUSTER_DNS_OPTION,
    COMPRESSION_OPTION,
    HTTP_OPTIONS,
    LISTENER_OPTIONS,
)
from cpx.builtin.schema import validate_endpoint_slice, validate_namespace, validate_secret, validate_service
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import DNSNameCluster
from cpx.errors import ConfigError
from cpx.hookspecs import hookimpl
from cpx.objects import ObjectKey
from cpx.plugins import TRACE_OPTION
from cpx.records import (
    ClusterKindSpec,
    HttpFilterSpec,
    OptionSpec,
    Phase,
    ProcessorSpec,
    ResourceCacheSpec,
    WatchSpec,
)
from cpx.sources import externalname, ingressclass
from cpx.sources.view import SourceView
from cpx.status import loadbalancer as lbstatus
from cpx.xds import resource
from cpx.xds.caches.clusters import DNS_LOOKUP_FAMILIES, ClusterCache, connect_timeout, dns_name_cluster
from cpx.xds.caches.endpoints import EndpointCache
from cpx.xds.caches.listeners import ListenerCache
from cpx.xds.caches.routes import RouteCache
from cpx.xds.caches.scopes import ScopeCache
from cpx.xds.caches.secrets import SecretCache
from cpx.xds.envoy import filters as envoy_filters
from cpx.xds.envoy.listener import HTTPSettings

EXTERNAL_NAME_OPTION = OptionSpec(
    name=externalname.ENABLE_OPTION_NAME,
    help=externalname.ENABLE_OPTION_HELP,
    type=bool,
    default=False,
    config_key="enableExternalNameService",
)
HTTP_LISTENER = "ingress_http"
HTTPS_LISTENER = "ingress_https"
# Secret types never worth holding (Contour's field selector): Helm releases, SA tokens.
SECRET_FIELD_SELECTOR = "type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token"


class ListenerProcessor:
    """Adds the two static listeners, ``ingress_http`` and ``ingress_https``."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def run(self, dag: DAG, source: SourceView) -> None:
        c = self.config
        dag.ensure_listener(HTTP_LISTENER, Protocol.HTTP, c.http_address, c.http_port)
        dag.ensure_listener(HTTPS_LISTENER, Protocol.HTTPS, c.https_address, c.https_port)


def _namespace_triggers(obj: Mapping[str, Any], source: SourceView) -> bool:
    return True


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=k8s.SERVICE, validate=validate_service)
    yield WatchSpec(gvk=k8s.ENDPOINT_SLICE, validate=validate_endpoint_slice)
    yield WatchSpec(gvk=k8s.SECRET, field_selector=SECRET_FIELD_SELECTOR, validate=validate_secret)
    yield WatchSpec(gvk=k8s.NAMESPACE, triggers_rebuild=_namespace_triggers, validate=validate_namespace)


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    # Shared by every plugin whose kinds honour ingress classes (Contour's one flag for all kinds).
    yield ingressclass.CLASS_OPTION
    yield lbstatus.STATUS_ADDRESS_OPTION
    # Enforced by the core for every kind (cpx.dag.services), as Contour's one setting is.
    yield EXTERNAL_NAME_OPTION
    yield from HTTP_OPTIONS
    yield from LISTENER_OPTIONS
    yield CLUSTER_DNS_OPTION
    yield CLUSTER_CONNECT_TIMEOUT_OPTION
    yield TRACE_OPTION


@hookimpl
def cpx_configure(config: Config) -> None:
    try:
        lbstatus.parse_status_addresses(config.option(lbstatus.STATUS_ADDRESS_OPTION.name))
    except ValueError as err:
        raise ConfigError(f"--ingress-status-address: {err}") from None
    try:
        externalname.parse_enabled(config.option(EXTERNAL_NAME_OPTION.name))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    compression = config.option(COMPRESSION_OPTION.name, envoy_filters.DEFAULT_COMPRESSION)
    if compression not in envoy_filters.COMPRESSION_ALGORITHMS:
        choices = ", ".join(envoy_filters.COMPRESSION_ALGORITHMS)
        raise ConfigError(f"--compression: {compression!r} is not one of {choices}")
    try:
        HTTPSettings.from_config(config)
        connect_timeout(config)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    family = config.option(CLUSTER_DNS_OPTION.name, "auto")
    if family not in DNS_LOOKUP_FAMILIES:
        raise ConfigError(
            f"--cluster-dns-lookup-family: {family!r} is not one of {', '.join(DNS_LOOKUP_FAMILIES)}"
        )


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="listeners",
        factory=ListenerProcessor,
        phase=Phase.LISTENERS,
        description="the static ingress_http and ingress_https listeners",
        accessors_only=True,
    )


@hookimpl
def cpx_resource_caches() -> Iterator[ResourceCacheSpec]:
    yield ResourceCacheSpec(name="listeners", type_url=resource.LISTENER, factory=ListenerCache)
    yield ResourceCacheSpec(name="routes", type_url=resource.ROUTE, factory=RouteCache)
    yield ResourceCacheSpec(name="scoped-routes", type_url=resource.SCOPED_ROUTE, factory=ScopeCache)
    yield ResourceCacheSpec(name="clusters", type_url=resource.CLUSTER, factory=ClusterCache)
    yield ResourceCacheSpec(name="endpoints", type_url=resource.ENDPOINT, factory=EndpointCache)
    yield ResourceCacheSpec(name="secrets", type_url=resource.SECRET, factory=SecretCache)


@hookimpl
def cpx_http_filters(config: Config) -> Iterator[HttpFilterSpec]:
    yield from filters.http_filters(config.option(COMPRESSION_OPTION.name, envoy_filters.DEFAULT_COMPRESSION))


@hookimpl
def cpx_cluster_kinds() -> Iterator[ClusterKindSpec]:
    yield ClusterKindSpec(
        name="dnsname",
        node_type=DNSNameCluster,
        build=dns_name_cluster,
        description="a cluster to a DNS name or IP address (Contour's dnsname/<scheme>/<address>)",
    )


@hookimpl(trylast=True)
def cpx_secret_access_permitted(
    secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView
) -> bool | None:
    # Another namespace is for a plugin (a delegation policy) to judge: None says none did.
    return True if secret_namespace == referrer.namespace else None
