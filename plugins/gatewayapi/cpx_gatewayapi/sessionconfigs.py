"""The session persistence filter's configs (:mod:`cpx_gatewayapi.sessions` parses the rules):
apart, so that their protos load only when a build first serves Gateway API routes."""

from __future__ import annotations

import functools
from typing import Any

from cpx import FilterSite
from cpx.dag import Route
from cpx.xds import seconds, to_any
from envoy.config.core.v3 import extension_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2 as stateful
from envoy.extensions.http.stateful_session.cookie.v3 import cookie_pb2
from envoy.extensions.http.stateful_session.header.v3 import header_pb2
from envoy.type.http.v3 import cookie_pb2 as http_cookie

from cpx_gatewayapi.sessionfilter import IN_USE
from cpx_gatewayapi.sessions import HEADER, SESSION, Session

_INERT = stateful.StatefulSession()  # no session state: the filter does nothing


def listener_config(site: FilterSite) -> stateful.StatefulSession | None:
    """The filter's listener config (sessionfilter.http_filters)."""
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


def per_route(route: Route) -> stateful.StatefulSessionPerRoute | None:
    """The filter's per-route config (sessionfilter.http_filters)."""
    session = route.attachments.get(SESSION)
    return None if session is None else _per_route_config(session)
