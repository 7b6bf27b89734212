"""Go durations as Contour's flags and configuration file take them ("15s", "1m30s", "500ms")."""

from __future__ import annotations

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
# Contour's word for "no timeout" (Envoy's 0).
DISABLED = frozenset({"infinity", "infinite"})


def parse_duration(value: str | float) -> float:
    """Seconds from a number or a Go duration; ValueError names what is wrong."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{value!r} is not a duration (e.g. 15s, 1m30s, 500ms)")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def parse_timeout(value: str | float) -> float:
    """A Contour timeout: a duration, or "infinity" (0: Envoy's "no timeout")."""
    if isinstance(value, str) and value.strip() in DISABLED:
        return 0.0
    seconds = parse_duration(value)
    if seconds < 0:
        raise ValueError(f"{value!r} is negative")
    return seconds
