"""Go duration strings, parsed the way Contour parses them (``time.ParseDuration``,
``internal/timeout/timeout.go``), with Go's error messages: they end up in status conditions.
Public through :mod:`cpx` (``parse_go_duration``, ``parse_timeout``, ``DurationError``, ``go_quote``):
every plugin for a Contour kind reads such durations.
"""

from __future__ import annotations

import math
import re

from cpx.dag.nodes import Duration

# Go's time.unitMap, in nanoseconds.
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NANOS = 2**63 - 1
_DIGITS = "0123456789"
# One component: digits, an optional fraction, then everything up to the next number is the unit.
_COMPONENT = re.compile(r"(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?(?P<unit>[^0-9.]*)")


class DurationError(ValueError):
    """A string Go's time.ParseDuration refuses; the message is Go's."""


def _quote(text: str) -> str:
    """Go's strconv.Quote, close enough for status messages."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    out.append('"')
    return "".join(out)


def parse_go_duration_nanos(text: str) -> int:
    """Nanoseconds in a Go duration (``1h30m``, ``1.5s``, ``-2ms``); DurationError as Go says."""
    invalid = DurationError(f"time: invalid duration {_quote(text)}")
    s, negative = text, False
    if s and s[0] in "+-":
        negative, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        value, s = _component(text, s, invalid)
        total += value
        if total > _MAX_NANOS + (1 if negative else 0):
            raise invalid
    return -total if negative else total


def _component(text: str, s: str, invalid: DurationError) -> tuple[int, str]:
    """The nanoseconds of the leading number-and-unit of ``s`` (part of ``text``), and the rest."""
    match = _COMPONENT.match(s)
    if match is None or not (s[0] == "." or s[0] in _DIGITS):
        raise invalid
    whole, fraction, unit_name = match["whole"], match["fraction"] or "", match["unit"]
    if not whole and not fraction:
        raise invalid
    if not unit_name:
        raise DurationError(f"time: missing unit in duration {_quote(text)}")
    unit = _UNITS.get(unit_name)
    if unit is None:
        raise DurationError(f"time: unknown unit {_quote(unit_name)} in duration {_quote(text)}")
    value = int(whole or "0") * unit
    if fraction:
        value += int(int(fraction) * unit / 10 ** len(fraction))
    return value, s[match.end() :]


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string (may be negative); DurationError with Go's message."""
    return parse_go_duration_nanos(text) / 1e9


def parse_timeout(text: str) -> Duration | None:
    """Contour's ``timeout.Parse``: ``""`` or zero ⇒ None (Envoy's default), ``infinity`` /
    ``infinite`` ⇒ ``Duration(None)`` (disabled), otherwise the duration.

    Raises DurationError with Contour's message.  Negative durations, which Contour passes on
    to Envoy (which rejects the whole resource), are refused here.
    """
    if text == "":
        return None
    if text in ("infinity", "infinite"):
        return Duration(seconds=None)
    try:
        nanos = parse_go_duration_nanos(text)
    except DurationError as err:
        raise DurationError(f"unable to parse timeout string {_quote(text)}: {err}") from None
    if nanos < 0:
        raise DurationError(f"unable to parse timeout string {_quote(text)}: negative duration")
    return None if nanos == 0 else Duration(seconds=nanos / 1e9)


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (status messages quote values the way Contour does)."""
    return _quote(text)


# -- flags and Contour's configuration file ---------------------------------------------------------

# Contour's word for "no timeout" (Envoy's 0).
DISABLED = frozenset({"infinity", "infinite"})


def parse_duration(value: str | float) -> float:
    """Seconds from a number or an unsigned Go duration ("15s", "1m30s", "500ms"), as flags and
    Contour's configuration file take them; ValueError names what is wrong."""
    try:
        seconds = _flag_seconds(value)
    except ValueError:  # DurationError too
        seconds = math.nan
    if not math.isfinite(seconds):  # float() also reads "inf", "infinity" and "nan"
        raise ValueError(f"{value!r} is not a duration (e.g. 15s, 1m30s, 500ms)")
    return seconds


def _flag_seconds(value: str | float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    if text.startswith(("-", "+")):
        raise ValueError(text)  # a setting's duration has no sign
    return parse_go_duration(text)


def parse_timeout_seconds(value: str | float) -> float:
    """A Contour timeout setting: a duration, or "infinity" (0: Envoy's "no timeout")."""
    if isinstance(value, str) and value.strip() in DISABLED:
        return 0.0
    seconds = parse_duration(value)
    if seconds < 0:
        raise ValueError(f"{value!r} is negative")
    return seconds
