"""Gateway API durations (GEP-2257): ``1h30m``, ``500ms``; ``0s`` disables."""

from __future__ import annotations

import re

from cpx.dag import Duration

_DURATION = re.compile(r"([0-9]{1,5})(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration(text: object) -> Duration | None:
    """A GEP-2257 duration (``1h30m``, ``500ms``); ``0s`` disables; None if absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    parts = _DURATION.findall(text)
    if "".join(n + u for n, u in parts) != text:
        return None
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    return Duration(seconds=seconds or None)
