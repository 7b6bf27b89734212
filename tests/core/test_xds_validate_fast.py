"""cpx.xds.constraints.validate: the pass check (``_passes``) against the walk it stands in for.

A check first asks whether a message surely breaks no rule, and walks it (wording the findings)
only when that answer is "maybe". Here random Envoy messages, about half of them breaking some
rule, get the same findings as from a checker that always walks, and the pass check answers
"passes" exactly when the walk finds nothing.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2, scoped_route_pb2
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2
from envoy.extensions.filters.http.lua.v3 import lua_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from cpx.xds.constraints import validate
from cpx.xds.constraints.validate import Checker

_STRINGS = ("", "a", "host.example.com", "x-header", ":path", "bad\nvalue", "a b", "*", "1.2.3.4", "é" * 3)
_INTS = {
    FieldDescriptor.CPPTYPE_INT32: (0, 1, -1, 65535, 65536, 2**31 - 1, -(2**31)),
    FieldDescriptor.CPPTYPE_INT64: (0, 1, -1, 2**40, -(2**62)),
    FieldDescriptor.CPPTYPE_UINT32: (0, 1, 100, 65536, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 1, 2**40, 2**64 - 1),
}
_FLOATS = (0.0, -0.0, 0.5, 1.0, -1.0, 100.0, math.inf, math.nan)
# Payloads an Any may carry: known types with rules, and what cannot be checked or decoded.
_PAYLOADS = (lua_pb2.Lua, local_rate_limit_pb2.LocalRateLimit, route_components_pb2.RetryPolicy)
_ROOTS = (
    route_components_pb2.Route,
    route_components_pb2.VirtualHost,
    route_pb2.RouteConfiguration,
    scoped_route_pb2.ScopedRouteConfiguration,
    cluster_pb2.Cluster,
    endpoint_pb2.ClusterLoadAssignment,
    listener_components_pb2.FilterChain,
    listener_pb2.Listener,
    http_connection_manager_pb2.HttpConnectionManager,
    secret_pb2.Secret,
)


class _WalkOnly(Checker):
    """A checker that never takes the pass check's word: every message is walked."""

    def _passes(self, message: Message) -> bool:
        return False


def _scalar(field: FieldDescriptor, rng: random.Random) -> Any:
    cpp = field.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_STRING:
        text = rng.choice(_STRINGS)
        return text.encode() if field.type == FieldDescriptor.TYPE_BYTES else text
    if cpp == FieldDescriptor.CPPTYPE_BOOL:
        return rng.random() < 0.5
    if cpp == FieldDescriptor.CPPTYPE_ENUM:
        return rng.choice([v.number for v in field.enum_type.values])
    if cpp in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        return rng.choice(_FLOATS)
    return rng.choice(_INTS[cpp])


def _fill(message: Message, rng: random.Random, depth: int) -> None:
    """Set a random few of ``message``'s fields, nested down to ``depth`` more levels."""
    descriptor: Descriptor = message.DESCRIPTOR
    if descriptor.full_name == "google.protobuf.Any":
        _fill_any(message, rng, depth)
        return
    if descriptor.full_name == "google.protobuf.Duration":
        message.seconds = rng.choice((0, 1, 30, -1, 10**10, 315_576_000_001))
        message.nanos = rng.choice((0, 0, 5, -1, 999_999_999))
        return
    for field in descriptor.fields:
        if rng.random() > 0.3:
            continue
        _set(message, field, rng, depth)


def _set(message: Message, field: FieldDescriptor, rng: random.Random, depth: int) -> None:
    target = getattr(message, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        entry = field.message_type.fields_by_name
        key_field, value_field = entry["key"], entry["value"]
        for _ in range(rng.randint(0, 2)):
            key = _scalar(key_field, rng)
            if value_field.message_type is None:
                target[key] = _scalar(value_field, rng)
            elif depth > 0:
                _fill(target[key], rng, depth - 1)
        return
    if field.is_repeated:
        for _ in range(rng.randint(0, 3)):
            if field.message_type is None:
                target.append(_scalar(field, rng))
            elif depth > 0:
                _fill(target.add(), rng, depth - 1)
        return
    if field.message_type is None:
        setattr(message, field.name, _scalar(field, rng))
    elif depth > 0:
        target.SetInParent()  # set even when nothing below is
        _fill(target, rng, depth - 1)


def _fill_any(message: Message, rng: random.Random, depth: int) -> None:
    choice = rng.random()
    if choice < 0.1:
        message.type_url, message.value = "type.googleapis.com/nobody.Knows", b"\x08\x01"
    elif choice < 0.2:
        message.type_url = "type.googleapis.com/" + lua_pb2.Lua.DESCRIPTOR.full_name
        message.value = b"\xff\xff"  # not a Lua
    else:
        payload = rng.choice(_PAYLOADS)()
        _fill(payload, rng, max(depth - 1, 0))
        message.Pack(payload)


def _messages(seed: int, count: int) -> list[Message]:
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        message = rng.choice(_ROOTS)()
        _fill(message, rng, depth=4)
        made.append(message)
        # Repeats, as generated resources have them: remembered findings must be the same.
        if rng.random() < 0.2:
            made.append(made[rng.randrange(len(made))])
    return made


@pytest.mark.parametrize("seed", range(4))
def test_findings_are_the_walks_and_passing_means_nothing_found(seed: int) -> None:
    checker, walker, fresh = Checker(), _WalkOnly(), _WalkOnly(remember=False)
    broken = 0
    for message in _messages(seed, 400):
        expected = fresh.violations(message)
        assert checker.violations(message) == expected, message
        assert walker.violations(message) == expected
        assert checker._passes(message) == (not expected)
        broken += bool(expected)
    assert 100 < broken < 700  # both answers are well tried


@pytest.mark.parametrize("write_after", [1, 10**9])
def test_written_and_interpreted_checks_agree(write_after: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every type's check written out at once, or never: each answers as the walk does.
    monkeypatch.setattr(validate, "_WRITE_AFTER", write_after)
    checker, fresh = Checker(), _WalkOnly(remember=False)
    for message in _messages(7, 300):
        expected = fresh.violations(message)
        assert checker.violations(message) == expected, message
        assert checker._passes(message) == (not expected)
    assert any(plan.written for plan in checker._plans.values() if plan.active) == (write_after == 1)


def test_a_passing_duration_and_a_failing_one() -> None:
    checker = Checker()
    good = route_components_pb2.RouteAction(cluster="c", timeout=duration_pb2.Duration(seconds=5))
    bad = route_components_pb2.RouteAction(cluster="c", timeout=duration_pb2.Duration(seconds=-5))
    assert checker._passes(good) and checker.violations(good) == []
    assert not checker._passes(bad)
    assert checker.violations(bad) == _WalkOnly().violations(bad) != []


def test_an_any_payload_is_answered_from_its_findings() -> None:
    checker = Checker()
    packed = any_pb2.Any()
    packed.Pack(lua_pb2.Lua(default_source_code={"inline_string": "x"}))
    assert checker._passes(packed)
    bad = any_pb2.Any()
    bad.Pack(local_rate_limit_pb2.LocalRateLimit())  # stat_prefix is required
    assert not checker._passes(bad)
    assert checker.violations(bad) == _WalkOnly().violations(bad) != []
