"""envoy-data-plane (betterproto2) messages are converted to xds-protos at the plugin boundary."""

from __future__ import annotations

import pytest
from envoy.config.cluster.v3 import cluster_pb2 as cluster_v3
from envoy.config.route.v3 import route_components_pb2 as route_components
from envoy.config.route.v3 import route_pb2 as route_v3
from envoy_data_plane.envoy.config.cluster.v3 import Cluster as BpCluster
from envoy_data_plane.envoy.config.cluster.v3 import ClusterDiscoveryType, ClusterLbPolicy
from envoy_data_plane.envoy.config.route.v3 import RouteConfiguration as BpRouteConfiguration
from envoy_data_plane.envoy.config.route.v3 import VirtualHost as BpVirtualHost

from cpx.xds import resource
from cpx.xds.interop import to_xds, xds_class_for
from cpx.xds.resource import Resource


def test_route_configuration_converts_field_for_field() -> None:
    bp = BpRouteConfiguration(
        name="ingress_http", virtual_hosts=[BpVirtualHost(name="a", domains=["a.example.com"])]
    )
    converted = to_xds(bp)
    assert isinstance(converted, route_v3.RouteConfiguration)
    assert converted == route_v3.RouteConfiguration(
        name="ingress_http", virtual_hosts=[route_components.VirtualHost(name="a", domains=["a.example.com"])]
    )


def test_enums_and_nested_message_names() -> None:
    bp = BpCluster(name="c", type=ClusterDiscoveryType.STRICT_DNS, lb_policy=ClusterLbPolicy.RANDOM)
    converted = to_xds(bp)
    assert isinstance(converted, cluster_v3.Cluster)
    assert (
        converted.type == cluster_v3.Cluster.STRICT_DNS and converted.lb_policy == cluster_v3.Cluster.RANDOM
    )
    # betterproto flattens nested names: Cluster.LbPolicy is ClusterLbPolicy (an enum, not a message),
    # Cluster.CommonLbConfig is ClusterCommonLbConfig.
    from envoy_data_plane.envoy.config.cluster.v3 import ClusterCommonLbConfig

    assert xds_class_for(ClusterCommonLbConfig) is cluster_v3.Cluster.CommonLbConfig


def test_resource_from_betterproto_equals_resource_from_upb() -> None:
    bp = BpRouteConfiguration(name="r", virtual_hosts=[BpVirtualHost(name="v", domains=["*"])])
    upb = route_v3.RouteConfiguration(
        name="r", virtual_hosts=[route_components.VirtualHost(name="v", domains=["*"])]
    )
    a = Resource.from_message("r", resource.ROUTE, bp)
    b = Resource.from_message("r", resource.ROUTE, upb)
    assert a == b


def test_other_objects_are_refused() -> None:
    with pytest.raises(TypeError, match="expected a protobuf or envoy-data-plane message"):
        to_xds({"name": "x"})
