"""Go duration strings, parsed the way Contour parses them (``time.ParseDuration``,
``internal/timeout/timeout.go``), with Go's error messages: they end up in HTTPProxy status.
The parsing itself is the core's (shared with every plugin for a Contour kind); CORS max age is here.
"""

from __future__ import annotations

from cpx import DurationError, parse_go_duration, parse_go_duration_nanos, parse_timeout
from cpx import go_quote as quote

__all__ = [
    "DurationError",
    "parse_go_duration",
    "parse_go_duration_nanos",
    "parse_max_age",
    "parse_timeout",
    "quote",
]


def parse_max_age(text: str) -> str | None:
    """Contour's ``timeout.ParseMaxAge`` for CORS, as Envoy's max_age string.

    ``""`` ⇒ None (Envoy's default); zero ⇒ ``"0"`` (no preflight caching); otherwise whole
    seconds (Contour formats ``%.0f``).  Raises DurationError with Contour's message.
    """
    if text == "":
        return None
    try:
        nanos = parse_go_duration_nanos(text)
    except DurationError as err:
        raise DurationError(f"unable to parse timeout string {quote(text)}: {err}") from None
    if nanos < 0:
        raise DurationError(f"invalid max age value {quote(text)}")
    return f"{nanos / 1e9:.0f}"
