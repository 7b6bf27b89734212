"""Small Envoy-building helpers shared by the xDS caches: durations, config sources, wire encoding."""

from __future__ import annotations

from envoy.config.core.v3 import config_source_pb2 as config_source
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message

from cpx.dag.nodes import Duration
from cpx.xds.server.wire import varint

# Protobuf wire type of length-delimited fields (strings, bytes, embedded messages).
_LENGTH_DELIMITED = 2


def seconds(value: float) -> duration_pb2.Duration:
    whole = int(value)
    return duration_pb2.Duration(seconds=whole, nanos=round((value - whole) * 1e9))


def timeout(value: Duration) -> duration_pb2.Duration:
    """Contour's ``envoy.Timeout``: a disabled timeout is 0 s, which Envoy reads as "no timeout"."""
    return duration_pb2.Duration() if value.seconds is None else seconds(value.seconds)


def ads_config_source() -> config_source.ConfigSource:
    """Resources (RDS, SDS) come over the same ADS stream as everything else."""
    return config_source.ConfigSource(
        ads=config_source.AggregatedConfigSource(),
        resource_api_version=config_source.ApiVersion.V3,
    )


def to_any(message: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message, deterministic=True)
    return packed


def embedded(field_number: int, payload: bytes) -> bytes:
    """One occurrence of a message field, encoded: tag, length, then the already serialised message.

    Concatenating such pieces (plus the serialisation of the message's other fields) yields the same
    bytes the whole message would serialise to, so cached sub-messages are never re-encoded.
    """
    tag, size = field_number << 3 | _LENGTH_DELIMITED, len(payload)
    if tag < 0x80 and size < 0x80:  # one byte each (most routes): no varint loop, no tuple
        return _ONE_BYTE[tag] + _ONE_BYTE[size] + payload
    return varint(tag) + varint(size) + payload


# Each value below 0x80 as its one-byte varint (embedded runs several times per route).
_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))
