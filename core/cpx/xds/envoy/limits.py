"""Contour's ``listener.*`` settings: per-connection limits of the connection managers and of the
listeners, and the listeners' socket options (Contour's envoy/v3/listener.go, socket_options.go)."""

from __future__ import annotations

import attrs
from envoy.config.core.v3 import socket_option_pb2 as socket_option
from envoy.config.listener.v3 import listener_pb2 as listener_v3
from google.protobuf import wrappers_pb2

from cpx.config import Config

# Linux's socket option levels and names (Contour's envoy.IPPROTO_IP, IP_TOS, ...).
_IPPROTO_IP, _IP_TOS = 0, 1
_IPPROTO_IPV6, _IPV6_TCLASS = 41, 67
UINT32 = 2**32 - 1
# Option name -> the lowest value Contour accepts (the highest: UINT32, or 255 for the socket bytes).
_LIMITS = {
    "max_requests_per_connection": 1,
    "http2_max_concurrent_streams": 1,
    "per_connection_buffer_limit_bytes": 1,
    "max_connections_to_accept_per_socket_event": 1,
    "socket_tos": 0,
    "socket_traffic_class": 0,
}


def _limit(config: Config, name: str) -> int | None:
    value = config.option(name)
    if value is None:
        return None
    high = 255 if name.startswith("socket_") else UINT32
    if not isinstance(value, int) or not _LIMITS[name] <= value <= high:
        raise ValueError(f"--{name.replace('_', '-')}: {value!r} is not between {_LIMITS[name]} and {high}")
    return value


@attrs.frozen(kw_only=True)
class ListenerLimits:
    """None (or False): Envoy's default."""

    max_requests_per_connection: int | None = None
    http2_max_concurrent_streams: int | None = None
    per_connection_buffer_limit_bytes: int | None = None
    max_connections_to_accept_per_socket_event: int | None = None
    exact_balance: bool = False
    socket_tos: int | None = None
    socket_traffic_class: int | None = None

    @classmethod
    def from_config(cls, config: Config) -> ListenerLimits:
        balancer = config.option("connection_balancer") or ""
        if balancer not in ("", "exact"):
            raise ValueError(f"--connection-balancer: {balancer!r} is not 'exact' (the only balancer)")
        limits = {name: _limit(config, name) for name in _LIMITS}
        return cls(exact_balance=balancer == "exact", **limits)

    def listener_fields(self) -> listener_v3.Listener:
        """The listener-level settings, to merge into each listener."""
        out = listener_v3.Listener()
        if self.per_connection_buffer_limit_bytes is not None:
            out.per_connection_buffer_limit_bytes.value = self.per_connection_buffer_limit_bytes
        if self.max_connections_to_accept_per_socket_event is not None:
            out.max_connections_to_accept_per_socket_event.value = (
                self.max_connections_to_accept_per_socket_event
            )
        if self.exact_balance:
            out.connection_balance_config.exact_balance.SetInParent()
        for level, name, value, description in (
            (_IPPROTO_IP, _IP_TOS, self.socket_tos, "Set IPv4 TOS field"),
            (_IPPROTO_IPV6, _IPV6_TCLASS, self.socket_traffic_class, "Set IPv6 Traffic Class field"),
        ):
            if value:  # Contour sets the option only for a non-zero value
                out.socket_options.append(
                    socket_option.SocketOption(
                        description=description,
                        level=level,
                        name=name,
                        int_value=value,
                        state=socket_option.SocketOption.STATE_LISTENING,
                    )
                )
        return out


def uint32(value: int) -> wrappers_pb2.UInt32Value:
    return wrappers_pb2.UInt32Value(value=value)


NO_LIMITS = ListenerLimits()
