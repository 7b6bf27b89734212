"""The bounds on what an xDS client's values can cost: labels, log text, log volume, streams."""

from __future__ import annotations

import pytest

from cpx.xds.resource import CLUSTER, RUNTIME
from cpx.xds.server.guard import (
    UNKNOWN_TYPE,
    LogLimiter,
    PeerStreams,
    peer_host,
    printable,
    suppressed_note,
    type_label,
)


def test_unknown_type_urls_share_one_label() -> None:
    assert type_label(CLUSTER) == CLUSTER and type_label(RUNTIME) == RUNTIME
    assert {type_label(f"type.googleapis.com/x{i}") for i in range(1000)} == {UNKNOWN_TYPE}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain message: ok", "plain message: ok"),
        ("line\nINFO forged", "line\\x0aINFO forged"),
        ("\r\x00\x1b[2J\x7f\x85", "\\x0d\\x00\\x1b[2J\\x7f\\x85"),
        ("\u2028\u202e\ufeff", "\\u2028\\u202e\\ufeff"),
        ("café ✓", "café ✓"),
    ],
)
def test_printable_escapes_what_could_break_or_disguise_a_line(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_truncates_and_says_how_long_it_was() -> None:
    assert printable("x" * 5000, 10) == "xxxxxxxxxx... [5000 chars]"
    assert printable("\n" * 5000, 10) == "\\x0a\\x0a\\x... [5000 chars]"
    assert printable("x" * 10, 10) == "x" * 10


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:10.1.2.3:5000", "10.1.2.3"),
        ("ipv6:[::1]:5000", "::1"),
        ("ipv6:%5B2001:db8::1%5D:443", "2001:db8::1"),
        ("unix:xds.sock", "unix:xds.sock"),
    ],
)
def test_peer_host(peer: str, host: str) -> None:
    assert peer_host(peer) == host


def test_log_limiter_lets_a_burst_through_per_key_then_counts_what_it_drops() -> None:
    now = [0.0]
    limiter = LogLimiter(burst=2, period=60.0, max_keys=3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(5)] == [0, 0, None, None, None]
    assert limiter.allow("b") == 0  # another peer or type has its own budget
    now[0] = 61.0
    assert limiter.allow("a") == 3  # the first line of the next period says how many were dropped
    assert suppressed_note(3) == " (3 similar lines suppressed)" and suppressed_note(0) == ""
    for key in ("c", "d", "e"):  # keys are bounded: the least recently used goes first
        limiter.allow(key)
    assert "a" not in limiter._windows and len(limiter._windows) == 3


def test_peer_streams_are_capped_and_released() -> None:
    streams = PeerStreams(limit=2)
    assert streams.acquire("10.0.0.1") and streams.acquire("10.0.0.1")
    assert not streams.acquire("10.0.0.1") and streams.acquire("10.0.0.2")
    streams.release("10.0.0.1")
    assert streams.acquire("10.0.0.1")
    for _ in range(3):
        streams.release("10.0.0.1")
    assert streams._open == {"10.0.0.2": 1}
