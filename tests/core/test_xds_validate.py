"""cpx.xds.constraints.validate: PGV rules read from descriptors, Envoy's semantic rules, and the
real Envoy's verdict.

Every PGV rule kind is tried on small messages built at run time (a descriptor whose field carries
the rule, added to the default pool), since Envoy's protos use only some of them; the issue's rows
are tried on real Envoy messages made by cpx's own translation; and a corpus of good and bad
resources is put to ``envoy --mode validate`` to show the checker flags exactly what Envoy refuses.
"""

from __future__ import annotations

import functools
import itertools
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    json_format,
    message_factory,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.message import Message
from validate import validate_pb2

from cpx.xds.constraints import pgv
from cpx.xds.constraints.validate import Checker, Violation, violations

_FIELD = descriptor_pb2.FieldDescriptorProto
_TYPES = {
    "string": _FIELD.TYPE_STRING,
    "bytes": _FIELD.TYPE_BYTES,
    "bool": _FIELD.TYPE_BOOL,
    "int32": _FIELD.TYPE_INT32,
    "int64": _FIELD.TYPE_INT64,
    "uint32": _FIELD.TYPE_UINT32,
    "uint64": _FIELD.TYPE_UINT64,
    "sint32": _FIELD.TYPE_SINT32,
    "sint64": _FIELD.TYPE_SINT64,
    "fixed32": _FIELD.TYPE_FIXED32,
    "fixed64": _FIELD.TYPE_FIXED64,
    "sfixed32": _FIELD.TYPE_SFIXED32,
    "sfixed64": _FIELD.TYPE_SFIXED64,
    "double": _FIELD.TYPE_DOUBLE,
    "float": _FIELD.TYPE_FLOAT,
}
_DEPENDENCIES = [
    validate_pb2.DESCRIPTOR.name,
    duration_pb2.DESCRIPTOR.name,
    timestamp_pb2.DESCRIPTOR.name,
    any_pb2.DESCRIPTOR.name,
    wrappers_pb2.DESCRIPTOR.name,
    "google/protobuf/struct.proto",
]
_COUNTER = itertools.count()


def _field(
    name: str, number: int, kind: str, rules: Mapping[str, Any] | None, repeated: bool = False
) -> descriptor_pb2.FieldDescriptorProto:
    field = _FIELD(
        name=name, number=number, label=_FIELD.LABEL_REPEATED if repeated else _FIELD.LABEL_OPTIONAL
    )
    if kind in _TYPES:
        field.type = _TYPES[kind]
    elif kind == "google.protobuf.NullValue":
        field.type, field.type_name = _FIELD.TYPE_ENUM, "." + kind
    else:
        field.type, field.type_name = _FIELD.TYPE_MESSAGE, "." + kind
    if rules is not None:
        field.options.Extensions[validate_pb2.rules].CopyFrom(
            json_format.ParseDict(rules, validate_pb2.FieldRules())
        )
    return field


def message_with(
    kind: str,
    rules: Mapping[str, Any] | None,
    *,
    repeated: bool = False,
    map_of: tuple[str, str] | None = None,
    oneof_required: bool | None = None,
    optional: bool = False,
) -> type[Message]:
    """A message type ``M`` with one field ``f`` of ``kind`` carrying ``rules`` (a FieldRules as a dict).

    ``map_of`` makes ``f`` a map (key kind, value kind); ``oneof_required`` puts ``f`` and a second
    field ``g`` in a oneof ``o``; ``optional`` makes ``f`` a proto3 optional field.
    """
    n = next(_COUNTER)
    package = f"cpxtest.v{n}"
    file = descriptor_pb2.FileDescriptorProto(
        name=f"cpxtest/v{n}.proto", package=package, syntax="proto3", dependency=_DEPENDENCIES
    )
    message = file.message_type.add(name="M")
    if map_of is not None:
        entry = message.nested_type.add(name="FEntry")
        entry.options.map_entry = True
        entry.field.append(_field("key", 1, map_of[0], None))
        entry.field.append(_field("value", 2, map_of[1], None))
        message.field.append(_field("f", 1, f"{package}.M.FEntry", rules, repeated=True))
    else:
        message.field.append(_field("f", 1, kind, rules, repeated=repeated))
    if oneof_required is not None:
        message.oneof_decl.add(name="o").options.Extensions[validate_pb2.required] = oneof_required
        message.field.append(_field("g", 2, "string", None))
        for field in message.field:
            field.oneof_index = 0
    if optional:
        message.oneof_decl.add(name="_f")
        message.field[0].oneof_index = 0
        message.field[0].proto3_optional = True
    descriptor_pool.Default().Add(file)
    descriptor = descriptor_pool.Default().FindMessageTypeByName(f"{package}.M")
    message_class: type[Message] = message_factory.GetMessageClass(descriptor)
    return message_class


def rules_broken(message: Message) -> list[str]:
    return [v.rule for v in violations(message)]


def _duration(seconds: int, nanos: int = 0) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=seconds, nanos=nanos)


