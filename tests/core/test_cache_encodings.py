"""Resources the caches concatenate instead of building as messages: the bytes are exactly what
deterministic serialisation of the message writes (the server versions resources by their bytes)."""

from __future__ import annotations

from envoy.config.route.v3 import route_pb2 as route_v3
from hypothesis import given
from hypothesis import strategies as st

from cpx.xds.caches.routes import _config_head
from cpx.xds.caches.scopes import scope_body
from cpx.xds.envoy.common import embedded
from cpx.xds.envoy.scoped import scope
from cpx.xds.server.wire import varint

# Empty strings, one-byte and multi-byte lengths, non-ASCII text.
names = st.one_of(st.just(""), st.text(max_size=5), st.text(min_size=120, max_size=300))


@given(names, names, names)
def test_scope_body_is_the_serialised_scope(name: str, route_config: str, key: str) -> None:
    assert scope_body(name, route_config, key) == scope(name, route_config, key).SerializeToString(
        deterministic=True
    )


@given(names)
def test_config_head_is_the_serialised_name(name: str) -> None:
    message = route_v3.RouteConfiguration(name=name)
    assert _config_head(name) == message.SerializeToString(deterministic=True)


@given(st.integers(min_value=1, max_value=5000), st.binary(max_size=300))
def test_embedded_is_tag_length_payload(number: int, payload: bytes) -> None:
    assert embedded(number, payload) == varint(number << 3 | 2) + varint(len(payload)) + payload
