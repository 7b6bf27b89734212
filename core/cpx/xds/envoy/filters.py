"""Envoy messages of the builtin HTTP filters and of the per-route configs that switch them on.

The builtin plugin contributes these filters (:mod:`cpx.builtin.filters`); the caches know them
only as contributions.  Contour's listeners always hold the same policy filters, inert until a
virtual host, route or weighted cluster says otherwise through ``typed_per_filter_config``
(``internal/envoy/v3/listener.go``, ``route.go``, ``ratelimit.go``):

- ``envoy.filters.http.compressor`` (gzip, brotli or zstd; Contour's default gzip), then
  ``envoy.filters.http.grpc_web`` and ``envoy.filters.http.grpc_stats``: Contour's default
  filters, identical on every connection manager (:func:`compressor_filter`).
- ``envoy.filters.http.cors``: CORS, per virtual host or route (:func:`cors_policy`).
- ``envoy.filters.http.local_ratelimit``: no token bucket at the filter level, so nothing is
  limited until a virtual host or route brings its own bucket (:func:`local_rate_limit`).
- a Lua filter rewriting Set-Cookie attributes (:func:`cookie_rewrite_per_route`).
- ``envoy.filters.http.rbac``: no rules at the filter level (allow everything); IP allow/deny
  lists per virtual host or route (:func:`ip_filter_per_route`).

The cookie-rewrite filter is *named* ``envoy.filters.http.lua.cookie_rewrite`` rather than
Contour's ``envoy.filters.http.lua``: Envoy looks per-route configs up by filter name and then by
extension name, so with one name for both, an HTTPS route's cookie rules would also replace the
misdirected-request (421) Lua filter's script on that route and switch its check off.
A distinct name keeps the 421 filter (which has no per-route config) untouched.

The connection managers' cookie filter holds no script at all (Contour's holds a placeholder, one
Lua VM per filter chain and worker for nothing), so it costs nothing where no route rewrites
cookies and keeps the per-chain LDS bytes small (10k HTTPS chains each carry one).  A route (or
weighted cluster) with rules carries the script in ``LuaPerRoute.source_code``, as Contour does,
but the script is one constant text and the rules travel as data in ``filter_context`` (Contour
renders cookie names and values into Lua source).  The behaviour is Contour's: for every
``Set-Cookie`` response header whose cookie has a rule, the rule's ``Path``, ``Domain`` and
``SameSite`` replace the cookie's (or are appended), and ``Secure`` is added or removed.  Attribute
names are matched case-insensitively and the cookie's other attributes keep their order.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from envoy.config.core.v3 import base_pb2 as core_base
from envoy.config.core.v3 import extension_pb2 as core_extension
from envoy.config.rbac.v3 import rbac_pb2 as rbac_config
from envoy.config.route.v3 import route_components_pb2 as route_components
from envoy.extensions.compression.brotli.compressor.v3 import brotli_pb2
from envoy.extensions.compression.gzip.compressor.v3 import gzip_pb2
from envoy.extensions.compression.zstd.compressor.v3 import zstd_pb2
from envoy.extensions.filters.http.compressor.v3 import compressor_pb2 as compressor
from envoy.extensions.filters.http.cors.v3 import cors_pb2 as cors
from envoy.extensions.filters.http.grpc_stats.v3 import config_pb2 as grpc_stats
from envoy.extensions.filters.http.grpc_web.v3 import grpc_web_pb2 as grpc_web
from envoy.extensions.filters.http.local_ratelimit.v3 import local_rate_limit_pb2 as local_ratelimit
from envoy.extensions.filters.http.lua.v3 import lua_pb2 as lua
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2 as rbac_filter
from envoy.extensions.filters.http.router.v3 import router_pb2 as router
from envoy.extensions.internal_redirect.previous_routes.v3 import (
    previous_routes_config_pb2 as previous_routes,
)
from envoy.extensions.internal_redirect.safe_cross_scheme.v3 import (
    safe_cross_scheme_config_pb2 as safe_cross_scheme,
)
from envoy.type.matcher.v3 import regex_pb2 as regex_matcher
from envoy.type.matcher.v3 import string_pb2 as string_matcher
from envoy.type.v3 import http_status_pb2 as http_status
from envoy.type.v3 import percent_pb2 as percent
from google.protobuf import struct_pb2

from cpx.dag.nodes import (
    AuthorityCheck,
    CookieRewrite,
    CORSPolicy,
    HashPolicy,
    HeaderValue,
    InternalRedirectPolicy,
    IPFilter,
    LocalRateLimit,
)
from cpx.xds.envoy.common import seconds, to_any

LUA_FILTER = "envoy.filters.http.lua"
COMPRESSOR_FILTER = "envoy.filters.http.compressor"
GRPC_WEB_FILTER = "envoy.filters.http.grpc_web"
GRPC_STATS_FILTER = "envoy.filters.http.grpc_stats"
CORS_FILTER = "envoy.filters.http.cors"
LOCAL_RATELIMIT_FILTER = "envoy.filters.http.local_ratelimit"
COOKIE_REWRITE_FILTER = "envoy.filters.http.lua.cookie_rewrite"
RBAC_FILTER = "envoy.filters.http.rbac"
ROUTER_FILTER = "router"
# The single RBAC policy of an IP filter (Contour's name).
IP_RULES_POLICY = "ip-rules"
# CORSPolicy.allow_origin entries with this prefix are RE2 regexes.
REGEX_ORIGIN_PREFIX = "regex:"

SAFE_CROSS_SCHEME = "envoy.internal_redirect_predicates.safe_cross_scheme"
PREVIOUS_ROUTES = "envoy.internal_redirect_predicates.previous_routes"

_OVERWRITE = core_base.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
_STATUS_CODES = frozenset(v.number for v in http_status.StatusCode.DESCRIPTOR.values if v.number)

# Contour's FilterMisdirectedRequests, reproduced: a TLS connection whose SNI selected this virtual
# host must not be used for requests to another host (RFC 6066 / RFC 7540 9.1.2).  The port is
# stripped here too, so the check holds even if the connection manager keeps ports.
_MISDIRECTED_LUA = """
function envoy_on_request(request_handle)
\tlocal headers = request_handle:headers()
\tlocal host = string.lower(headers:get(":authority") or "")
\thost = string.gsub(host, ":%%d+$", "")
\tlocal target = %s

