"""The scoped route shape: one RouteConfiguration per exact host, chosen by Scoped RDS.

A plain-HTTP listener's connection manager does not hold one RouteConfiguration with every
virtual host (Contour's ``ingress_http``): it holds a table of *scopes* (ScopedRouteConfiguration
resources, SRDS), each naming one RouteConfiguration (RDS).  Every exact host gets its own,
``<listener>/<fqdn>``; the wildcard hosts and the ``*`` default stay in ``<listener>`` itself,
where Envoy's own domain matching picks among them.  A changed host then costs Envoy the decoding
of that host's routes, not of the whole table (docs/design/0018-route-shape.md).

Envoy looks a scope up by a key built from a request header and has no fallback when the key is
unknown, so a small Lua filter, first in the chain, picks the scope: it sets ``x-cpx-scope`` to
``<listener>/<lowercased host>`` and asks Envoy to route again; when no virtual host answered
(the exact host's virtual hosts carry a marker in their metadata, which Lua can read), it sets
``<listener>/*``, the scope of the listener's wildcard and default virtual hosts.  The Host port
is already stripped (``strip_any_host_port``).  A client cannot choose a scope: the header is
always overwritten, and every scoped RouteConfiguration removes it before the request goes
upstream.

Envoy decides whether a request may upgrade (WebSocket) on the route it found *before* the
filters ran, which for a scoped connection manager is no route (no scope header yet): it would
let any route upgrade.  So a second small Lua filter refuses, with Envoy's 403, an upgrade the
final route does not allow; routes that allow one carry the upgrade types in their metadata.
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2 as core_base
from envoy.config.route.v3 import route_components_pb2 as route_components
from envoy.config.route.v3 import scoped_route_pb2 as scoped_route
from envoy.extensions.filters.http.lua.v3 import lua_pb2 as lua
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from google.protobuf import struct_pb2

from cpx.xds.envoy.common import ads_config_source, to_any

SCOPE_HEADER = "x-cpx-scope"
SCOPE_FILTER = "cpx.route_scope"  # the Lua filter's name: Lua reads metadata under it
UPGRADE_FILTER = "cpx.upgrade_guard"
_MARKER_KEY = "exact"
FALLBACK_KEY = "*"

_SELECT_LUA = """\
local prefix = %(prefix)s
function envoy_on_request(handle)
  local headers = handle:headers()
  local host = string.lower(headers:get(":authority") or "")
  headers:replace("%(header)s", prefix .. host)
  handle:clearRouteCache()
  handle:metadata() -- routes again with the new scope
  if handle:virtualHost():metadata():get("%(marker)s") == nil then
    headers:replace("%(header)s", prefix .. "%(fallback)s")
    handle:clearRouteCache()
  end
end
"""


_GUARD_LUA = """\
function envoy_on_request(handle)
  local upgrade = handle:headers():get("upgrade")
  if upgrade ~= nil and handle:metadata():get(string.lower(upgrade)) == nil then
    handle:respond({[":status"] = "403"}, "")
  end
end
"""


def is_exact(fqdn: str) -> bool:
    """Whether a virtual host gets a scope of its own (wildcards and ``*`` share the fallback)."""
    return "*" not in fqdn


def host_route_config_name(listener: str, fqdn: str) -> str:
    return f"{listener}/{fqdn}"


def scope_key(listener: str, fqdn: str) -> str:
    """What the selector writes for a request to ``fqdn`` (Envoy's domain match is case-blind)."""
    return f"{listener}/{fqdn.lower()}"


def scope_selector(listener: str) -> hcm.HttpFilter:
    """The Lua filter that picks the scope of each request on ``listener``'s connection manager."""
    prefix = '"' + _lua_escape(f"{listener}/") + '"'
    code = _SELECT_LUA % {
        "prefix": prefix,
        "header": SCOPE_HEADER,
        "marker": _MARKER_KEY,
        "fallback": FALLBACK_KEY,
    }
    config = lua.Lua(default_source_code=core_base.DataSource(inline_string=code))
    return hcm.HttpFilter(name=SCOPE_FILTER, typed_config=to_any(config))


def upgrade_guard() -> hcm.HttpFilter:
    """Refuses an upgrade the (final) route does not allow: see the module's docstring."""
    config = lua.Lua(default_source_code=core_base.DataSource(inline_string=_GUARD_LUA))
    return hcm.HttpFilter(name=UPGRADE_FILTER, typed_config=to_any(config))


def mark_upgrades(route: route_components.Route) -> None:
    """Record in a route's metadata the upgrades it allows, for :func:`upgrade_guard`."""
    configs = route.route.upgrade_configs
    if not configs:  # most routes: nothing to record
        return
    allowed = [c.upgrade_type.lower() for c in configs if c.enabled.value or not c.HasField("enabled")]
    if allowed:
        fields = struct_pb2.Struct(fields={kind: struct_pb2.Value(bool_value=True) for kind in allowed})
        route.metadata.filter_metadata[UPGRADE_FILTER].CopyFrom(fields)


def _lua_escape(text: str) -> str:
    return "".join(c if c.isalnum() or c in "/._-" else f"\\{ord(c):03d}" for c in text)


def scoped_routes(listener: str) -> hcm.ScopedRoutes:
    """The connection manager's scope table: by ``x-cpx-scope``, scopes and routes over ADS."""
    extractor = hcm.ScopedRoutes.ScopeKeyBuilder.FragmentBuilder.HeaderValueExtractor(
        name=SCOPE_HEADER, index=0
    )
    fragment = hcm.ScopedRoutes.ScopeKeyBuilder.FragmentBuilder(header_value_extractor=extractor)
    return hcm.ScopedRoutes(
        name=listener,
        scope_key_builder=hcm.ScopedRoutes.ScopeKeyBuilder(fragments=[fragment]),
        rds_config_source=ads_config_source(),
        scoped_rds=hcm.ScopedRds(scoped_rds_config_source=ads_config_source()),
    )


def scope(name: str, route_config: str, key: str) -> scoped_route.ScopedRouteConfiguration:
    fragment = scoped_route.ScopedRouteConfiguration.Key.Fragment(string_key=key)
    return scoped_route.ScopedRouteConfiguration(
        name=name,
        route_configuration_name=route_config,
        key=scoped_route.ScopedRouteConfiguration.Key(fragments=[fragment]),
    )


def _exact_marker() -> bytes:
    """VirtualHost fields (metadata) appended to an exact host's entry: the selector's marker."""
    fields = struct_pb2.Struct(fields={_MARKER_KEY: struct_pb2.Value(bool_value=True)})
    vhost = route_components.VirtualHost(metadata=core_base.Metadata(filter_metadata={SCOPE_FILTER: fields}))
    data: bytes = vhost.SerializeToString(deterministic=True)
    return data


EXACT_MARKER = _exact_marker()
