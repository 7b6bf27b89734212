"""Session persistence (experimental ``rules[].sessionPersistence``, GEP-1619) as Envoy's
stateful_session filter.

The filter is inert on every connection manager; a route whose rule asks for persistence carries a
:class:`Session` attachment, which its per-route config turns on.  Envoy encodes the chosen
endpoint in a cookie (``Cookie``, the default type) or a header (``Header``) and sends the next
request carrying it to that endpoint, whatever the load balancer would pick (the "strong"
stickiness the GEP asks for, unlike a hash policy, which moves when endpoints change).

A ``Permanent`` cookie lives ``absoluteTimeout`` (its Max-Age); a ``Session`` cookie (the default)
lives as long as the browser session.  Envoy has no idle timeout for sessions: a rule with
``idleTimeout`` is refused (dropped and reported) rather than served without it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import attrs
from cpx import ObjectKey
from cpx.dag import AttachmentKey

from cpx_gatewayapi.durations import duration
from cpx_gatewayapi.filters import FilterProblem
from cpx_gatewayapi.sessionfilter import SESSION_KEY

COOKIE, HEADER = "Cookie", "Header"
PERMANENT = "Permanent"


@attrs.frozen(cache_hash=True)
class Session:
    """Where Envoy keeps a rule's session: a cookie (``ttl`` seconds; None: a session cookie) or
    a header named ``name``."""

    type: str
    name: str
    ttl: float | None = None


SESSION = AttachmentKey(SESSION_KEY, Session)


def parse(spec: object, key: ObjectKey, rule: int) -> Session | None:
    """A rule's ``sessionPersistence``; FilterProblem for what Envoy cannot do."""
    if not isinstance(spec, Mapping):
        return None
    kind = str(spec.get("type") or COOKIE)
    if kind not in (COOKIE, HEADER):
        raise FilterProblem(f"sessionPersistence type {kind!r} is not supported")
    if spec.get("idleTimeout") is not None:
        raise FilterProblem(
            "sessionPersistence idleTimeout is not supported (Envoy sessions have no idle timeout)"
        )
    name = str(spec.get("sessionName") or _default_name(key, rule))
    if kind == HEADER:
        return Session(type=HEADER, name=name)
    cookie = spec.get("cookieConfig")
    ttl = None
    if isinstance(cookie, Mapping) and cookie.get("lifetimeType") == PERMANENT:
        lifetime = duration(spec.get("absoluteTimeout"))
        if lifetime is None or lifetime.seconds is None:
            raise FilterProblem("a Permanent session cookie needs a non-zero absoluteTimeout")
        ttl = lifetime.seconds
    return Session(type=COOKIE, name=name, ttl=ttl)


def _default_name(key: ObjectKey, rule: int) -> str:
    """One per rule, so that two rules' sessions never share a cookie."""
    digest = hashlib.sha256(f"{key.kind}/{key.namespace}/{key.name}/{rule}".encode()).hexdigest()[:12]
    return f"cpx-session-{digest}"