\tif host ~= target then
\t\trequest_handle:respond(
\t\t\t{[":status"] = "421"},
\t\t\tstring.format("misdirected request to %%q", host)
\t\t)
\tend
end
"""

# The 421 check of a virtual host with an AuthorityCheck: the Host must match `accept` and none of
# `refuse` (names other hosts own).  A name is exact, "*.suffix" (one or more labels) or "*".
_AUTHORITY_LUA = """
local accept = %s
local refuse = {%s}

local function matches(host, name)
	if name == "*" then
		return true
	end
	if string.sub(name, 1, 2) == "*." then
		local suffix = string.sub(name, 2)
		return #host > #suffix and string.sub(host, -#suffix) == suffix
	end
	return host == name
end

function envoy_on_request(request_handle)
	local host = string.lower(request_handle:headers():get(":authority") or "")
	host = string.gsub(host, ":%%d+$", "")
	local misdirected = not matches(host, accept)
	for _, name in ipairs(refuse) do
		if matches(host, name) then
			misdirected = true
		end
	end
	if misdirected then
		request_handle:respond({[":status"] = "421"}, string.format("misdirected request to %%q", host))
	end
end
"""

COOKIE_REWRITE_LUA = """\
-- cpx cookie rewrite: the route's LuaPerRoute filter_context holds {cookies = {<name> = rule}},
-- a rule setting any of path, domain, same_site (strings) and secure (true adds, false removes).
local function trim(s)
\treturn (string.gsub(s, "^%s*(.-)%s*$", "%1"))
end

local function rewrite(cookie, rules)
\tlocal semi = string.find(cookie, ";", 1, true)
\tlocal pair = trim(semi and string.sub(cookie, 1, semi - 1) or cookie)
\tlocal eq = string.find(pair, "=", 1, true)
\tif eq == nil then
\t\treturn nil
\tend
\tlocal rule = rules[trim(string.sub(pair, 1, eq - 1))]
\tif type(rule) ~= "table" then
\t\treturn nil
\tend
\t-- Attribute (lower-cased) -> its replacement; false once written, or to drop it.
\tlocal set = {}
\tif rule.path then set.path = "Path=" .. rule.path end
\tif rule.domain then set.domain = "Domain=" .. rule.domain end
\tif rule.same_site then set.samesite = "SameSite=" .. rule.same_site end
\tif rule.secure == true then set.secure = "Secure" elseif rule.secure == false then set.secure = false end
\tlocal out = {pair}
\tif semi then
\t\tfor attr in string.gmatch(string.sub(cookie, semi + 1), "[^;]+") do
\t\t\tattr = trim(attr)
\t\t\tlocal key = string.lower(trim(string.match(attr, "^[^=]*")))
\t\t\tlocal replacement = set[key]
\t\t\tif replacement == nil then
\t\t\t\tif attr ~= "" then table.insert(out, attr) end
\t\t\telse
\t\t\t\tif replacement then table.insert(out, replacement) end
\t\t\t\tset[key] = false
\t\t\tend
\t\tend
\tend
\tfor _, key in ipairs({"path", "domain", "secure", "samesite"}) do
\t\tif set[key] then table.insert(out, set[key]) end
\tend
\treturn table.concat(out, "; ")
end

