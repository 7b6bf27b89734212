"""Go duration strings, parsed the way Contour parses them (``time.ParseDuration``,
``internal/timeout/timeout.go``), with Go's error messages: they end up in HTTPProxy status.
The parsing itself is the core's (``cpx.parse_timeout`` and friends, shared with every plugin for a
Contour kind); CORS max age, HTTPProxy's alone, is here.
"""

from __future__ import annotations

from cpx import DurationError, go_quote, parse_go_duration_nanos


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
        raise DurationError(f"unable to parse timeout string {go_quote(text)}: {err}") from None
    if nanos < 0:
        raise DurationError(f"invalid max age value {go_quote(text)}")
    return f"{nanos / 1e9:.0f}"
