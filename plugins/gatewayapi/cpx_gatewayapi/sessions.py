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

import functools
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from cpx import FilterSite, HttpFilterSpec, ObjectKey
from cpx.dag import AttachmentKey, Route
from cpx.xds import seconds, to_any
from envoy.config.core.v3 import extension_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2 as stateful
from envoy.extensions.http.stateful_session.cookie.v3 import cookie_pb2
from envoy.extensions.http.stateful_session.header.v3 import header_pb2
from envoy.type.http.v3 import cookie_pb2 as http_cookie

from cpx_gatewayapi.durations import duration
from cpx_gatewayapi.filters import FilterProblem

FILTER = "envoy.filters.http.stateful_session"
COOKIE, HEADER = "Cookie", "Header"
PERMANENT = "Permanent"


@attrs.frozen(cache_hash=True)
class Session:
    """Where Envoy keeps a rule's session: a cookie (``ttl`` seconds; None: a session cookie) or
    a header named ``name``."""

    type: str
    name: str
    ttl: float | None = None


SESSION = AttachmentKey("gatewayapi/session-persistence", Session)


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


_INERT = stateful.StatefulSession()  # no session state: the filter does nothing

# Set on the DAG while any GatewayClass exists: only then do connection managers carry the
# filter, so that Envoy's configuration does not change for users of Ingress and HTTPProxy alone.
IN_USE = AttachmentKey("gatewayapi/in-use", bool)


def _listener_config(site: FilterSite) -> stateful.StatefulSession | None:
    return _INERT if site.dag_attachments.get(IN_USE) else None


@functools.lru_cache(maxsize=1024)
def _per_route_config(session: Session) -> stateful.StatefulSessionPerRoute:
    state: Any
    if session.type == HEADER:
        state = header_pb2.HeaderBasedSessionState(name=session.name)
        extension = "envoy.http.stateful_session.header"
    else:
        cookie = http_cookie.Cookie(name=session.name, path="/")
        if session.ttl is not None:
            cookie.ttl.CopyFrom(seconds(session.ttl))
        state = cookie_pb2.CookieBasedSessionState(cookie=cookie)
        extension = "envoy.http.stateful_session.cookie"
    config = extension_pb2.TypedExtensionConfig(name=extension, typed_config=to_any(state))
    return stateful.StatefulSessionPerRoute(stateful_session=stateful.StatefulSession(session_state=config))


def _per_route(route: Route) -> stateful.StatefulSessionPerRoute | None:
    session = route.attachments.get(SESSION)
    return None if session is None else _per_route_config(session)


def http_filters() -> Iterator[HttpFilterSpec]:
    # No order constraint: just before the router, after every policy filter.
    yield HttpFilterSpec(
        name=FILTER,
        config=_listener_config,
        per_route=_per_route,
        route_keys=(SESSION.name,),
        description="Gateway API session persistence (rules[].sessionPersistence)",
    )