function envoy_on_response(response_handle)
\tlocal headers = response_handle:headers()
\tif headers:get("set-cookie") == nil then
\t\treturn
\tend
\t-- filterContext() can only be iterated; nested structs come as plain tables.
\tlocal rules = nil
\tfor key, value in pairs(response_handle:filterContext()) do
\t\tif key == "cookies" then
\t\t\trules = value
\t\tend
\tend
\tif type(rules) ~= "table" then
\t\treturn
\tend
\tlocal cookies, changed = {}, false
\tfor name, value in pairs(headers) do
\t\tif name == "set-cookie" then
\t\t\tlocal rewritten = rewrite(value, rules)
\t\t\tchanged = changed or rewritten ~= nil
\t\t\ttable.insert(cookies, rewritten or value)
\t\tend
\tend
\tif changed then
\t\theaders:remove("set-cookie")
\t\tfor _, value in ipairs(cookies) do
\t\t\theaders:add("set-cookie", value)
\t\tend
\tend
end
"""


# -- connection manager filters: inert at the listener level ----------------------------------------

# Contour's compression algorithms (contour.yaml ``compression.algorithm``): "disabled" adds no
# compressor; the others name the compressor library.
COMPRESSION_ALGORITHMS = ("gzip", "brotli", "zstd", "disabled")
DEFAULT_COMPRESSION = "gzip"
_COMPRESSOR_LIBRARIES = {"gzip": gzip_pb2.Gzip, "brotli": brotli_pb2.Brotli, "zstd": zstd_pb2.Zstd}
# Envoy's default compressible types plus gRPC-Web's (Contour's list, internal/envoy/v3/listener.go).
_COMPRESSIBLE_TYPES = (
    "text/html",
    "text/plain",
    "text/css",
    "application/javascript",
    "application/x-javascript",
    "text/javascript",
    "text/x-javascript",
    "text/ecmascript",
    "text/js",
    "text/jscript",
    "text/x-js",
    "application/ecmascript",
    "application/x-json",
    "application/xml",
    "application/json",
    "image/svg+xml",
    "text/xml",
    "application/xhtml+xml",
    "application/grpc-web",
    "application/grpc-web+proto",
    "application/grpc-web+json",
    "application/grpc-web+thrift",
    "application/grpc-web-text",
    "application/grpc-web-text+proto",
    "application/grpc-web-text+thrift",
)


@functools.cache
def compressor_filter(algorithm: str) -> compressor.Compressor | None:
    """Contour's response compressor with ``algorithm``'s library at its defaults; None: disabled."""
    library = _COMPRESSOR_LIBRARIES.get(algorithm)
    if library is None:
        return None
    return compressor.Compressor(
        compressor_library=core_extension.TypedExtensionConfig(
            name=algorithm, typed_config=to_any(library())
        ),
        response_direction_config=compressor.Compressor.ResponseDirectionConfig(
            common_config=compressor.Compressor.CommonDirectionConfig(content_type=_COMPRESSIBLE_TYPES)
        ),
    )


@functools.cache
def grpc_web_filter() -> grpc_web.GrpcWeb:
    return grpc_web.GrpcWeb()


@functools.cache
def grpc_stats_filter() -> grpc_stats.FilterConfig:
    """Contour's: per-method stats as filter state and upstream latency stats."""
    return grpc_stats.FilterConfig(emit_filter_state=True, enable_upstream_stats=True)


@functools.cache
def cors_filter() -> cors.Cors:
    return cors.Cors()


@functools.cache
def local_rate_limit_filter() -> local_ratelimit.LocalRateLimit:
    """No token bucket: inert until a virtual host or route configures one."""
    return local_ratelimit.LocalRateLimit(stat_prefix="http")


@functools.cache
def cookie_rewrite_filter() -> lua.Lua:
    """No script: the filter does nothing unless a route brings one."""
    return lua.Lua()


@functools.cache
def rbac_filter_config() -> rbac_filter.RBAC:
    """No rules: every request is allowed unless a virtual host or route has an IP filter."""
    return rbac_filter.RBAC()


@functools.cache
def router_filter() -> router.Router:
    return router.Router()


