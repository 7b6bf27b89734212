"""What the caches compute a faster way than the obvious one gives the same result: resources
concatenated instead of built as messages are exactly what deterministic serialisation writes (the
server versions resources by their bytes), memoised cluster names are the names."""

from __future__ import annotations

import attrs
from envoy.config.route.v3 import route_pb2 as route_v3
from hypothesis import given
from hypothesis import strategies as st

from cpx.dag.nodes import Cluster, HealthCheck, ServicePort
from cpx.xds.caches.routes import _config_head
from cpx.xds.caches.scopes import scope_body
from cpx.xds.envoy.common import embedded
from cpx.xds.envoy.route import virtual_host_head, virtual_host_head_bytes
from cpx.xds.envoy.scoped import scope
from cpx.xds.naming import _options_digest, cluster_name
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


def test_cluster_names_share_no_digest_between_equal_options_of_other_types() -> None:
    # 5 == 5.0, but Contour's name hashes what the options print as: each keeps its own digest.
    up = ServicePort(namespace="ns", name="a", port=80)
    whole = Cluster(upstream=up, health_check=HealthCheck(path="/h", interval=5))
    other = Cluster(upstream=attrs.evolve(up, name="b"), health_check=HealthCheck(path="/h", interval=5.0))
    for node in (whole, other):
        assert cluster_name(node).endswith("/" + _options_digest(node))
    assert cluster_name(whole).rsplit("/", 1)[1] != cluster_name(other).rsplit("/", 1)[1]


@given(st.one_of(names, st.just("*"), st.just("*.example.com")))
def test_virtual_host_head_bytes_is_the_serialised_head(fqdn: str) -> None:
    expected = virtual_host_head(fqdn).SerializeToString(deterministic=True)
    assert virtual_host_head_bytes(fqdn) == expected