# (field kind, rules, value set on f (None: unset), the rules broken)
SCALAR_CASES: list[tuple[str, dict[str, Any], Any, list[str]]] = [
    # strings: characters vs bytes, unset means "" and is checked
    ("string", {"string": {"min_len": "2"}}, "a", ["string.min_len: 2"]),
    ("string", {"string": {"min_len": "2"}}, None, ["string.min_len: 2"]),
    ("string", {"string": {"min_len": "2"}}, "ab", []),
    ("string", {"string": {"max_len": "3"}}, "ééé", []),
    ("string", {"string": {"max_bytes": "3"}}, "ééé", ["string.max_bytes: 3"]),
    (
        "string",
        {"string": {"min_bytes": "2", "max_bytes": "3"}},
        "abcd",
        ["string.min_bytes: 2, string.max_bytes: 3"],
    ),
    ("string", {"string": {"len": "2"}}, "abc", ["string.len: 2"]),
    ("string", {"string": {"len_bytes": "2"}}, "é", []),
    ("string", {"string": {"const": "x"}}, "y", ["string.const"]),
    ("string", {"string": {"in": ["a", "b"]}}, "c", ["string.in"]),
    ("string", {"string": {"not_in": ["a", "b"]}}, "a", ["string.not_in"]),
    ("string", {"string": {"prefix": "/"}}, "a/", ["string.prefix"]),
    ("string", {"string": {"suffix": ".mmdb"}}, "a.mmdb", []),
    ("string", {"string": {"contains": "@"}}, "ab", ["string.contains"]),
    ("string", {"string": {"not_contains": "@"}}, "a@b", ["string.not_contains"]),
    ("string", {"string": {"pattern": "^[^?#]+[^?#/]$"}}, "/a?b", ["string.pattern: ^[^?#]+[^?#/]$"]),
    ("string", {"string": {"pattern": "^[^?#]+[^?#/]$"}}, "/a/b", []),
    ("string", {"string": {"pattern": "b"}}, "abc", ["string.pattern: b"]),  # PGV's C++: full match
    ("string", {"string": {"well_known_regex": "HTTP_HEADER_VALUE"}}, "a\tb", []),
    (
        "string",
        {"string": {"well_known_regex": "HTTP_HEADER_VALUE"}},
        "a\x01b",
        ["string.well_known_regex: HTTP_HEADER_VALUE (strict)"],
    ),
    ("string", {"string": {"well_known_regex": "HTTP_HEADER_VALUE", "strict": False}}, "a\x01b", []),
    (
        "string",
        {"string": {"well_known_regex": "HTTP_HEADER_VALUE", "strict": False}},
        "a\rb",
        ["string.well_known_regex: HTTP_HEADER_VALUE (not strict)"],
    ),
    ("string", {"string": {"well_known_regex": "HTTP_HEADER_NAME"}}, "x-a,b", []),
    (
        "string",
        {"string": {"well_known_regex": "HTTP_HEADER_NAME"}},
        "x a",
        ["string.well_known_regex: HTTP_HEADER_NAME (strict)"],
    ),
    (
        "string",
        {"string": {"well_known_regex": "HTTP_HEADER_NAME"}},
        "",
        ["string.well_known_regex: HTTP_HEADER_NAME (strict)"],
    ),
    ("string", {"string": {"well_known_regex": "HTTP_HEADER_NAME", "strict": False}}, "x a", []),
    ("string", {"string": {"ip": True}}, "999.1.1.1", ["string.ip"]),
    ("string", {"string": {"ip": True}}, "::1", []),
    ("string", {"string": {"ipv4": True}}, "::1", ["string.ipv4"]),
    ("string", {"string": {"ipv6": True}}, "10.0.0.1", ["string.ipv6"]),
    ("string", {"string": {"hostname": True}}, "-a.example.com", ["string.hostname"]),
    ("string", {"string": {"hostname": True}}, "a-1.example.com.", []),
    ("string", {"string": {"address": True}}, "a_b", ["string.address"]),
    ("string", {"string": {"address": True}}, "10.1.2.3", []),
    ("string", {"string": {"uuid": True}}, "00000000-0000-0000-0000-00000000000g", ["string.uuid"]),
    ("string", {"string": {"email": True}}, "nobody", ["string.email"]),
    ("string", {"string": {"uri": True}}, "/relative", ["string.uri"]),
    ("string", {"string": {"uri_ref": True}}, "/relative", []),
    ("string", {"string": {"min_len": "3", "ignore_empty": True}}, None, []),
    ("string", {"string": {"min_len": "3", "ignore_empty": True}}, "ab", ["string.min_len: 3"]),
    # bytes
    ("bytes", {"bytes": {"min_len": "1"}}, None, ["bytes.min_len: 1"]),
    ("bytes", {"bytes": {"max_len": "2"}}, b"abc", ["bytes.max_len: 2"]),
    ("bytes", {"bytes": {"pattern": "^a+$"}}, b"aab", ["bytes.pattern: ^a+$"]),
    ("bytes", {"bytes": {"prefix": "YQ=="}}, b"ba", ["bytes.prefix"]),
    ("bytes", {"bytes": {"in": ["YQ=="]}}, b"a", []),
    # numbers: one-sided, inside and outside ranges, sets, ignore_empty; unset means 0
    ("uint32", {"uint32": {"gt": 0}}, None, ["uint32.gt: 0"]),
    ("uint32", {"uint32": {"lte": 65535}}, 65536, ["uint32.lte: 65535"]),
    ("uint32", {"uint32": {"gte": 1, "lte": 10}}, 11, ["uint32.gte: 1, uint32.lte: 10"]),
    ("int32", {"int32": {"gt": 10, "lt": 5}}, 7, ["int32.gt: 10, int32.lt: 5"]),  # outside (5, 10)
    ("int32", {"int32": {"gt": 10, "lt": 5}}, 11, []),
    ("int64", {"int64": {"lt": -1}}, -1, ["int64.lt: -1"]),
    ("uint64", {"uint64": {"in": ["1", "2"]}}, 3, ["uint64.in"]),
    ("sint32", {"sint32": {"not_in": [-1]}}, -1, ["sint32.not_in"]),
    ("sint64", {"sint64": {"const": "5"}}, 4, ["sint64.const"]),
    ("fixed32", {"fixed32": {"gte": 2}}, 1, ["fixed32.gte: 2"]),
    ("fixed64", {"fixed64": {"lt": "2"}}, 1, []),
    ("sfixed32", {"sfixed32": {"gt": -3}}, -3, ["sfixed32.gt: -3"]),
    ("sfixed64", {"sfixed64": {"lte": "0"}}, 1, ["sfixed64.lte: 0"]),
    ("double", {"double": {"gte": 0, "lte": 100}}, 100.5, ["double.gte: 0, double.lte: 100"]),
    ("float", {"float": {"gt": 0.5}}, 0.5, ["float.gt: 0.5"]),
    ("uint32", {"uint32": {"gte": 10, "ignore_empty": True}}, None, []),
    # bool and enum
    ("bool", {"bool": {"const": True}}, None, ["bool.const"]),
    ("google.protobuf.NullValue", {"enum": {"defined_only": True}}, 5, ["enum.defined_only"]),
    ("google.protobuf.NullValue", {"enum": {"defined_only": True}}, None, []),
    ("google.protobuf.NullValue", {"enum": {"not_in": [0]}}, None, ["enum.not_in"]),
    ("google.protobuf.NullValue", {"enum": {"in": [0]}}, 3, ["enum.in"]),
    ("google.protobuf.NullValue", {"enum": {"const": 0}}, 3, ["enum.const"]),
    # well-known messages: Duration, Timestamp, Any, wrappers
    ("google.protobuf.Duration", {"duration": {"required": True}}, None, ["duration.required"]),
    ("google.protobuf.Duration", {"duration": {"gt": "0s"}}, _duration(0), ["duration.gt: 0s"]),
    ("google.protobuf.Duration", {"duration": {"gt": "0s"}}, None, []),  # only checked when set
    (
        "google.protobuf.Duration",
        {"duration": {"gte": "0.001s", "lte": "2s"}},
        _duration(3),
        ["duration.gte: 0.001s, duration.lte: 2s"],
    ),
    ("google.protobuf.Duration", {"duration": {"lt": "1s"}}, _duration(0, 999_999_999), []),
    ("google.protobuf.Duration", {"duration": {"in": ["1s"]}}, _duration(2), ["duration.in"]),
    ("google.protobuf.Duration", {"duration": {"not_in": ["1s"]}}, _duration(1), ["duration.not_in"]),
    ("google.protobuf.Duration", {"duration": {"const": "1s"}}, _duration(2), ["duration.const"]),
    (
        "google.protobuf.Duration",
        {"duration": {"gt": "0s"}},
        _duration(400_000_000_000),
        ["duration (valid)", "envoy.duration: protobuf range"],
    ),
    ("google.protobuf.Timestamp", {"timestamp": {"required": True}}, None, ["timestamp.required"]),
    (
        "google.protobuf.Timestamp",
        {"timestamp": {"gt": "2020-01-01T00:00:00Z"}},
        timestamp_pb2.Timestamp(seconds=0),
        ["timestamp.gt: 1577836800000000000"],
    ),
    (
        "google.protobuf.Timestamp",
        {"timestamp": {"lt_now": True}},
        timestamp_pb2.Timestamp(seconds=4_000_000_000),
        ["timestamp.lt_now"],
    ),
    ("google.protobuf.Any", {"any": {"required": True}}, None, ["any.required"]),
    (
        "google.protobuf.Any",
        {"any": {"in": ["type.googleapis.com/google.protobuf.Duration"]}},
        any_pb2.Any(type_url="type.googleapis.com/x.Y"),
        ["any.in"],
    ),
    (
        "google.protobuf.Any",
        {"any": {"not_in": ["type.googleapis.com/x.Y"]}},
        any_pb2.Any(type_url="type.googleapis.com/x.Y"),
        ["any.not_in"],
    ),
    (
        "google.protobuf.UInt32Value",
        {"uint32": {"gte": 1}},
        wrappers_pb2.UInt32Value(value=0),
        ["uint32.gte: 1"],
    ),
    ("google.protobuf.UInt32Value", {"uint32": {"gte": 1}}, None, []),
    (
        "google.protobuf.StringValue",
        {"string": {"min_len": "1"}, "message": {"required": True}},
        None,
        ["message.required"],
    ),
    (
        "google.protobuf.BoolValue",
        {"bool": {"const": False}},
        wrappers_pb2.BoolValue(value=True),
        ["bool.const"],
    ),
    # messages
    ("google.protobuf.Duration", {"message": {"required": True}}, None, ["message.required"]),
    ("google.protobuf.Duration", {"message": {"required": True}}, _duration(1), []),
]


