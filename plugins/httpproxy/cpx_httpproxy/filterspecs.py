"""The HTTP filters' records, without importing the modules that do the work (:mod:`cpx_httpproxy.jwt`,
:mod:`cpx_httpproxy.authfilter`, :mod:`cpx_httpproxy.ratelimit`) or the model they read.

Every function of these filters answers from an attachment the processor put on a DAG node, under
a key defined in one of those modules: until that module is imported no node can carry the key,
so the answer is None without importing anything.  A run with no HTTPProxy (and neither global
authorization nor a rate limit service, which the processor provides on every build) then never
imports them; once the processor ran, each function is the module's own, one call away.
The route functions also name the keys they read (``route_keys``, by name, so declaring them
imports nothing): the core calls them only for a route carrying one of them, not for every route.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

from cpx import Config, Deferred, FilterSite, HttpFilterSpec

from cpx_httpproxy.kinds import (
    EXT_AUTHZ_FILTER,
    JWT_FILTER,
    JWT_REQUIREMENT_KEY,
    RATE_LIMIT_FILTER,
    RBAC_FILTER,
    ROUTE_AUTHORIZATION_KEY,
    ROUTE_LIMITS_KEY,
)
from cpx_httpproxy.optionspecs import EXTENSION_SERVICE_OPTION


class _OnceKeysExist:
    """``Deferred(target)``, answering None while ``keys`` (the module defining the attachment keys
    the function reads) is not imported."""

    __slots__ = ("_deferred", "_function", "keys")

    def __init__(self, keys: str, target: str) -> None:
        self.keys = keys
        self._deferred = Deferred(target)
        self._function: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        function = self._function
        if function is None:
            if self.keys not in sys.modules:
                return None
            function = self._function = self._deferred.resolve()
        return function(*args)


def _jwt(function: str) -> _OnceKeysExist:
    return _OnceKeysExist("cpx_httpproxy.jwt", "cpx_httpproxy.jwt:" + function)


def _ext_authz(function: str) -> _OnceKeysExist:
    return _OnceKeysExist("cpx_httpproxy.authorization", "cpx_httpproxy.authfilter:" + function)


def _rate_limit(function: str) -> _OnceKeysExist:
    return _OnceKeysExist("cpx_httpproxy.ratelimit", "cpx_httpproxy.ratelimit:" + function)


def _nowhere(site: FilterSite) -> None:
    return None


def _rate_limit_config(config: Config) -> Callable[[FilterSite], Any]:
    """On every connection manager while the configured service is usable; with no service
    configured, on none (the route and virtual host fields are programmed either way, as Contour does)."""
    if not config.option(EXTENSION_SERVICE_OPTION):
        return _nowhere
    from cpx_httpproxy import ratelimit  # noqa: PLC0415 (the processor, built at start-up then, needs it too)

    settings = ratelimit.service_settings(config)
    return _nowhere if settings is None else ratelimit.site_config(settings)


def http_filters(config: Config) -> Iterator[HttpFilterSpec]:
    """Contour's order: rbac, jwt_authn, ext_authz, ratelimit (global), router."""
    yield HttpFilterSpec(
        name=JWT_FILTER,
        config=_jwt("filter_config"),
        after=(RBAC_FILTER,),
        per_route_at=_jwt("per_route"),
        route_keys=(JWT_REQUIREMENT_KEY,),
        description="HTTPProxy virtualhost.jwtProviders (JWT verification on TLS virtual hosts)",
    )
    yield HttpFilterSpec(
        name=EXT_AUTHZ_FILTER,
        config=_ext_authz("filter_config"),
        after=(RBAC_FILTER, JWT_FILTER),
        per_route_at=_ext_authz("per_route"),
        route_keys=(ROUTE_AUTHORIZATION_KEY,),
        description="external authorization (virtualhost.authorization, authPolicy), gRPC or HTTP",
    )
    yield HttpFilterSpec(
        name=RATE_LIMIT_FILTER,
        config=_rate_limit_config(config),
        after=(RBAC_FILTER, EXT_AUTHZ_FILTER),  # both always contributed
        per_route=_rate_limit("per_route"),
        route_action=_rate_limit("route_action"),
        route_keys=(ROUTE_LIMITS_KEY,),
        virtual_host_fields=_rate_limit("virtual_host_fields"),
        description="HTTPProxy global rate limiting (rateLimitPolicy.global)",
    )