def misdirected_request_lua(fqdn: str) -> lua.Lua:
    """The Lua filter answering 421 when ``:authority`` is not the host the SNI selected."""
    if fqdn.startswith("*."):
        # The chain matched some name under the wildcard: compare with the SNI actually sent.
        target = "string.lower(request_handle:streamInfo():requestedServerName())"
    else:
        target = '"' + fqdn.lower() + '"'
    code = _MISDIRECTED_LUA % target
    return lua.Lua(default_source_code=core_base.DataSource(inline_string=code))


def _lua_string(text: str) -> str:
    return '"' + text.lower().replace("\\", "\\\\").replace('"', '\\"') + '"'


@functools.cache
def authority_check_lua(check: AuthorityCheck) -> lua.Lua:
    """The Lua filter answering 421 to a Host ``check`` does not accept (see AuthorityCheck)."""
    code = _AUTHORITY_LUA % (_lua_string(check.accept), ", ".join(_lua_string(n) for n in check.refuse))
    return lua.Lua(default_source_code=core_base.DataSource(inline_string=code))


# -- CORS ------------------------------------------------------------------------------------------


def origin_matcher(origin: str) -> string_matcher.StringMatcher:
    """``regex:<RE2>`` is a regex; anything else (``*`` included, which Envoy special-cases) exact."""
    if origin.startswith(REGEX_ORIGIN_PREFIX):
        pattern = origin[len(REGEX_ORIGIN_PREFIX) :]
        return string_matcher.StringMatcher(safe_regex=regex_matcher.RegexMatcher(regex=pattern))
    # Origins are scheme and host: case-insensitive, as Contour matches them.
    return string_matcher.StringMatcher(exact=origin, ignore_case=True)


def cors_policy(policy: CORSPolicy) -> cors.CorsPolicy:
    out = cors.CorsPolicy(
        allow_origin_string_match=[origin_matcher(o) for o in policy.allow_origin],
        allow_methods=",".join(policy.allow_methods),
        allow_headers=",".join(policy.allow_headers),
        expose_headers=",".join(policy.expose_headers),
    )
    out.allow_credentials.value = policy.allow_credentials
    out.allow_private_network_access.value = policy.allow_private_network
    if policy.max_age is not None:
        out.max_age = policy.max_age
    if not policy.forward_unmatched_preflights:
        out.forward_not_matching_preflights.value = False  # unset keeps existing output as it was
    return out


# -- local rate limit ------------------------------------------------------------------------------


def _fraction_100() -> core_base.RuntimeFractionalPercent:
    return core_base.RuntimeFractionalPercent(
        default_value=percent.FractionalPercent(numerator=100, denominator=percent.FractionalPercent.HUNDRED)
    )


def local_rate_limit(limit: LocalRateLimit, stat_prefix: str) -> local_ratelimit.LocalRateLimit:
    """Contour's LocalRateLimitConfig: a bucket of requests + burst, refilled by requests per unit."""
    out = local_ratelimit.LocalRateLimit(
        stat_prefix=stat_prefix,
        filter_enabled=_fraction_100(),
        filter_enforced=_fraction_100(),
        response_headers_to_add=[
            core_base.HeaderValueOption(
                header=core_base.HeaderValue(key=h.name, value=h.value), append_action=_OVERWRITE
            )
            for h in sorted(limit.response_headers, key=_header_name)
        ],
    )
    bucket = out.token_bucket
    bucket.max_tokens = limit.requests + limit.burst
    bucket.tokens_per_fill.value = limit.requests
    bucket.fill_interval.CopyFrom(seconds(limit.unit_seconds))
    # Envoy refuses status codes its enum does not name; those keep Envoy's default (429).
    if limit.status_code in _STATUS_CODES:
        out.status.code = limit.status_code
    return out


def _header_name(header: HeaderValue) -> str:
    return header.name


# -- IP filters (RBAC) -----------------------------------------------------------------------------


def _principal(cidr: str, remote: bool) -> rbac_config.Principal | None:
    try:
        network = ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return None  # the processor validates CIDRs; never let one bad entry NACK a route table
    principal = rbac_config.Principal()
    target = principal.remote_ip if remote else principal.direct_remote_ip
    target.address_prefix = str(network.network_address)
    target.prefix_len.value = network.prefixlen
    return principal