@pytest.mark.parametrize(("kind", "rules", "value", "broken"), SCALAR_CASES)
def test_field_rules(kind: str, rules: dict[str, Any], value: Any, broken: list[str]) -> None:
    cls = message_with(kind, rules)
    message = cls()
    if value is not None:
        if isinstance(value, Message):
            message.f.CopyFrom(value)
        else:
            message.f = value
    found = violations(message)
    assert [v.rule for v in found] == broken
    assert all(v.path == "f" and v.message for v in found)


def test_messages_quote_pgv_wording() -> None:
    cls = message_with("string", {"string": {"max_bytes": "16384"}})
    (violation,) = violations(cls(f="x" * 16385))
    assert violation == Violation("f", "string.max_bytes: 16384", "value length must be at most 16384 bytes")
    assert str(violation) == "f: value length must be at most 16384 bytes [string.max_bytes: 16384]"


def test_repeated_rules() -> None:
    counted = message_with("string", {"repeated": {"min_items": "1", "max_items": "2"}}, repeated=True)
    assert rules_broken(counted()) == ["repeated.min_items: 1, repeated.max_items: 2"]
    assert rules_broken(counted(f=["a", "b", "c"])) == ["repeated.min_items: 1, repeated.max_items: 2"]
    assert rules_broken(counted(f=["a"])) == []
    unique = message_with("string", {"repeated": {"unique": True}}, repeated=True)
    (dup,) = violations(unique(f=["a", "b", "a"]))
    assert (dup.path, dup.rule) == ("f[2]", "repeated.unique")
    items = message_with("string", {"repeated": {"items": {"string": {"min_len": "2"}}}}, repeated=True)
    assert [(v.path, v.rule) for v in violations(items(f=["ab", "c"]))] == [("f[1]", "string.min_len: 2")]
    empty_ok = message_with("string", {"repeated": {"min_items": "2", "ignore_empty": True}}, repeated=True)
    assert rules_broken(empty_ok()) == []
    assert rules_broken(empty_ok(f=["a"])) == ["repeated.min_items: 2"]
    durations = message_with(
        "google.protobuf.Duration", {"repeated": {"items": {"duration": {"gt": "1s"}}}}, repeated=True
    )
    assert [(v.path, v.rule) for v in violations(durations(f=[_duration(2), _duration(1)]))] == [
        ("f[1]", "duration.gt: 1s")
    ]


def test_map_rules() -> None:
    cls = message_with(
        "",
        {"map": {"min_pairs": "1", "keys": {"string": {"min_len": "2"}}, "values": {"uint32": {"lte": 5}}}},
        map_of=("string", "uint32"),
    )
    assert rules_broken(cls()) == ["map.min_pairs: 1"]
    found = violations(cls(f={"a": 1, "bb": 9}))
    assert [(v.path, v.rule) for v in found] == [
        ('f["a"]', "string.min_len: 2"),
        ('f["bb"]', "uint32.lte: 5"),
    ]


def test_oneof_required_and_optional_fields() -> None:
    required = message_with("string", {"string": {"min_len": "2"}}, oneof_required=True)
    (missing,) = violations(required())
    assert (missing.path, missing.rule) == ("o", "oneof.required")
    assert "f, g" in missing.message
    # A oneof member is checked only when it is the one set; then even its default value is.
    assert rules_broken(required(g="x")) == []
    assert rules_broken(required(f="")) == ["string.min_len: 2"]
    optional = message_with("string", {"string": {"min_len": "2"}}, optional=True)
    assert rules_broken(optional()) == []
    assert rules_broken(optional(f="")) == ["string.min_len: 2"]


def test_nested_message_skip_and_recursion() -> None:
    inner = message_with("string", {"string": {"min_len": "2"}})
    name = inner.DESCRIPTOR.full_name
    walks = message_with(name, None)
    skips = message_with(name, {"message": {"skip": True}})
    assert [(v.path, v.rule) for v in violations(walks(f=inner(f="x")))] == [("f.f", "string.min_len: 2")]
    assert rules_broken(skips(f=inner(f="x"))) == []
    assert rules_broken(walks()) == []  # an unset message is not entered
    items = message_with(name, None, repeated=True)
    assert [v.path for v in violations(items(f=[inner(f="ok"), inner(f="x")]))] == ["f[1].f"]


def test_repeated_parts_are_walked_once_and_reported_where_they_recur() -> None:
    """Findings kept for a part (by its bytes) are the ones a fresh walk finds, at each place."""
    inner = message_with("string", {"string": {"min_len": "2"}})
    middle = message_with(inner.DESCRIPTOR.full_name, None, repeated=True)
    outer = message_with(middle.DESCRIPTOR.full_name, None, repeated=True)
    part = middle(f=[inner(f="ok"), inner(f="x")])
    message = outer(f=[part, middle(f=[inner(f="fine")]), part])
    remembering, fresh = Checker(), Checker(remember=False)
    expected = ["f[0].f[1].f", "f[2].f[1].f"]
    assert [v.path for v in fresh.violations(message)] == expected
    for _ in range(2):  # the second time, every part is remembered
        assert remembering.violations(message) == fresh.violations(message)
    assert [v.path for v in remembering.violations(part)] == ["f[1].f"]
    # Parts that never repeat stop being looked up; findings stay the same.
    for i in range(100):
        unique = middle(f=[inner(f=str(i))])
        assert remembering.violations(unique) == fresh.violations(unique)
    assert remembering.plan(middle.DESCRIPTOR).memo is None
    assert remembering.violations(message) == fresh.violations(message)


