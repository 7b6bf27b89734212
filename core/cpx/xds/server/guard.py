"""Limits that keep one xDS client from costing the server, its logs or its metrics more than its share.

Everything an xDS client sends is untrusted: the type URLs it asks for, the names it subscribes
to, the node id it claims and the ``error_detail`` of its NACKs. The helpers here bound what such
values can cost: metric labels come from a fixed set, peer text is escaped and truncated before it
reaches a log line, repeated log lines are rate-limited per peer, and the number of concurrent
streams per peer address is capped. The limits and why they were chosen: design note 0005.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import attrs

from cpx.xds.resource import PUSH_ORDER, RUNTIME

# Metric label of every type URL cpx does not serve: one series, however many a client invents.
UNKNOWN_TYPE = "unknown"
KNOWN_TYPES = frozenset((*PUSH_ORDER, RUNTIME))

# C0/C1 controls, DEL, and the Unicode separators and direction/format characters that can
# break or disguise a log line (U+2028/2029 end a line in some viewers; U+202E reverses text).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


@attrs.frozen(kw_only=True)
class XdsLimits:
    """What one xDS client may ask of the server (design note 0005 says why these values)."""

    # gRPC's own default, which Contour and go-control-plane keep: Envoy's requests are small.
    max_message_bytes: int = 4 << 20
    # Names in one request (SotW resource_names, delta subscribe + unsubscribe + initial versions),
    # and names subscribed per type on one delta stream: 10x Contour's 10k-route scale target.
    max_resource_names: int = 100_000
    # Distinct type URLs on one stream (cpx serves 5; Envoy may ask for a few more).
    max_types_per_stream: int = 32
    # Concurrent streams from one IP address (an Envoy opens 1 ADS stream, or 1 per type).
    max_streams_per_peer: int = 1024
    # A client may ping this often on an idle connection; faster, twice, ends it (GOAWAY).
    min_ping_interval_ms: int = 10_000
    # Log lines about one peer's NACKs of one type, or its closed streams: `burst` per `period`.
    log_burst: int = 5
    log_period: float = 60.0


# Tags (field number << 3 | wire type 2) of the repeated name fields: DiscoveryRequest's
# resource_names (3); DeltaDiscoveryRequest's resource_names_subscribe (3), _unsubscribe (4) and
# initial_resource_versions (5).
SOTW_NAME_TAGS = (b"\x1a",)
DELTA_NAME_TAGS = (b"\x1a", b"\x22", b"\x2a")


@attrs.frozen
class TooManyNames:
    """What a request decodes to when it plainly holds too many names: it is never parsed."""

    bound: int


def bounded_parser(
    parse: Callable[[bytes], Any], tags: tuple[bytes, ...], limit: int
) -> Callable[[bytes], Any]:
    """``parse``, unless the request's bytes show it holds far more than ``limit`` names.

    Parsing costs ~45 bytes of memory per name (a 4 MiB request of one-letter names: 60 MB), so the
    names are bounded before: each one starts with one of ``tags``, and counting those bytes (C
    speed, ~1 ms per MiB) is an upper bound on the names. 3x the limit leaves room for the same
    byte in legitimate content (a name 26 bytes long, a '"' in a message); between the limit and
    that, the request is parsed and its names counted exactly.
    """

    def deserialize(data: bytes) -> Any:
        bound = sum(data.count(tag) for tag in tags)
        if bound > 3 * limit:
            return TooManyNames(bound)
        return parse(data)

    return deserialize


def type_label(type_url: str) -> str:
    """The metric label of a type URL: itself when cpx knows it, else :data:`UNKNOWN_TYPE`."""
    return type_url if type_url in KNOWN_TYPES else UNKNOWN_TYPE


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, limit: int = 1024) -> str:
    """Peer text made safe for one log line: control characters escaped, at most ``limit`` chars."""
    cut = _UNSAFE.sub(_escape, text[:limit])
    if len(cut) > limit or len(text) > limit:
        return f"{cut[:limit]}... [{len(text)} chars]"
    return cut


def peer_host(peer: str) -> str:
    """The address part of a gRPC peer string (``ipv4:10.0.0.1:5000``, ``ipv6:[::1]:5000``)."""
    scheme, _, rest = peer.partition(":")
    if scheme not in ("ipv4", "ipv6"):
        return peer
    host = urllib.parse.unquote(rest).rsplit(":", 1)[0]
    return host.strip("[]")


@attrs.define(eq=False)
class _Window:
    start: float
    logged: int = 0
    suppressed: int = 0


@attrs.define(eq=False)
class LogLimiter:
    """At most ``burst`` lines per ``period`` seconds per key; lines over that are counted, and the
    next line let through says how many were suppressed. Keys are bounded (least recently used
    first out), so a client inventing keys cannot grow this either."""

    burst: int = 5
    period: float = 60.0
    max_keys: int = 4096
    clock: Callable[[], float] = time.monotonic
    _windows: OrderedDict[Hashable, _Window] = attrs.field(factory=OrderedDict)

    def allow(self, key: Hashable) -> int | None:
        """None when this line must be dropped; else how many lines of ``key`` were dropped before it."""
        now = self.clock()
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = _Window(now)
            if len(self._windows) > self.max_keys:
                self._windows.popitem(last=False)
        else:
            self._windows.move_to_end(key)
        if now - window.start >= self.period:
            window.start, window.logged = now, 0
        if window.logged >= self.burst:
            window.suppressed += 1
            return None
        window.logged += 1
        suppressed, window.suppressed = window.suppressed, 0
        return suppressed


def suppressed_note(count: int) -> str:
    return f" ({count} similar lines suppressed)" if count else ""


@attrs.define(eq=False)
class PeerStreams:
    """Open streams per peer address, capped at ``limit``."""

    limit: int
    _open: dict[str, int] = attrs.field(factory=dict)

    def acquire(self, host: str) -> bool:
        count = self._open.get(host, 0)
        if count >= self.limit:
            return False
        self._open[host] = count + 1
        return True

    def release(self, host: str) -> None:
        count = self._open.get(host, 0) - 1
        if count > 0:
            self._open[host] = count
        else:
            self._open.pop(host, None)
