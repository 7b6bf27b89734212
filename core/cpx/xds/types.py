"""Map type URLs to xds-protos message classes (tools and tests only; the server sends bytes)."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2, scoped_route_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf.message import Message

# Keyed by the type URL each message declares, so that this module needs nothing from
# cpx.xds.resource (which imports it to decode).
_CLASSES: dict[str, type[Message]] = {
    f"type.googleapis.com/{cls.DESCRIPTOR.full_name}": cls
    for cls in (
        listener_pb2.Listener,
        route_pb2.RouteConfiguration,
        scoped_route_pb2.ScopedRouteConfiguration,
        cluster_pb2.Cluster,
        endpoint_pb2.ClusterLoadAssignment,
        secret_pb2.Secret,
    )
}


def message_class(type_url: str) -> type[Message]:
    try:
        return _CLASSES[type_url]
    except KeyError:
        raise KeyError(f"unknown xDS type URL {type_url}") from None