def test_any_payloads_are_checked_when_their_type_is_known() -> None:
    inner = message_with("string", {"string": {"min_len": "2"}})
    holder = message_with("google.protobuf.Any", None)
    packed = any_pb2.Any()
    packed.Pack(inner(f="x"))
    assert [(v.path, v.rule) for v in violations(holder(f=packed))] == [("f.f", "string.min_len: 2")]
    assert [v.path for v in violations(packed)] == ["f"]
    unknown = any_pb2.Any(type_url="type.googleapis.com/nobody.Knows", value=b"\x08\x01")
    assert violations(holder(f=unknown)) == []
    garbage = any_pb2.Any(type_url=packed.type_url, value=b"\xff\xff")
    assert rules_broken(holder(f=garbage)) == ["any.decode"]


def test_messages_without_rules_below_are_not_entered() -> None:
    checker = Checker()
    free = message_with("string", None)
    assert not checker.is_active(free.DESCRIPTOR)
    assert not checker.plan(free.DESCRIPTOR).active
    assert checker.is_active(message_with(free.DESCRIPTOR.full_name, None, repeated=True).DESCRIPTOR) is False
    ruled = message_with("string", {"string": {"min_len": "1"}})
    assert checker.is_active(message_with(ruled.DESCRIPTOR.full_name, None).DESCRIPTOR)


def test_extra_semantic_rules() -> None:
    cls = message_with("string", None)

    def no_x(message: Any, scope: Any) -> list[tuple[str, str, str]]:
        return [("f", "plugin.no-x", "x is not allowed")] if "x" in message.f else []

    checker = Checker().with_rules({cls.DESCRIPTOR.full_name: [no_x]})
    assert checker.violations(cls(f="x")) == [Violation("f", "plugin.no-x", "x is not allowed")]
    assert violations(cls(f="x")) == []


@pytest.mark.parametrize("pattern", [pgv._HEADER_NAME, pgv._HEADER_VALUE, pgv._HEADER_STRING])
def test_fast_header_patterns_agree_with_re2(pattern: str) -> None:
    fast = pgv._FAST[pattern]
    slow = pgv.full_match(pattern.encode())  # bytes: no fast path
    chars = [chr(c) for c in (*range(0x800), *range(0x800, 0x110000, 997)) if not 0xD800 <= c < 0xE000]
    for text in [*chars, *(f"a{c}b" for c in chars[:300]), "", ":path", "::x"]:
        assert fast(text) == slow(text.encode()), repr(text)


# -- the issue's rows, on messages made by cpx's translation ------------------------------------------


def _route(**fields: Any) -> Any:
    from cpx.builtin.filters import builtin_contributions
    from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route, ServicePort
    from cpx.xds.envoy.route import build_route

    fields.setdefault("path", PathMatch(kind=PathKind.PREFIX, value="/"))
    if not any(k in fields for k in ("direct_response", "redirect")):
        fields.setdefault(
            "clusters", (Cluster(upstream=ServicePort(namespace="default", name="svc", port=80)),)
        )
    filters = builtin_contributions().http_filters
    return build_route(Route(**fields), secure=False, fqdn="example.com", filters=filters)


def _failed_share() -> Any:
    from cpx.dag.nodes import FailedShare

    return FailedShare(weight=1)


def _headers(name: str, value: str) -> Any:
    from cpx.dag.nodes import HeadersPolicy, HeaderValue

    return HeadersPolicy(set=(HeaderValue(name=name, value=value),))


def _health_checked_cluster(**health: Any) -> Any:
    """A static cluster carrying cpx's health check (a real EDS cluster needs an ADS server)."""
    from envoy.config.cluster.v3 import cluster_pb2

    from cpx.dag.nodes import HealthCheck, UpstreamProtocol
    from cpx.xds.caches.clusters import health_check

    health.setdefault("path", "/healthz")
    out = _static_cluster("hc", "127.0.0.1")
    out.health_checks.append(health_check(HealthCheck(**health), UpstreamProtocol.HTTP1))
    assert isinstance(out, cluster_pb2.Cluster)
    return out


def _static_cluster(name: str, *addresses: str, dns: bool = False) -> Any:
    from envoy.config.cluster.v3 import cluster_pb2

    from cpx.xds.caches.endpoints import cluster_load_assignment

    cluster = cluster_pb2.Cluster(
        name=name, type=cluster_pb2.Cluster.STRICT_DNS if dns else cluster_pb2.Cluster.STATIC
    )
    cluster.connect_timeout.seconds = 2
    cluster.load_assignment.CopyFrom(cluster_load_assignment(name, [(tuple((a, 80) for a in addresses), 0)]))
    return cluster


def _keypair(
    bits: int = 2048, *, curve: Any = None, other_key_bits: int | None = None
) -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    from cpx.testing.tls import self_signed

    key = ec.generate_private_key(curve) if curve is not None else rsa.generate_private_key(65537, bits)
    pair = self_signed(key, ["example.com"])
    if not other_key_bits:
        return pair.cert_pem, pair.key_pem
    other = rsa.generate_private_key(public_exponent=65537, key_size=other_key_bits)
    pem = other.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pair.cert_pem, pem


def _secret(cert_pem: bytes, key_pem: bytes) -> Any:
    from cpx.dag.nodes import Secret
    from cpx.xds.caches.secrets import envoy_secret

    return envoy_secret(Secret(namespace="default", name="tls", cert_pem=cert_pem, key_pem=key_pem))


def _rate_limited(header: str) -> Any:
    from cpx.dag.nodes import HeaderValue, LocalRateLimit

    limit = LocalRateLimit(
        requests=1, unit_seconds=1, response_headers=(HeaderValue(name=header, value="v"),)
    )
    return _route(local_rate_limit=limit)


def _ingress_prefix(path: str) -> Any:
    from cpx.dag.nodes import PathKind, PathMatch

    return _route(path=PathMatch(kind=PathKind.SEGMENT_PREFIX, value=path))


def _query(name: str) -> Any:
    from cpx.dag.nodes import QueryMatch, QueryMatchKind

    return _route(query=(QueryMatch(name=name, kind=QueryMatchKind.EXACT, value="v"),))


def _direct(body: str) -> Any:
    from cpx.dag.nodes import DirectResponse

    return _route(direct_response=DirectResponse(status_code=200, body=body))


def _redirect(path: str) -> Any:
    from cpx.dag.nodes import Redirect

    return _route(redirect=Redirect(path=path))


def _regex_path(pattern: str) -> Any:
    from cpx.dag.nodes import PathKind, PathMatch

    return _route(path=PathMatch(kind=PathKind.REGEX, value=pattern))


