"""cpx: an Envoy control plane that does what Project Contour does, built as a plugin framework.

This module, :mod:`cpx.dag` and :mod:`cpx.xds` are the plugin API: everything a plugin may import.
Every other module is private and may change between releases (tests for plugins also use
:mod:`cpx.testing`).  docs/plugins.md walks through it; docs/hooks.md documents each hook and record.

=================================================  ====================================================
Names                                              What for
=================================================  ====================================================
``hookimpl``                                       marks a plugin's hook implementations
``OptionSpec`` ``WatchSpec`` ``ProcessorSpec``     the records the registration hooks yield
``ResourceCacheSpec`` ``StatusWriterSpec``
``Deferred``                                       a record's function imported at its first call
``Phase`` ``Processor`` ``Observer``
``ResourceCache`` ``CheckingCache``                what a plugin's resource cache provides
``SourceBound`` ``EndpointsObserver``
``ListenerKindSpec`` ``ClusterKindSpec``           Envoy listeners and clusters of a plugin's own kind
``CustomNode``                                     (their DAG nodes)
``HttpFilterSpec`` ``FilterSite`` ``RouteSite``    HTTP filters and their per-route configs
``Config``                                         options and settings, as ``cpx_configure`` sees them
``blame``                                          wrap one object's translation: a crash drops the object
``ObjectKey`` ``GroupVersionKind`` ``KubeObject``  Kubernetes objects as cpx holds them (plain dicts)
``SERVICE`` ``ENDPOINT_SLICE`` ``SECRET``          the kinds the core itself watches
``NAMESPACE``
``annotations_of`` ``name_of`` ``namespace_of``    reading an object's metadata
``crd_manifest``                                   the CustomResourceDefinition of a plugin's kind
``SourceView`` ``Lookups`` ``ReadIndex``           the watched objects, read-only, as processors see
                                                   them; what a memoised result read (``depend_on``)
``PluginDeclined``                                 raised in ``cpx_configure`` to opt out of this run
``NotFoundError`` ``SecretError``                  lookups a processor turns into status conditions
``DelegationNotPermittedError``                    (a Secret in another namespace; ``...NotEnabled...``:
``DelegationNotEnabledError``                      no enabled plugin judges such references)
``lookup_service_port`` ``ServicePortError``       a Service's port by number or name, as a DAG value
``INGRESS_CLASS_OPTION``                           the ``--ingress-class-name`` option and matching
``ingress_class_accepts`` ``ingress_class_matches``
``ingress_class_names``
``DetailedStatus`` ``SubCondition``                Contour's ``Valid`` DetailedCondition (errors, warnings)
``valid_condition`` ``object_generation``          for a kind's status; ``StatusClock`` stamps its
``StatusClock`` ``fixed_clock`` ``utc_now``        lastTransitionTime
``status_timestamp``
``STATUS_ADDRESS_OPTION``                          load-balancer addresses written into status
``load_balancer_status`` ``parse_status_addresses``
``capped`` ``json_type`` ``metadata_problems``     building ``WatchSpec.validate`` messages like the
``must_be`` ``shown``                              core's (API-server wording)
``openapi_problems``                               a CRD's openAPIV3Schema checked like the API server
``MAX_ENVOY_DURATION_SECONDS``                     the largest duration Envoy accepts
``parse_go_duration`` ``parse_timeout``            Go durations and Contour's timeouts, with Go's and
``parse_go_duration_nanos`` ``DurationError``      Contour's messages (for status conditions)
``go_quote``
``ConfigError`` ``PluginError``                    a plugin's refusal of its configuration
=================================================  ====================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# First, before any attrs class is made: it caches the bytecode of their methods (see the module).
from cpx import attrscache  # noqa: F401  (installed on import)
from cpx._lazy import exporter
from cpx.config import Config
from cpx.dag.nodes import CustomNode
from cpx.durations import DurationError, go_quote, parse_go_duration, parse_go_duration_nanos, parse_timeout
from cpx.errors import ConfigError, PluginDeclined, PluginError
from cpx.hookspecs import hookimpl
from cpx.isolation import blame
from cpx.objects import (
    ENDPOINT_SLICE,
    NAMESPACE,
    SECRET,
    SERVICE,
    GroupVersionKind,
    KubeObject,
    ObjectKey,
    annotations_of,
    crd_manifest,
    name_of,
    namespace_of,
)
from cpx.records import (
    CheckingCache,
    ClusterKindSpec,
    Deferred,
    EndpointsObserver,
    FilterSite,
    HttpFilterSpec,
    ListenerKindSpec,
    Observer,
    OptionSpec,
    Phase,
    Processor,
    ProcessorSpec,
    ResourceCache,
    ResourceCacheSpec,
    RouteSite,
    SourceBound,
    StatusWriterSpec,
    WatchSpec,
)
from cpx.sources.view import Lookups, ReadIndex, SourceView
from cpx.status.detailed import (
    DetailedStatus,
    StatusClock,
    SubCondition,
    fixed_clock,
    object_generation,
    status_timestamp,
    utc_now,
    valid_condition,
)

if TYPE_CHECKING:
    from cpx.builtin.openapi import openapi_problems
    from cpx.builtin.typecheck import capped, json_type, metadata_problems, must_be, shown
    from cpx.dag.services import ServicePortError, lookup_service_port
    from cpx.sources.cache import DelegationNotEnabledError, DelegationNotPermittedError, NotFoundError
    from cpx.sources.ingressclass import CLASS_OPTION as INGRESS_CLASS_OPTION
    from cpx.sources.ingressclass import accepts as ingress_class_accepts
    from cpx.sources.ingressclass import class_names as ingress_class_names
    from cpx.sources.ingressclass import matches as ingress_class_matches
    from cpx.sources.secrets import SecretError
    from cpx.status.loadbalancer import STATUS_ADDRESS_OPTION, load_balancer_status, parse_status_addresses
    from cpx.xds.constraints.semantic import MAX_ENVOY_DURATION_SECONDS

# Imported on first use (cryptography, protobuf): see cpx._lazy.
_LAZY = {
    "DelegationNotEnabledError": "cpx.sources.cache",
    "DelegationNotPermittedError": "cpx.sources.cache",
    "INGRESS_CLASS_OPTION": "cpx.sources.ingressclass:CLASS_OPTION",
    "MAX_ENVOY_DURATION_SECONDS": "cpx.xds.constraints.semantic",
    "NotFoundError": "cpx.sources.cache",
    "STATUS_ADDRESS_OPTION": "cpx.status.loadbalancer",
    "SecretError": "cpx.sources.secrets",
    "ServicePortError": "cpx.dag.services",
    "capped": "cpx.builtin.typecheck",
    "ingress_class_accepts": "cpx.sources.ingressclass:accepts",
    "ingress_class_matches": "cpx.sources.ingressclass:matches",
    "ingress_class_names": "cpx.sources.ingressclass:class_names",
    "json_type": "cpx.builtin.typecheck",
    "load_balancer_status": "cpx.status.loadbalancer",
    "lookup_service_port": "cpx.dag.services",
    "metadata_problems": "cpx.builtin.typecheck",
    "openapi_problems": "cpx.builtin.openapi",
    "must_be": "cpx.builtin.typecheck",
    "parse_status_addresses": "cpx.status.loadbalancer",
    "shown": "cpx.builtin.typecheck",
}
__getattr__ = exporter(__name__, _LAZY)

__version__ = "0.1.0"
__all__ = [
    "ENDPOINT_SLICE",
    "INGRESS_CLASS_OPTION",
    "MAX_ENVOY_DURATION_SECONDS",
    "NAMESPACE",
    "SECRET",
    "SERVICE",
    "STATUS_ADDRESS_OPTION",
    "CheckingCache",
    "ClusterKindSpec",
    "Config",
    "ConfigError",
    "CustomNode",
    "Deferred",
    "DelegationNotEnabledError",
    "DelegationNotPermittedError",
    "DetailedStatus",
    "DurationError",
    "EndpointsObserver",
    "FilterSite",
    "GroupVersionKind",
    "HttpFilterSpec",
    "KubeObject",
    "ListenerKindSpec",
    "Lookups",
    "NotFoundError",
    "ObjectKey",
    "Observer",
    "OptionSpec",
    "Phase",
    "PluginDeclined",
    "PluginError",
    "Processor",
    "ProcessorSpec",
    "ReadIndex",
    "ResourceCache",
    "ResourceCacheSpec",
    "RouteSite",
    "SecretError",
    "ServicePortError",
    "SourceBound",
    "SourceView",
    "StatusClock",
    "StatusWriterSpec",
    "SubCondition",
    "WatchSpec",
    "annotations_of",
    "blame",
    "capped",
    "crd_manifest",
    "fixed_clock",
    "go_quote",
    "hookimpl",
    "ingress_class_accepts",
    "ingress_class_matches",
    "ingress_class_names",
    "json_type",
    "load_balancer_status",
    "lookup_service_port",
    "metadata_problems",
    "must_be",
    "name_of",
    "namespace_of",
    "object_generation",
    "openapi_problems",
    "parse_go_duration",
    "parse_go_duration_nanos",
    "parse_status_addresses",
    "parse_timeout",
    "shown",
    "status_timestamp",
    "utc_now",
    "valid_condition",
]
