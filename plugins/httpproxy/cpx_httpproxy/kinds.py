"""The kind this plugin owns, the core listeners it attaches routes to, the HTTP filters it names,
and the fields it leaves aside."""

from __future__ import annotations

from cpx import GroupVersionKind

HTTPPROXY = GroupVersionKind(group="projectcontour.io", version="v1", kind="HTTPProxy", plural="httpproxies")

# The core's static listeners (cpx.builtin.plugin); named here rather than imported so that
# importing this plugin never drags in the core's xDS caches.
HTTP_LISTENER = "ingress_http"
HTTPS_LISTENER = "ingress_https"

# The HTTP filters the plugin contributes (cpx_httpproxy.filterspecs) and the one they follow.
RBAC_FILTER = "envoy.filters.http.rbac"
JWT_FILTER = "envoy.filters.http.jwt_authn"
EXT_AUTHZ_FILTER = "envoy.filters.http.ext_authz"
RATE_LIMIT_FILTER = "envoy.filters.http.ratelimit"

# The names of the route attachment keys the filters' route functions read (HttpFilterSpec.route_keys),
# here so that declaring them imports none of the modules defining the keys.
JWT_REQUIREMENT_KEY = "httpproxy.jwt.requirement"
ROUTE_AUTHORIZATION_KEY = EXT_AUTHZ_FILTER
ROUTE_LIMITS_KEY = "httpproxy/route-global-rate-limits"