def _ip_filtered(cidr: str, address: str = "") -> Any:
    """A route with an IP filter; ``address`` then replaces the range's (cpx's translation drops
    unparsable ranges, so a bad one is put in by hand)."""
    from envoy.extensions.filters.http.rbac.v3 import rbac_pb2

    from cpx.dag.nodes import IPFilter, IPRule

    route = _route(ip_filter=IPFilter(allow=True, rules=(IPRule(cidr=cidr),)))
    if address:
        packed = route.typed_per_filter_config["envoy.filters.http.rbac"]
        per_route = rbac_pb2.RBACPerRoute()
        packed.Unpack(per_route)
        per_route.rbac.rules.policies["ip-rules"].principals[0].direct_remote_ip.address_prefix = address
        packed.CopyFrom(_pack(per_route))
    return route


def _rate_limited_by_metadata(field: str) -> Any:
    route = _route()
    action = getattr(route.route.rate_limits.add().actions.add(), field)
    action.descriptor_key = "k"
    action.metadata_key.key = "m"
    action.metadata_key.path.add(key="x")
    return route


def _removes(header: str) -> Any:
    from cpx.dag.nodes import HeadersPolicy

    return _route(request_headers=HeadersPolicy(remove=(header,)))


# (label, kind of resource, builder, (path, rule) expected first; None: valid)
_CLIENT_VALIDATION = "filter_chains[0].transport_socket.typed_config.common_tls_context.validation_context"


ROWS: list[tuple[str, str, Callable[[], Any], tuple[str, str] | None]] = [
    (
        "header value CR/LF",
        "route",
        lambda: _route(request_headers=_headers("x-a", "a\r\nb")),
        ("request_headers_to_add[0].header.value", "string.well_known_regex: HTTP_HEADER_VALUE (not strict)"),
    ),
    (
        "header value over 16 KB",
        "route",
        lambda: _route(response_headers=_headers("x-a", "a" * 16385)),
        ("response_headers_to_add[0].header.value", "string.max_bytes: 16384"),
    ),
    ("header value 16 KB", "route", lambda: _route(response_headers=_headers("x-a", "a" * 16384)), None),
    (
        "direct response body over 4096",
        "route",
        lambda: _direct("a" * 4097),
        (
            "direct_response.body.inline_string",
            "envoy.direct_response: body <= max_direct_response_body_size_bytes (4096)",
        ),
    ),
    ("direct response body 4096", "route", lambda: _direct("é" * 2048), None),
    (
        "redirect path with CR",
        "route",
        lambda: _redirect("/a\rb"),
        ("redirect.path_redirect", "string.well_known_regex: HTTP_HEADER_VALUE (not strict)"),
    ),
    (
        "path rewrite with CR",
        "route",
        lambda: _route(prefix_rewrite="/a\rb"),
        ("route.prefix_rewrite", "string.well_known_regex: HTTP_HEADER_VALUE (not strict)"),
    ),
    (
        "query parameter name over 1 KB",
        "route",
        lambda: _query("q" * 1025),
        ("match.query_parameters[0].name", "string.max_bytes: 1024"),
    ),
    (
        "local rate limit response header Host",
        "route",
        lambda: _rate_limited("Host"),
        (
            'typed_per_filter_config["envoy.filters.http.local_ratelimit"].response_headers_to_add[0].header.key',
            "envoy.header: not :-prefixed or host",
        ),
    ),
    ("local rate limit response header", "route", lambda: _rate_limited("x-limited"), None),
    (
        "request header named :authority",
        "route",
        lambda: _route(request_headers=_headers(":authority", "a")),
        ("request_headers_to_add[0].header.key", "envoy.header: not :-prefixed or host"),
    ),
    (
        "removed header host",
        "route",
        lambda: _removes("host"),
        ("request_headers_to_remove[0]", "envoy.header: not :-prefixed or host"),
    ),
    (
        "Ingress Prefix path /a?b",
        "route",
        lambda: _ingress_prefix("/a?b"),
        ("match.path_separated_prefix", "string.pattern: ^[^?#]+[^?#/]$"),
    ),
    ("Ingress Prefix path /a/b", "route", lambda: _ingress_prefix("/a/b/"), None),
    (
        # Envoy's default limit is 100; cpx's bootstrap raises it to 1 MiB (as Contour's does),
        # and so do these checks and the cross-check's bootstrap.
        "regex path over Envoy's default program size, within cpx's",
        "route",
        lambda: _regex_path("/(a+b+c+d+){10}"),
        None,
    ),
    (
        "regex path that does not compile",
        "route",
        lambda: _regex_path("/(a"),
        ("match.safe_regex.regex", "envoy.regex: RE2 compiles"),
    ),
    ("regex path", "route", lambda: _regex_path("/v[0-9]+/.*"), None),
    (
        "IP filter on a malformed address",
        "route",
        lambda: _ip_filtered("10.0.0.0/8", address="999.1.1.1"),
        (
            'typed_per_filter_config["envoy.filters.http.rbac"].rbac.rules.policies["ip-rules"]'
            ".principals[0].direct_remote_ip.address_prefix",
            "envoy.address: IP literal",
        ),
    ),
    ("IP filter", "route", lambda: _ip_filtered("10.0.0.0/8"), None),
    (
        "a deprecated field Envoy disallows by default",
        "route",
        lambda: _rate_limited_by_metadata("dynamic_metadata"),
        ("route.rate_limits[0].actions[0].dynamic_metadata", "envoy.disallowed_by_default"),
    ),
    ("its replacement", "route", lambda: _rate_limited_by_metadata("metadata"), None),
    (
        "two virtual hosts for one FQDN in different case",
        "routes",
        lambda: _route_configuration(["a.example.com"], ["A.example.com"]),
        ("virtual_hosts[1].domains[0]", "envoy.domains: unique"),
    ),
    (
        "two wildcard virtual hosts",
        "routes",
        lambda: _route_configuration(["*"], ["*"]),
        ("virtual_hosts[1].domains[0]", "envoy.domains: one wildcard"),
    ),
    (
        "distinct virtual hosts",
        "routes",
        lambda: _route_configuration(["a.example.com"], ["*.example.com"]),
        None,
    ),
    (
        "weights summing past 2^32 - 1",
        "route",
        lambda: _weighted(4_294_967_295, 1),
        ("route.weighted_clusters.clusters", "envoy.weights: sum <= 4294967295"),
    ),
    ("weights summing to 2^32 - 1", "route", lambda: _weighted(4_294_967_294, 1), None),
    ("a failed share next to a cluster", "route", lambda: _route(failed_share=_failed_share()), None),
    (
        "two TLS filter chains for one SNI name in different case",
        "listener",
        lambda: _sni_listener(["a.example.com"], ["A.example.com"]),
        ("filter_chains[1].filter_chain_match", "envoy.listener: distinct matches"),
    ),
    (
        "a partial wildcard SNI name",
        "listener",
        lambda: _sni_listener(["a*.example.com"]),
        (
            "filter_chains[0].filter_chain_match.server_names[0]",
            "envoy.listener: whole-label wildcard server names",
        ),
    ),
    ("distinct SNI names", "listener", lambda: _sni_listener(["a.example.com"], ["*.example.com"], []), None),
    (
        "health check timeout clamped to protobuf's maximum",
        "cluster",
        lambda: _health_checked_cluster(timeout=float(pgv.MAX_DURATION_SECONDS)),
        ("health_checks[0].timeout", "envoy.duration: seconds <= 9223372035"),
    ),
    (
        "health check interval beyond Envoy's maximum",
        "cluster",
        lambda: _health_checked_cluster(interval=9_223_372_036.0),
        ("health_checks[0].interval", "envoy.duration: seconds <= 9223372035"),
    ),
    (
        "health check host with LF",
        "cluster",
        lambda: _health_checked_cluster(host="a\nb"),
        ("health_checks[0].http_health_check.host", "string.well_known_regex: HTTP_HEADER_VALUE (strict)"),
    ),
    (
        "health check path with CR",
        "cluster",
        lambda: _health_checked_cluster(path="/a\rb"),
        ("health_checks[0].http_health_check.path", "string.well_known_regex: HTTP_HEADER_VALUE (strict)"),
    ),
    ("health check", "cluster", _health_checked_cluster, None),
    (
        "EndpointSlice address 999.1.1.1",
        "cluster",
        lambda: _static_cluster("e", "10.0.0.1", "999.1.1.1"),
        (
            "load_assignment.endpoints[0].lb_endpoints[1].endpoint.address.socket_address.address",
            "envoy.address: IP literal",
        ),
    ),
    (
        "endpoint address with a leading zero",
        "cluster",
        lambda: _static_cluster("e", "01.2.3.4"),
        (
            "load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address",
            "envoy.address: IP literal",
        ),
    ),
    ("IPv6 endpoints", "cluster", lambda: _static_cluster("e", "::1", "fe80::1%lo"), None),
    (
        "ExternalName (STRICT_DNS) names",
        "cluster",
        lambda: _static_cluster("e", "example.com", dns=True),
        None,
    ),
    (
        "TLS Secret with a 1024-bit RSA key",
        "secret",
        lambda: _secret(*_keypair(1024)),
        ("tls_certificate.certificate_chain", "envoy.tls: RSA key >= 2048 bits"),
    ),
    (
        "TLS Secret whose key is not the certificate's",
        "secret",
        lambda: _secret(*_keypair(other_key_bits=2048)),
        ("tls_certificate.private_key", "envoy.tls: private key matches certificate"),
    ),
    (
        "TLS Secret that is not PEM",
        "secret",
        lambda: _secret(b"not a certificate", b"not a key"),
        ("tls_certificate.certificate_chain", "envoy.tls: certificate chain parses"),
    ),
    (
        "TLS Secret with a secp256k1 key",
        "secret",
        lambda: _secret(*_keypair(curve=_curve("SECP256K1"))),
        ("tls_certificate.certificate_chain", "envoy.tls: ECDSA curve P-256, P-384 or P-521"),
    ),
    ("TLS Secret, RSA 2048", "secret", lambda: _secret(*_keypair()), None),
    (
        "client CA bundle that is not PEM",
        "tls-listener",
        lambda: _tls_listener("served", client_ca_pem=b"not a certificate"),
        (
            "filter_chains[0].transport_socket.typed_config.common_tls_context.validation_context.trusted_ca",
            "envoy.tls: trusted CA parses",
        ),
    ),
    ("client CA bundle", "tls-listener", lambda: _tls_listener("served", client_ca_pem=_keypair()[0]), None),
    (
        "client CRL without a CA",
        "tls-listener",
        lambda: _tls_listener("served", skip_verification=True, crl=_crl_secret(_test_crl())),
        (_CLIENT_VALIDATION + ".crl", "envoy.tls: CRL needs a trusted CA"),
    ),
    (
        "client CA and CRL, leaf only, optional",
        "tls-listener",
        lambda: _tls_listener(
            "served",
            client_ca_pem=_test_ca_pem(),
            crl=_crl_secret(_test_crl() + _test_crl()),
            crl_only_verify_leaf=True,
            optional=True,
        ),
        None,
    ),
    (
        "client certificate not verified",
        "tls-listener",
        lambda: _tls_listener("served", skip_verification=True),
        None,
    ),
    ("TLS Secret, P-384", "secret", lambda: _secret(*_keypair(curve=_curve("SECP384R1"))), None),
]


