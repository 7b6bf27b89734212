"""What the caches compute a faster way than the obvious one gives the same result: resources
concatenated instead of built as messages are exactly what deterministic serialisation writes (the
server versions resources by their bytes), memoised cluster names are the names."""

from __future__ import annotations

from typing import Any

import attrs
from envoy.config.route.v3 import route_pb2 as route_v3
from hypothesis import given
from hypothesis import strategies as st

from cpx.dag.nodes import (
    CircuitBreakers,
    Cluster,
    Duration,
    HealthCheck,
    Secret,
    ServicePort,
    SlowStart,
    UpstreamProtocol,
    UpstreamValidation,
)
from cpx.xds.caches.clusters import CONNECT_TIMEOUT, cluster, eds_cluster_body
from cpx.xds.caches.endpoints import PortEndpoints, cluster_load_assignment, cluster_load_assignment_body
from cpx.xds.caches.routes import _config_head
from cpx.xds.caches.scopes import scope_body
from cpx.xds.envoy.common import embedded, seconds
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


_UP = ServicePort(namespace="ns", name="svc", port=8080, port_name="http")
_CA = UpstreamValidation(ca=Secret(namespace="ns", name="ca", ca_pem=b"PEM"), subject_names=("a.example",))
_OPTIONS = st.fixed_dictionaries(
    {
        "upstream": st.sampled_from(
            [
                _UP,
                attrs.evolve(_UP, name="x" * 70, protocol=UpstreamProtocol.H2),
                attrs.evolve(_UP, port_name="", protocol=UpstreamProtocol.TLS),
                attrs.evolve(_UP, circuit_breakers=CircuitBreakers(max_connections=9, max_retries=0)),
            ]
        ),
        "load_balancer_policy": st.sampled_from(["RoundRobin", "Random", "Cookie", "WeightedLeastRequest"]),
        "health_check": st.sampled_from(
            [None, HealthCheck(), HealthCheck(path="/hc", expected_statuses=((200, 300),))]
        ),
        "validation": st.sampled_from([None, _CA]),
        "sni": st.sampled_from(["", "sni.example"]),
        "idle_connection_timeout": st.sampled_from([None, Duration(seconds=None), Duration(seconds=1.5)]),
        "slow_start": st.sampled_from([None, SlowStart(window=3.0, aggression=1.5)]),
    }
)


@given(_OPTIONS, st.sampled_from([CONNECT_TIMEOUT, 0.25, 10.0]))
def test_eds_cluster_body_is_the_serialised_cluster(options: dict[str, Any], connect: float) -> None:
    node = Cluster(**options)
    message = cluster(node)
    if connect != CONNECT_TIMEOUT:
        message.connect_timeout.CopyFrom(seconds(connect))
    assert eds_cluster_body(node, connect) == message.SerializeToString(deterministic=True)


_FEEDS = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from(["", "10.0.0.1", "::1", "x" * 130]), st.integers(0, 70000))).map(
            tuple
        ),
        st.integers(0, 70000),
    ),
    max_size=3,
)


@given(names, _FEEDS, st.lists(st.integers(0, 1000), min_size=3, max_size=3))
def test_cluster_load_assignment_body_is_the_serialised_assignment(
    name: str, feeds: list[PortEndpoints], weights: list[int]
) -> None:
    weights = weights[: len(feeds)]
    message = cluster_load_assignment(name, feeds, weights)
    assert cluster_load_assignment_body(name, feeds, weights) == message.SerializeToString(deterministic=True)


@given(st.one_of(names, st.just("*"), st.just("*.example.com")))
def test_virtual_host_head_bytes_is_the_serialised_head(fqdn: str) -> None:
    expected = virtual_host_head(fqdn).SerializeToString(deterministic=True)
    assert virtual_host_head_bytes(fqdn) == expected
