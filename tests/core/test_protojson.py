"""``message_json`` renders as ``json_format.MessageToDict`` does, with every map in key order."""

from __future__ import annotations

import json
from typing import Any

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.type.v3 import percent_pb2
from google.protobuf import any_pb2, duration_pb2, json_format, struct_pb2, wrappers_pb2
from google.protobuf.message import Message

from cpx.xds.protojson import message_json


def _packed(message: Message) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(message)
    return out


def _cluster() -> cluster_pb2.Cluster:
    cluster = cluster_pb2.Cluster(
        name="c",
        lb_policy=cluster_pb2.Cluster.LEAST_REQUEST,  # an enum
        dns_lookup_family=cluster_pb2.Cluster.V4_ONLY,
        connect_timeout=duration_pb2.Duration(seconds=2, nanos=500_000_000),
        per_connection_buffer_limit_bytes=wrappers_pb2.UInt32Value(value=0),  # a wrapper at its default
        dns_refresh_rate=duration_pb2.Duration(seconds=5),
    )
    cluster.metadata.filter_metadata["z"].update({"b": 1.5, "a": [True, None, "x"], "n": {"y": 1, "x": 2}})
    cluster.metadata.filter_metadata["a"].update({"k": "v"})
    cluster.typed_extension_protocol_options["z.ext"].CopyFrom(_packed(wrappers_pb2.BoolValue(value=True)))
    cluster.typed_extension_protocol_options["a.ext"].CopyFrom(_packed(struct_pb2.Struct()))
    return cluster


def _route_configuration() -> route_pb2.RouteConfiguration:
    route = route_components_pb2.Route(name="r")
    route.match.prefix = "/"
    route.match.runtime_fraction.default_value.CopyFrom(
        percent_pb2.FractionalPercent(numerator=5, denominator=percent_pb2.FractionalPercent.TEN_THOUSAND)
    )
    route.route.cluster = "c"
    route.route.max_stream_duration.grpc_timeout_header_max.FromSeconds(3)
    route.route.retry_policy.num_retries.value = 3
    route.route.retry_policy.retry_back_off.base_interval.FromMilliseconds(25)
    route.route.hash_policy.add().header.header_name = "x"
    route.typed_per_filter_config["z"].CopyFrom(_packed(percent_pb2.Percent(value=12.5)))  # a double
    route.typed_per_filter_config["a"].CopyFrom(_packed(percent_pb2.Percent(value=0.0)))
    route.request_headers_to_add.add(
        header=base_pb2.HeaderValue(key="k", value="v"),
        append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
    )
    config = route_pb2.RouteConfiguration(name="rc", max_direct_response_body_size_bytes={"value": 1024})
    host = config.virtual_hosts.add(name="vh", domains=["b", "a"])
    host.routes.append(route)
    host.typed_per_filter_config["m"].CopyFrom(_packed(route))  # an Any holding maps of its own
    return config


def _secret() -> secret_pb2.Secret:
    secret = secret_pb2.Secret(name="s")
    secret.tls_certificate.certificate_chain.inline_bytes = b"\x00\xffcert"  # bytes: base64
    secret.tls_certificate.private_key.inline_string = "key"
    return secret


@pytest.mark.parametrize("make", [_cluster, _route_configuration, _secret])
def test_as_the_runtime_renders_with_maps_sorted(make: Any) -> None:
    message = make()
    assert message_json(message) == json_format.MessageToDict(message)  # dicts compare in any order


def test_fields_in_the_runtime_order() -> None:
    route = _route_configuration().virtual_hosts[0].routes[0]
    route.ClearField("typed_per_filter_config")  # its map's order is the runtime's whim
    for message in (route, _secret()):
        assert json.dumps(message_json(message)) == json.dumps(json_format.MessageToDict(message))


def test_map_entries_in_key_order_at_every_depth() -> None:
    cluster = message_json(_cluster())
    assert list(cluster["metadata"]["filterMetadata"]) == ["a", "z"]
    assert list(cluster["typedExtensionProtocolOptions"]) == ["a.ext", "z.ext"]
    assert cluster["typedExtensionProtocolOptions"]["z.ext"] == {
        "@type": "type.googleapis.com/google.protobuf.BoolValue",
        "value": True,
    }
    config = message_json(_route_configuration())
    host = config["virtualHosts"][0]
    assert list(host["routes"][0]["typedPerFilterConfig"]) == ["a", "z"]
    inner = host["typedPerFilterConfig"]["m"]
    assert next(iter(inner)) == "@type"
    assert list(inner["typedPerFilterConfig"]) == ["a", "z"]


def test_scalars_as_the_runtime_writes_them() -> None:
    cluster = message_json(_cluster())
    assert cluster["lbPolicy"] == "LEAST_REQUEST"
    assert cluster["connectTimeout"] == "2.500s"
    assert cluster["perConnectionBufferLimitBytes"] == 0
    route = message_json(_route_configuration())["virtualHosts"][0]["routes"][0]
    assert route["match"]["runtimeFraction"]["defaultValue"] == {
        "numerator": 5,
        "denominator": "TEN_THOUSAND",
    }
    assert route["typedPerFilterConfig"]["z"]["value"] == 12.5
    secret = message_json(_secret())
    assert secret["tlsCertificate"]["certificateChain"]["inlineBytes"] == "AP9jZXJ0"


def test_repeated_parts_render_alike_and_independently() -> None:
    # Parts met again come from the by-content memo: the same JSON, each time a fresh object.
    config = _route_configuration()
    for i in range(3):
        config.virtual_hosts.add().CopyFrom(config.virtual_hosts[0])
        config.virtual_hosts[-1].name = f"vh{i}"
    first = message_json(config)
    assert first == json_format.MessageToDict(config)
    first["virtualHosts"][1]["routes"][0]["match"]["prefix"] = "changed"
    again = message_json(config)
    assert again == json_format.MessageToDict(config)
    hosts = again["virtualHosts"]
    assert hosts[1]["routes"][0] is not hosts[2]["routes"][0]
    assert [h["routes"] for h in hosts[1:]] == [hosts[0]["routes"]] * 3
