"""Map type URLs to xds-protos message classes (tools and tests only; the server sends bytes)."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf.message import Message

from cpx.xds import resource

_CLASSES: dict[str, type[Message]] = {
    resource.LISTENER: listener_pb2.Listener,
    resource.ROUTE: route_pb2.RouteConfiguration,
    resource.CLUSTER: cluster_pb2.Cluster,
    resource.ENDPOINT: endpoint_pb2.ClusterLoadAssignment,
    resource.SECRET: secret_pb2.Secret,
}


def message_class(type_url: str) -> type[Message]:
    try:
        return _CLASSES[type_url]
    except KeyError:
        raise KeyError(f"unknown xDS type URL {type_url}") from None