def ip_filter_per_route(ip_filter: IPFilter) -> rbac_filter.RBACPerRoute:
    """Allow only, or deny, the listed ranges: ``Remote`` rules see the XFF / PROXY address,
    others the socket peer (Contour's Peer)."""
    action = rbac_config.RBAC.ALLOW if ip_filter.allow else rbac_config.RBAC.DENY
    rules = rbac_config.RBAC(action=action)
    principals = [p for p in (_principal(r.cidr, r.remote) for r in ip_filter.rules) if p is not None]
    # Without principals there is no policy: ALLOW then matches nothing (deny all), DENY allows all.
    if principals:
        policy = rules.policies[IP_RULES_POLICY]
        policy.permissions.add(any=True)
        policy.principals.extend(principals)
    return rbac_filter.RBACPerRoute(rbac=rbac_filter.RBAC(rules=rules))


# -- cookie rewrite --------------------------------------------------------------------------------


def merge_cookie_rewrites(*groups: Iterable[CookieRewrite]) -> tuple[CookieRewrite, ...]:
    """One rule per cookie name, later groups overriding the attributes they set (route, then
    service: Contour's cookieRewriteConfig), sorted by name."""
    merged: dict[str, dict[str, object]] = {}
    for group in groups:
        for rule in group:
            fields = merged.setdefault(rule.name, {})
            for key in ("path", "domain", "secure", "same_site"):
                value = getattr(rule, key)
                if value is not None:
                    fields[key] = value
    return tuple(
        CookieRewrite(name=name, **fields)  # type: ignore[arg-type]
        for name, fields in sorted(merged.items())
    )


def cookie_rewrite_per_route(rules: Iterable[CookieRewrite]) -> lua.LuaPerRoute:
    """The cookie-rewrite script with the route's (or weighted cluster's) rules as its data."""
    cookies: dict[str, dict[str, object]] = {}
    for rule in rules:
        entry = cookies.setdefault(rule.name, {})
        for key in ("path", "domain", "secure", "same_site"):
            value = getattr(rule, key)
            if value is not None:
                entry[key] = value
    context = struct_pb2.Struct()
    context.update({"cookies": cookies})
    return lua.LuaPerRoute(
        source_code=core_base.DataSource(inline_string=COOKIE_REWRITE_LUA), filter_context=context
    )


# -- memoised per-filter configs (routes and virtual hosts share policy nodes) -------------------
# The same message object for the same node: the core packs each one once (cpx.xds.httpfilters.pack).

cors_policy_cached = functools.lru_cache(maxsize=4096)(cors_policy)
local_rate_limit_cached = functools.lru_cache(maxsize=4096)(local_rate_limit)
ip_filter_cached = functools.lru_cache(maxsize=4096)(ip_filter_per_route)


@functools.lru_cache(maxsize=4096)
def cookie_rewrite_cached(rules: tuple[CookieRewrite, ...]) -> lua.LuaPerRoute:
    return cookie_rewrite_per_route(rules)


# -- route action pieces ---------------------------------------------------------------------------


def hash_policy(policy: HashPolicy) -> route_components.RouteAction.HashPolicy | None:
    """Contour's hashPolicy; None for a policy without any input (Envoy would refuse it)."""
    out = route_components.RouteAction.HashPolicy(terminal=policy.terminal)
    # At most one input is set by the processor; as in Contour, a later one would win.
    if policy.header:
        out.header.header_name = policy.header
    if policy.query_parameter:
        out.query_parameter.name = policy.query_parameter
    if policy.cookie:
        out.cookie.name = policy.cookie
        # Always present: a zero TTL makes Envoy generate a session cookie (Contour's Cookie strategy).
        out.cookie.ttl.CopyFrom(seconds(policy.cookie_ttl))
        out.cookie.path = policy.cookie_path
    if policy.source_ip:
        out.connection_properties.source_ip = True
    if out.WhichOneof("policy_specifier") is None:
        return None
    return out


def internal_redirect_policy(policy: InternalRedirectPolicy) -> route_components.InternalRedirectPolicy:
    """Contour's internalRedirectPolicy: SafeOnly allows cross-scheme redirects only to https."""
    out = route_components.InternalRedirectPolicy(
        redirect_response_codes=list(policy.redirect_response_codes)
    )
    if policy.max_internal_redirects > 0:
        out.max_internal_redirects.value = policy.max_internal_redirects
    scheme = policy.allow_cross_scheme_redirect
    out.allow_cross_scheme_redirect = scheme in ("Always", "SafeOnly")
    if scheme == "SafeOnly":
        out.predicates.append(
            core_extension.TypedExtensionConfig(
                name=SAFE_CROSS_SCHEME, typed_config=to_any(safe_cross_scheme.SafeCrossSchemeConfig())
            )
        )
    if policy.deny_repeated_route_redirect:
        out.predicates.append(
            core_extension.TypedExtensionConfig(
                name=PREVIOUS_ROUTES, typed_config=to_any(previous_routes.PreviousRoutesConfig())
            )
        )
    return out