def _test_ca_pem() -> bytes:
    from cpx.testing.tls import default_ca

    return default_ca().cert_pem


def _test_crl() -> bytes:
    from cpx.testing.tls import default_ca, issue_cert, make_crl

    return make_crl(default_ca(), [issue_cert(["revoked.example.com"], client=True)])


def _crl_secret(pem: bytes) -> Any:
    from cpx.dag.nodes import Secret

    return Secret(namespace="default", name="crl", crl_pem=pem)


def _curve(name: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return getattr(ec, name)()


@functools.cache
def _built(label: str) -> Any:
    builder = next(b for row_label, _, b, _ in ROWS if row_label == label)
    return builder()


@pytest.mark.parametrize(
    ("label", "kind", "expected"), [(r[0], r[1], r[3]) for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_issue_rows(label: str, kind: str, expected: tuple[str, str] | None) -> None:
    found = violations(_built(label))
    if expected is None:
        assert found == []
    else:
        assert found, f"{label}: nothing found"
        assert (found[0].path, found[0].rule) == expected, found


def test_direct_response_limit_follows_the_route_configuration() -> None:
    from envoy.config.route.v3 import route_pb2

    config = route_pb2.RouteConfiguration(name="r")
    config.virtual_hosts.add(name="v", domains=["*"]).routes.append(_direct("a" * 5000))
    (found,) = violations(config)
    assert found.path == "virtual_hosts[0].routes[0].direct_response.body.inline_string"
    assert found.message == "response body size is 5000 bytes; maximum is 4096"
    config.max_direct_response_body_size_bytes.value = 8192
    assert violations(config) == []


def test_a_bad_header_is_found_through_the_listener() -> None:
    listener = _listener(_route(request_headers=_headers("x-a", "a\nb")))
    (found,) = violations(listener)
    assert found.path == (
        "filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0]"
        ".request_headers_to_add[0].header.value"
    )


# -- cross-check with the real Envoy -------------------------------------------------------------------


def _pack(message: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def _route_configuration(*domains: list[str], routes: tuple[Any, ...] = ()) -> Any:
    """A RouteConfiguration with one virtual host per list of domains, each serving ``routes``."""
    from envoy.config.route.v3 import route_pb2

    config = route_pb2.RouteConfiguration(name="r")
    config.validate_clusters.value = False  # route clusters are CDS's business, not this test's
    for index, names in enumerate(domains):
        config.virtual_hosts.add(name=f"v{index}", domains=names).routes.extend(routes or (_direct("ok"),))
    return config


def _weighted(*weights: int) -> Any:
    from cpx.dag.nodes import Cluster, ServicePort

    clusters = tuple(
        Cluster(upstream=ServicePort(namespace="default", name=f"s{i}", port=80), weight=w)
        for i, w in enumerate(weights)
    )
    return _route(clusters=clusters)


def _listener(*routes: Any, config: Any = None) -> Any:
    """cpx's HTTP connection manager (with its policy filters) serving ``routes`` inline."""
    from envoy.config.listener.v3 import listener_pb2
    from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2

    from cpx.builtin.filters import builtin_contributions
    from cpx.records import FilterSite
    from cpx.xds.envoy.listener import HTTPSettings, http_connection_manager, listener_head
    from cpx.xds.httpfilters import connection_manager_filters

    site = FilterSite(listener="http", virtual_host=None, secure=False)
    filters = connection_manager_filters(builtin_contributions().http_filters, site)
    manager = http_connection_manager_pb2.HttpConnectionManager()
    manager_filter = http_connection_manager("r", "http", HTTPSettings(), filters)
    manager_filter.typed_config.Unpack(manager)
    manager.route_config.CopyFrom(
        config if config is not None else _route_configuration(["*"], routes=routes)
    )
    manager_filter.typed_config.CopyFrom(_pack(manager))
    listener = listener_head("http", "127.0.0.1", 0)
    listener.filter_chains.add().filters.append(manager_filter)
    assert isinstance(listener, listener_pb2.Listener)
    return listener


def _sni_listener(*names: list[str]) -> Any:
    """A TLS-inspecting listener with one TCP-proxy filter chain per list of SNI names."""
    from cpx.dag.nodes import Cluster, ServicePort, TCPProxy
    from cpx.xds.envoy.listener import filter_chain, listener_head, tcp_proxy_filter

    proxy = tcp_proxy_filter(
        "tcp", TCPProxy(clusters=(Cluster(upstream=ServicePort(namespace="d", name="c", port=1)),))
    )
    listener = listener_head("tls", "127.0.0.1", 0)
    for server_names in names:
        listener.filter_chains.append(
            filter_chain([proxy], server_names=server_names, transport_protocol="tls")
        )
    return listener


def _tls_listener(secret_name: str, client_ca_pem: bytes = b"", **validation: Any) -> Any:
    """cpx's HTTPS listener serving the static secret ``secret_name`` (checking client
    certificates against ``client_ca_pem`` if given, or as ``validation``, DownstreamValidation's
    fields, says)."""
    from envoy.config.listener.v3 import listener_pb2
    from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

    from cpx.dag.nodes import DownstreamValidation, Secret, TLSParams
    from cpx.xds.envoy.listener import HTTPSettings, downstream_tls, listener_head

    secret = Secret(namespace="default", name="tls")
    checks = None
    if client_ca_pem:
        validation["ca"] = Secret(namespace="default", name="ca", ca_pem=client_ca_pem)
    if validation:
        checks = DownstreamValidation(**validation)
    transport = downstream_tls(secret, TLSParams(), HTTPSettings(), ["h2"], checks)

    context = tls_pb2.DownstreamTlsContext()
    transport.typed_config.Unpack(context)
    sds = context.common_tls_context.tls_certificate_sds_secret_configs[0]
    sds.name = secret_name
    sds.ClearField("sds_config")  # a name alone refers to a static secret
    transport.typed_config.CopyFrom(_pack(context))
    listener = listener_head("https", "127.0.0.1", 0)
    chain = listener.filter_chains.add()
    chain.filters.append(_listener(_route()).filter_chains[0].filters[0])
    chain.transport_socket.CopyFrom(transport)
    assert isinstance(listener, listener_pb2.Listener)
    return listener


def _bootstrap(kind: str, resource: Any) -> bytes:
    from envoy.config.bootstrap.v3 import bootstrap_pb2

    from cpx.xds.envoy.bootstrap import RE2_RUNTIME

    bootstrap = bootstrap_pb2.Bootstrap()
    layer = bootstrap.layered_runtime.layers.add(name="static")
    layer.static_layer.update(RE2_RUNTIME)  # the runtime cpx's bootstrap gives every Envoy
    static = bootstrap.static_resources
    if kind == "route":
        static.listeners.append(_listener(resource))
    elif kind == "routes":
        static.listeners.append(_listener(config=resource))
    elif kind == "listener":
        static.listeners.append(resource)
        static.clusters.append(_static_cluster("c", "127.0.0.1"))
    elif kind == "cluster":
        static.clusters.append(resource)
    elif kind == "tls-listener":
        static.listeners.append(resource)
        secret = _secret(*_keypair())
        secret.name = "served"
        static.secrets.append(secret)
    else:
        static.secrets.append(resource)
        static.listeners.append(_tls_listener(resource.name))
    return bytes(bootstrap.SerializeToString())


def _envoy_accepts(envoy: str, config: bytes, workdir: Path) -> tuple[bool, str]:
    with tempfile.NamedTemporaryFile(suffix=".pb", dir=workdir, delete=False) as file:
        file.write(config)
    command = [envoy, "--mode", "validate", "-c", file.name, "--disable-hot-restart", "-l", "critical"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode == 0, (done.stdout + done.stderr)[-400:]


def test_checker_flags_exactly_what_envoy_refuses(tmp_path: Path) -> None:
    """Each row alone in a static bootstrap: the checker finds something iff ``envoy --mode validate``
    refuses it (good rows prove the checker invents nothing; Envoy validates in ~0.1 s a file)."""
    from cpx.testing.envoy import envoy_binary

    try:
        envoy = envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    configs = {label: _bootstrap(kind, _built(label)) for label, kind, _, _ in ROWS}
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = dict(
            zip(
                configs, pool.map(lambda c: _envoy_accepts(envoy, c, tmp_path), configs.values()), strict=True
            )
        )
    disagreements = []
    for label, kind, _, _ in ROWS:
        accepted, log = verdicts[label]
        flagged = violations(_built(label))
        if accepted == bool(flagged):
            disagreements.append(
                f"{label} ({kind}): envoy {'accepts' if accepted else 'refuses'} {log!r}; checker {flagged}"
            )
    assert not disagreements, "\n".join(disagreements)


def test_everything_cpx_generates_passes() -> None:
    """The checker invents nothing: a DAG using every feature translates into clean resources."""
    from cpx.builtin.filters import with_builtin_filters
    from cpx.config import Config
    from cpx.dag.dag import DAG, Protocol
    from cpx.dag.nodes import (
        CircuitBreakers,
        ClientCertificateDetails,
        Cluster,
        CookieRewrite,
        CORSPolicy,
        DirectResponse,
        DownstreamValidation,
        Duration,
        HashPolicy,
        HeaderMatch,
        HeaderMatchKind,
        HeadersPolicy,
        HeaderValue,
        HealthCheck,
        InternalRedirectPolicy,
        IPFilter,
        IPRule,
        LocalRateLimit,
        MirrorPolicy,
        PathKind,
        PathMatch,
        QueryMatch,
        QueryMatchKind,
        Redirect,
        RetryPolicy,
        Route,
        Secret,
        ServicePort,
        SlowStart,
        TCPProxy,
        TimeoutPolicy,
        UpstreamProtocol,
        UpstreamValidation,
    )
    from cpx.ops import certgen
    from cpx.testing.tls import make_crl
    from cpx.xds.caches.clusters import ClusterCache
    from cpx.xds.caches.listeners import ListenerCache
    from cpx.xds.caches.routes import RouteCache
    from cpx.xds.caches.secrets import SecretCache

    ca = certgen.new_ca()
    pair = certgen.issue(ca, "example.com", dns_names=["example.com", "*.wild.com"])
    secret = Secret(namespace="default", name="tls", cert_pem=pair.cert_pem, key_pem=pair.key_pem)
    ca_secret = Secret(namespace="default", name="ca", ca_pem=ca.cert_pem)
    up = ServicePort(
        namespace="default", name="svc", port=80, circuit_breakers=CircuitBreakers(max_connections=9)
    )
    checked = Cluster(
        upstream=up,
        health_check=HealthCheck(path="/healthz", expected_statuses=((200, 300),)),
        slow_start=SlowStart(window=10.0),
        idle_connection_timeout=Duration(seconds=60.0),
        request_headers=HeadersPolicy(set=(HeaderValue(name="x-c", value="1"),)),
    )
    tls_up = Cluster(
        upstream=ServicePort(namespace="default", name="tls", port=443, protocol=UpstreamProtocol.H2),
        validation=UpstreamValidation(ca=ca_secret, subject_names=("svc.example.com",)),
        sni="svc.example.com",
    )
    external = Cluster(
        upstream=ServicePort(namespace="default", name="ext", port=80, external_name="example.org")
    )
    dag = DAG()
    dag.ensure_listener("http", Protocol.HTTP, "0.0.0.0", 8080)
    dag.ensure_listener("https", Protocol.HTTPS, "::", 8443)
    routes = [
        Route(path=PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/api/"), clusters=(checked, tls_up)),
        Route(
            path=PathMatch(kind=PathKind.REGEX, value="/v[0-9]+/.*"),
            clusters=(external,),
            websocket=True,
            headers=(HeaderMatch(name="x-a", kind=HeaderMatchKind.CONTAINS, value="b", ignore_case=True),),
            query=(QueryMatch(name="q", kind=QueryMatchKind.PRESENT),),
            timeout_policy=TimeoutPolicy(response=Duration(seconds=None), idle=Duration(seconds=30.0)),
            retry_policy=RetryPolicy(retry_on="5xx", num_retries=3, per_try_timeout=Duration(seconds=1.5)),
            mirrors=(MirrorPolicy(cluster=tls_up, percent=12.5),),
            hash_policies=(HashPolicy(header="x-user"), HashPolicy(cookie="s", cookie_ttl=60.0)),
            internal_redirect=InternalRedirectPolicy(redirect_response_codes=(301, 302)),
            prefix_rewrite="/",
            request_headers=HeadersPolicy(
                set=(HeaderValue(name="x-s", value="%REQ(x-a)%"),),
                remove=("x-b",),
                host_rewrite="up.example.com",
            ),
            response_headers=HeadersPolicy(set=(HeaderValue(name="x-r", value="1"),)),
            cookie_rewrites=(CookieRewrite(name="s", path="/", same_site="Strict"),),
            local_rate_limit=LocalRateLimit(requests=5, unit_seconds=60, burst=2, status_code=503),
            ip_filter=IPFilter(
                allow=True, rules=(IPRule(cidr="10.0.0.0/8"), IPRule(cidr="::1/128", remote=True))
            ),
        ),
        Route(
            path=PathMatch(kind=PathKind.EXACT, value="/moved"),
            redirect=Redirect(scheme="https", port=443, path="/new"),
        ),
        Route(
            path=PathMatch(kind=PathKind.PREFIX, value="/gone"),
            direct_response=DirectResponse(status_code=410, body="gone"),
        ),
        Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), https_redirect=True, clusters=(checked,)),
    ]
    for fqdn in ("example.com", "*.wild.com"):
        vhost = dag.ensure_virtual_host("http", fqdn)
        vhost.cors = CORSPolicy(
            allow_origin=("*", "regex:https://[a-z]+\\.example\\.org"), allow_methods=("GET",)
        )
        secure = dag.ensure_secure_virtual_host("https", fqdn)
        secure.secret = secret
        secure.downstream_validation = DownstreamValidation(
            ca=ca_secret,
            crl=Secret(namespace="default", name="crl", crl_pem=make_crl(ca)),
            forward_client_certificate=ClientCertificateDetails(subject=True, cert=True, dns=True),
        )
        for route in routes:
            vhost.add_route(route)
            secure.add_route(route)
    passthrough = dag.ensure_secure_virtual_host("https", "pass.example.com")
    passthrough.passthrough = True
    passthrough.tcp_proxy = TCPProxy(clusters=(checked,))
    terminated = dag.ensure_secure_virtual_host("https", "tcp.example.com")
    terminated.secret, terminated.tcp_proxy = secret, TCPProxy(clusters=(tls_up,))
    dag.prune()
    checked_count = 0
    for cache in (
        with_builtin_filters(ListenerCache(Config())),
        with_builtin_filters(RouteCache(Config())),
        ClusterCache(Config()),
        SecretCache(Config()),
    ):
        cache.on_change(dag)
        for name, entry in cache.contents().items():
            assert violations(entry.message()) == [], name
            checked_count += 1
    assert checked_count >= 10


def test_deep_nesting_is_a_violation_not_a_crash() -> None:
    from envoy.config.rbac.v3 import rbac_pb2

    root = rbac_pb2.Permission()
    current = root
    for _ in range(2000):
        current = current.not_rule
    current.any = True
    assert [v.rule for v in violations(root)] == ["protobuf.depth"]
    packed = any_pb2.Any()
    packed.Pack(root)  # as a filter config: Envoy's parser (and upb's) stops at 100 levels
    assert [v.rule for v in violations(packed)] in (["any.decode"], ["protobuf.depth"])


def test_serialised_resources() -> None:
    from cpx.xds import resource
    from cpx.xds.constraints.validate import resource_violations

    bad = _route_configuration(["a.example.com"], ["A.example.com"])
    assert [v.rule for v in resource_violations(resource.ROUTE, bad.SerializeToString())] == [
        "envoy.domains: unique"
    ]
    assert [v.rule for v in resource_violations(resource.ROUTE, b"\xff")] == ["protobuf.decode"]


def test_every_envoy_v3_message_type_compiles_and_checks() -> None:
    """Every rule in every Envoy v3 proto compiles, and an empty message of every type is checked
    without an error (what an empty one breaks is reported, never raised)."""
    import importlib
    import pkgutil

    import envoy

    checker = Checker()
    checked = 0

    def with_nested(descriptor: Any) -> Any:
        yield descriptor
        for nested in descriptor.nested_types:
            if not nested.GetOptions().map_entry:
                yield from with_nested(nested)

    for info in pkgutil.walk_packages(envoy.__path__, "envoy."):
        if not info.name.endswith("_pb2") or ".v2" in info.name or "v2alpha" in info.name:
            continue
        module = importlib.import_module(info.name)
        for top in module.DESCRIPTOR.message_types_by_name.values():
            for descriptor in with_nested(top):
                found = checker.violations(message_factory.GetMessageClass(descriptor)())
                assert all(isinstance(v, Violation) for v in found)
                checked += 1
    assert checked > 1000
