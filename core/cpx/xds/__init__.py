"""Envoy xDS: resources, caches, builders and the ADS server.

This package's namespace is part of the public plugin API (its submodules are not): what a plugin's
resource cache or HTTP filter needs to build Envoy messages.

===========================================  ===========================================================
Names                                        What for
===========================================  ===========================================================
``LISTENER_TYPE_URL`` ``ROUTE_TYPE_URL``     the xDS type URLs (``ResourceCacheSpec.type_url``)
``CLUSTER_TYPE_URL`` ``ENDPOINT_TYPE_URL``
``SECRET_TYPE_URL`` ``RUNTIME_TYPE_URL``
``SCOPED_ROUTE_TYPE_URL``
``Resource``                                 one named, serialised resource (``Resource.from_message``)
``message_class``                            the xds-protos class of a type URL (decoding, tests)
``to_any`` ``seconds`` ``timeout``           packing typed config; ``Duration`` messages
``ads_config_source``                        "over the ADS stream" config source (RDS, SDS)
``cluster_name`` ``secret_name``             the names the core gives a DAG ``Cluster`` / ``Secret``
``envoy_cluster``                            the Envoy Cluster the core makes of a DAG ``Cluster`` (a
                                             cluster kind's starting point: rename, point EDS elsewhere)
``to_xds``                                   an envoy-data-plane (betterproto2) message as xds-protos
``header_matcher``                           a DAG ``HeaderMatch`` as Envoy's route ``HeaderMatcher``
===========================================  ===========================================================

Names are imported on first use (see :mod:`cpx._lazy`): they load protobuf and Envoy's messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpx._lazy import exporter

if TYPE_CHECKING:
    from cpx.xds.caches.clusters import cluster as envoy_cluster
    from cpx.xds.envoy.common import ads_config_source, seconds, timeout, to_any
    from cpx.xds.envoy.route import header_matcher
    from cpx.xds.interop import to_xds
    from cpx.xds.naming import cluster_name, secret_name
    from cpx.xds.resource import CLUSTER as CLUSTER_TYPE_URL
    from cpx.xds.resource import ENDPOINT as ENDPOINT_TYPE_URL
    from cpx.xds.resource import LISTENER as LISTENER_TYPE_URL
    from cpx.xds.resource import ROUTE as ROUTE_TYPE_URL
    from cpx.xds.resource import RUNTIME as RUNTIME_TYPE_URL
    from cpx.xds.resource import SCOPED_ROUTE as SCOPED_ROUTE_TYPE_URL
    from cpx.xds.resource import SECRET as SECRET_TYPE_URL
    from cpx.xds.resource import Resource
    from cpx.xds.types import message_class

_LAZY = {
    "CLUSTER_TYPE_URL": "cpx.xds.resource:CLUSTER",
    "ENDPOINT_TYPE_URL": "cpx.xds.resource:ENDPOINT",
    "LISTENER_TYPE_URL": "cpx.xds.resource:LISTENER",
    "ROUTE_TYPE_URL": "cpx.xds.resource:ROUTE",
    "RUNTIME_TYPE_URL": "cpx.xds.resource:RUNTIME",
    "Resource": "cpx.xds.resource",
    "SCOPED_ROUTE_TYPE_URL": "cpx.xds.resource:SCOPED_ROUTE",
    "SECRET_TYPE_URL": "cpx.xds.resource:SECRET",
    "ads_config_source": "cpx.xds.envoy.common",
    "cluster_name": "cpx.xds.naming",
    "envoy_cluster": "cpx.xds.caches.clusters:cluster",
    "header_matcher": "cpx.xds.envoy.route",
    "message_class": "cpx.xds.types",
    "seconds": "cpx.xds.envoy.common",
    "secret_name": "cpx.xds.naming",
    "timeout": "cpx.xds.envoy.common",
    "to_any": "cpx.xds.envoy.common",
    "to_xds": "cpx.xds.interop",
}
__getattr__ = exporter(__name__, _LAZY)

__all__ = [
    "CLUSTER_TYPE_URL",
    "ENDPOINT_TYPE_URL",
    "LISTENER_TYPE_URL",
    "ROUTE_TYPE_URL",
    "RUNTIME_TYPE_URL",
    "SCOPED_ROUTE_TYPE_URL",
    "SECRET_TYPE_URL",
    "Resource",
    "ads_config_source",
    "cluster_name",
    "envoy_cluster",
    "header_matcher",
    "message_class",
    "seconds",
    "secret_name",
    "timeout",
    "to_any",
    "to_xds",
]
