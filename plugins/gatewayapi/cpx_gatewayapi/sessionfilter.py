"""The session persistence filter as the plugin declares it (``cpx_http_filters``).

Kept apart from :mod:`cpx_gatewayapi.sessionconfigs`, which builds the configs: loading the plugin
(or translating without Gateway API objects) then imports no stateful_session protos; they load
when a build first has a GatewayClass.
"""

from __future__ import annotations

from collections.abc import Iterator

from cpx import Deferred, FilterSite, HttpFilterSpec
from cpx.dag import AttachmentKey
from google.protobuf.message import Message

FILTER = "envoy.filters.http.stateful_session"
# The name of sessions.SESSION, the attachment of a route whose rule asks for persistence.
SESSION_KEY = "gatewayapi/session-persistence"

# Set on the DAG while any GatewayClass exists: only then do connection managers carry the
# filter, so that Envoy's configuration does not change for users of Ingress and HTTPProxy alone.
IN_USE = AttachmentKey("gatewayapi/in-use", bool)

_in_use_config = Deferred("cpx_gatewayapi.sessionconfigs:listener_config")


def _listener_config(site: FilterSite) -> Message | None:
    return _in_use_config(site) if site.dag_attachments.get(IN_USE) else None


def http_filters() -> Iterator[HttpFilterSpec]:
    # No order constraint: just before the router, after every policy filter.
    yield HttpFilterSpec(
        name=FILTER,
        config=_listener_config,
        per_route=Deferred("cpx_gatewayapi.sessionconfigs:per_route"),
        route_keys=(SESSION_KEY,),
        description="Gateway API session persistence (rules[].sessionPersistence)",
    )
