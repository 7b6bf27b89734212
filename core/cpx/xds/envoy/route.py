"""DAG routes as Envoy ``Route`` and ``VirtualHost`` messages (Contour's envoy/v3/route.go).

``typed_per_filter_config`` comes from the HTTP filters plugins contribute (the builtin CORS, rate
limit, cookie-rewrite and RBAC ones included): see :mod:`cpx.xds.httpfilters`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal, NamedTuple, overload

from envoy.config.core.v3 import base_pb2 as core_base
from envoy.config.route.v3 import route_components_pb2 as route_components
from envoy.type.matcher.v3 import regex_pb2 as regex_matcher
from envoy.type.matcher.v3 import string_pb2 as string_matcher
from envoy.type.v3 import percent_pb2 as percent
from google.protobuf import any_pb2
from google.protobuf.message import Message

from cpx.dag.dag import VirtualHost
from cpx.dag.nodes import (
    DirectResponse,
    HeaderMatch,
    HeaderMatchKind,
    HeadersPolicy,
    MirrorPolicy,
    PathKind,
    QueryMatch,
    QueryMatchKind,
    Redirect,
    RegexRewrite,
    RetryPolicy,
    Route,
)
from cpx.dag.sorting import sorted_headers, sorted_query
from cpx.xds.envoy.common import embedded, seconds, timeout
from cpx.xds.envoy.filters import hash_policy, internal_redirect_policy
from cpx.xds.envoy.scoped import mark_upgrades
from cpx.xds.httpfilters import (
    HttpFilters,
    RouteCalls,
    route_action_fields,
    route_calls,
    route_configs,
    route_site,
    virtual_host_configs,
    virtual_host_fields,
    weighted_cluster_configs,
)
from cpx.xds.naming import FAILED_SHARE_CLUSTER, MAX_NAME_LENGTH, cluster_name, hashname

AUTHORITY_HEADER = ":authority"
# Contour's singleDNSLabelWildcardRegex: a wildcard host name matches exactly one DNS label.
# Case-insensitive, unlike Contour's: Host names are, and Envoy's domain match already is.
_SINGLE_LABEL = "(?i)^[a-z0-9]([-a-z0-9]*[a-z0-9])?"

_REDIRECT_CODES = {
    301: route_components.RedirectAction.MOVED_PERMANENTLY,
    302: route_components.RedirectAction.FOUND,
    303: route_components.RedirectAction.SEE_OTHER,
    307: route_components.RedirectAction.TEMPORARY_REDIRECT,
    308: route_components.RedirectAction.PERMANENT_REDIRECT,
}
_CLUSTER_NOT_FOUND_CODES = {
    500: route_components.RouteAction.INTERNAL_SERVER_ERROR,
    503: route_components.RouteAction.SERVICE_UNAVAILABLE,
    404: route_components.RouteAction.NOT_FOUND,
}
_OVERWRITE = core_base.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
_APPEND = core_base.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD


# -- virtual hosts ---------------------------------------------------------------------------------


def vhost_name(fqdn: str) -> str:
    return hashname(MAX_NAME_LENGTH, fqdn)


def wildcard_authority_match(fqdn: str) -> HeaderMatch | None:
    """The ``:authority`` regex that restricts ``*.foo.com`` to one label, as Contour adds it.

    Envoy's ``*.foo.com`` domain also matches ``a.b.foo.com``; Kubernetes wildcard hosts do not.
    """
    if not fqdn.startswith("*."):
        return None
    return HeaderMatch(
        name=AUTHORITY_HEADER, kind=HeaderMatchKind.REGEX, value=_SINGLE_LABEL + re.escape(fqdn[1:])
    )


def virtual_host_head(fqdn: str) -> route_components.VirtualHost:
    """A VirtualHost without its routes (they are appended as cached serialised bytes).

    Port numbers in Host never reach route matching: the HTTP connection manager strips them
    (``strip_any_host_port``, as Contour does), so the bare name is the only domain needed.
    """
    return route_components.VirtualHost(name=vhost_name(fqdn), domains=[fqdn])


def virtual_host_head_bytes(fqdn: str) -> bytes:
    """``virtual_host_head(fqdn)`` serialised, concatenated rather than built (one per host, at
    every start): its name (field 1, absent when empty) and its one domain (field 2)."""
    name = vhost_name(fqdn)
    return (embedded(1, name.encode()) if name else b"") + embedded(2, fqdn.encode())


def virtual_host_tail(vhost: VirtualHost, filters: HttpFilters = ()) -> route_components.VirtualHost:
    """The virtual-host-wide policies (the filters' per-virtual-host configs): the VirtualHost
    fields that follow ``routes``.

    Serialised after the routes, so that head + routes + tail is the canonical encoding.
    """
    return _tail(virtual_host_fields(filters, vhost), virtual_host_configs(filters, vhost))


def virtual_host_tail_bytes(vhost: VirtualHost, filters: HttpFilters = ()) -> bytes:
    """``virtual_host_tail`` serialised; most hosts get nothing from the filters: no message then."""
    fields, configs = virtual_host_fields(filters, vhost), virtual_host_configs(filters, vhost)
    if not (fields or configs):
        return b""
    data: bytes = _tail(fields, configs).SerializeToString(deterministic=True)
    return data


def _tail(fields: list[Message], configs: list[tuple[str, any_pb2.Any]]) -> route_components.VirtualHost:
    out = route_components.VirtualHost()
    for merged in fields:
        out.MergeFrom(merged)
    for name, config in configs:
        out.typed_per_filter_config[name].CopyFrom(config)
    return out


# -- matches ---------------------------------------------------------------------------------------


def regex(pattern: str) -> regex_matcher.RegexMatcher:
    # No engine_type: google_re2 is deprecated and RE2 is Envoy's default engine.
    return regex_matcher.RegexMatcher(regex=pattern)


def _string_match(
    kind: HeaderMatchKind | QueryMatchKind, value: str, ignore_case: bool
) -> string_matcher.StringMatcher:
    name = kind.value
    if name == "regex":
        # ignore_case has no effect on regexes (Envoy ignores it there).
        return string_matcher.StringMatcher(safe_regex=regex(value))
    matcher = string_matcher.StringMatcher(ignore_case=ignore_case)
    setattr(matcher, name, value)  # exact / prefix / suffix / contains share the field names
    return matcher


def header_matcher(header: HeaderMatch) -> route_components.HeaderMatcher:
    matcher = route_components.HeaderMatcher(
        name=header.name,
        invert_match=header.invert,
        treat_missing_header_as_empty=header.treat_missing_as_empty,
    )
    if header.kind is HeaderMatchKind.PRESENT:
        matcher.present_match = True
    else:
        matcher.string_match.CopyFrom(_string_match(header.kind, header.value, header.ignore_case))
    return matcher


def query_matcher(query: QueryMatch) -> route_components.QueryParameterMatcher:
    if query.kind is QueryMatchKind.PRESENT:
        return route_components.QueryParameterMatcher(name=query.name, present_match=True)
    return route_components.QueryParameterMatcher(
        name=query.name, string_match=_string_match(query.kind, query.value, query.ignore_case)
    )


def _fill_match(match: route_components.RouteMatch, route: Route, extra_header: HeaderMatch | None) -> None:
    """Set ``match`` (a Route's own, so nothing is copied) from ``route``."""
    match.SetInParent()
    path = route.path
    if path.kind is PathKind.PREFIX:
        match.prefix = path.value
    elif path.kind is PathKind.SEGMENT_PREFIX:
        # path_separated_prefix refuses a trailing slash; "/" itself is every path, a plain prefix.
        trimmed = path.value.rstrip("/")
        if trimmed:
            match.path_separated_prefix = trimmed
        else:
            match.prefix = "/"
    elif path.kind is PathKind.EXACT:
        match.path = path.value
    else:
        # The leading anchor changes nothing (Envoy matches the whole path) but keeps RE2's
        # program small for long literal prefixes, which is why Contour adds it.
        match.safe_regex.CopyFrom(regex(path.value if path.value.startswith("^") else "^" + path.value))
    # Most routes have neither header nor query conditions: nothing to sort or extend then.
    if route.headers or extra_header is not None:
        headers: Iterable[HeaderMatch] = route.headers
        if extra_header is not None and extra_header not in route.headers:
            headers = (*route.headers, extra_header)
        match.headers.extend(header_matcher(h) for h in sorted_headers(headers))
    if route.query:
        match.query_parameters.extend(query_matcher(q) for q in sorted_query(route.query))


# -- actions ---------------------------------------------------------------------------------------


def header_value_options(policy: HeadersPolicy) -> list[core_base.HeaderValueOption]:
    """``set`` overwrites, sorted by name like Contour's headerValueList; ``add`` appends, after."""
    options = [
        core_base.HeaderValueOption(
            header=core_base.HeaderValue(key=h.name, value=h.value), append_action=_OVERWRITE
        )
        for h in sorted(policy.set, key=lambda h: h.name)
    ]
    options += [
        core_base.HeaderValueOption(
            header=core_base.HeaderValue(key=h.name, value=h.value), append_action=_APPEND
        )
        for h in policy.add
    ]
    return options


def regex_rewrite(rewrite: RegexRewrite) -> regex_matcher.RegexMatchAndSubstitute:
    return regex_matcher.RegexMatchAndSubstitute(
        pattern=regex(rewrite.pattern), substitution=rewrite.substitution
    )


def redirect_action(redirect: Redirect) -> route_components.RedirectAction:
    action = route_components.RedirectAction(response_code=_REDIRECT_CODES.get(redirect.status_code, 0))
    if redirect.scheme:
        action.scheme_redirect = redirect.scheme
    if redirect.hostname:
        action.host_redirect = redirect.hostname
    if redirect.port:
        action.port_redirect = redirect.port
    if redirect.path:
        action.path_redirect = redirect.path
    elif redirect.prefix:
        action.prefix_rewrite = redirect.prefix
    elif redirect.regex_rewrite is not None:
        action.regex_rewrite.CopyFrom(regex_rewrite(redirect.regex_rewrite))
    return action


def direct_response_action(response: DirectResponse) -> route_components.DirectResponseAction:
    action = route_components.DirectResponseAction(status=response.status_code)
    if response.body:
        action.body.inline_string = response.body
    return action


def retry_policy(policy: RetryPolicy) -> route_components.RetryPolicy:
    out = route_components.RetryPolicy(
        retry_on=policy.retry_on, retriable_status_codes=list(policy.retriable_status_codes)
    )
    # Always explicit: 0 means "no retries" (Contour's count -1), while an unset field is Envoy's 1.
    out.num_retries.value = policy.num_retries
    if policy.per_try_timeout is not None:
        out.per_try_timeout.CopyFrom(timeout(policy.per_try_timeout))
    if policy.backoff is not None:
        out.retry_back_off.base_interval.CopyFrom(seconds(policy.backoff))
    return out


def mirror_policy(mirror: MirrorPolicy) -> route_components.RouteAction.RequestMirrorPolicy:
    pct = mirror.percent
    if float(pct).is_integer():
        fraction = percent.FractionalPercent(
            numerator=int(pct), denominator=percent.FractionalPercent.HUNDRED
        )
    else:
        fraction = percent.FractionalPercent(
            numerator=round(pct * 10_000), denominator=percent.FractionalPercent.MILLION
        )
    policy = route_components.RouteAction.RequestMirrorPolicy(cluster=cluster_name(mirror.cluster))
    policy.runtime_fraction.default_value.CopyFrom(fraction)
    return policy


def _single_simple_cluster(route: Route, calls: RouteCalls) -> bool:
    """One cluster without its own header policies or per-filter configs goes on ``route.cluster``
    (Contour's rule)."""
    if len(route.clusters) != 1 or route.failed_share is not None:
        return False
    only = route.clusters[0]
    return (
        only.request_headers.is_empty()
        and only.response_headers.is_empty()
        and not (calls.per_weighted_cluster and weighted_cluster_configs(calls, route, only))
    )


def weighted_clusters(route: Route, filters: HttpFilters = ()) -> route_components.WeightedCluster:
    """Split by weight; a cluster's own per-filter configs go on its entry."""
    return _weighted_clusters(route, route_calls(filters, route))


def _weighted_clusters(route: Route, calls: RouteCalls) -> route_components.WeightedCluster:
    clusters = route.clusters
    even = all(c.weight == 0 for c in clusters)  # no weights given: split evenly
    entries = []
    for cluster in clusters:
        entry = route_components.WeightedCluster.ClusterWeight(name=cluster_name(cluster))
        entry.weight.value = 1 if even else cluster.weight
        req, resp = cluster.request_headers, cluster.response_headers
        if not req.is_empty():
            entry.request_headers_to_add.extend(header_value_options(req))
            entry.request_headers_to_remove.extend(req.remove)
            if req.host_rewrite:
                entry.host_rewrite_literal = req.host_rewrite
        if not resp.is_empty():
            entry.response_headers_to_add.extend(header_value_options(resp))
            entry.response_headers_to_remove.extend(resp.remove)
        for name, config in weighted_cluster_configs(calls, route, cluster):
            entry.typed_per_filter_config[name].CopyFrom(config)
        entries.append(entry)
    if route.failed_share is not None:
        failed = route_components.WeightedCluster.ClusterWeight(name=FAILED_SHARE_CLUSTER)
        failed.weight.value = route.failed_share.weight
        entries.append(failed)
    entries.sort(key=lambda e: (e.name, e.weight.value))
    return route_components.WeightedCluster(clusters=entries)


def _fill_rewrites(action: route_components.RouteAction, route: Route) -> None:
    """Path and Host rewrites."""
    if route.prefix_rewrite is not None:
        action.prefix_rewrite = route.prefix_rewrite
    if route.regex_rewrite is not None:
        action.regex_rewrite.CopyFrom(regex_rewrite(route.regex_rewrite))
    if route.request_headers.host_rewrite:
        action.host_rewrite_literal = route.request_headers.host_rewrite
    elif route.request_headers.host_rewrite_header:
        action.host_rewrite_header = route.request_headers.host_rewrite_header


def _fill_action(action: route_components.RouteAction, route: Route, calls: RouteCalls) -> bool:
    """Set ``action`` (a Route's own, so nothing is copied) from ``route``; True if it may allow
    upgrades (websocket, or fields a filter merged in)."""
    action.SetInParent()
    if _single_simple_cluster(route, calls):
        action.cluster = cluster_name(route.clusters[0])
    else:
        action.weighted_clusters.CopyFrom(_weighted_clusters(route, calls))
    if route.failed_share is not None:
        action.cluster_not_found_response_code = _CLUSTER_NOT_FOUND_CODES[route.failed_share.status_code]
    policy = route.timeout_policy
    if policy.response is not None:
        action.timeout.CopyFrom(timeout(policy.response))
    if policy.idle is not None:
        action.idle_timeout.CopyFrom(timeout(policy.idle))
    if route.retry_policy is not None and route.retry_policy.retry_on:
        action.retry_policy.CopyFrom(retry_policy(route.retry_policy))
    _fill_rewrites(action, route)
    if route.mirrors:
        action.request_mirror_policies.extend(mirror_policy(m) for m in route.mirrors)
    if route.websocket:
        action.upgrade_configs.append(route_components.RouteAction.UpgradeConfig(upgrade_type="websocket"))
    for hashed in route.hash_policies:
        hashing = hash_policy(hashed)
        if hashing is not None:
            action.hash_policy.append(hashing)
    if route.internal_redirect is not None:
        action.internal_redirect_policy.CopyFrom(internal_redirect_policy(route.internal_redirect))
    merged = route_action_fields(calls, route)
    for fields in merged:
        action.MergeFrom(fields)
    return route.websocket or bool(merged)


@overload
def build_route(
    route: Route,
    secure: bool,
    extra_header: HeaderMatch | None = None,
    fqdn: str = "",
    filters: HttpFilters = (),
    guard_upgrades: bool = False,
    encoded: Literal[False] = False,
) -> route_components.Route: ...


@overload
def build_route(
    route: Route,
    secure: bool,
    extra_header: HeaderMatch | None,
    fqdn: str,
    filters: HttpFilters,
    guard_upgrades: bool,
    encoded: Literal[True],
) -> EncodedRoute: ...


def build_route(
    route: Route,
    secure: bool,
    extra_header: HeaderMatch | None = None,
    fqdn: str = "",
    filters: HttpFilters = (),
    guard_upgrades: bool = False,
    encoded: bool = False,
) -> route_components.Route | EncodedRoute:
    """One Envoy route; ``secure`` says whether it is served on an HTTPS virtual host.

    Contour adds HTTPS-upgrade routes to both virtual hosts, and only the insecure one redirects.
    ``fqdn`` names the virtual host (filters' per-route configs may depend on it, with ``secure``).
    ``guard_upgrades``: record the upgrades the route allows for the scoped shape's guard
    (:func:`cpx.xds.envoy.scoped.mark_upgrades`).  ``encoded``: also its (deterministic)
    serialisation, as an :class:`EncodedRoute`.

    A plain forward (a path, one cluster, nothing else: most Ingress routes) is encoded directly,
    as :func:`cpx.xds.envoy.common.embedded` pieces in field order (the canonical encoding), and
    parsed: a fraction of what setting its fields one by one and serialising them costs.
    """
    calls = route_calls(filters, route)
    parts = _plain_forward(route, secure, extra_header, fqdn, calls)
    if parts is not None:
        data = embedded(_MATCH, parts[0]) + embedded(_ACTION, parts[1])
        message = route_components.Route.FromString(data)
        return EncodedRoute(message, data, parts) if encoded else message
    message = _built(route, secure, extra_header, fqdn, calls, guard_upgrades)
    return EncodedRoute(message, message.SerializeToString(deterministic=True)) if encoded else message


class EncodedRoute(NamedTuple):
    """A route built with its serialisation."""

    message: route_components.Route
    data: bytes  # message serialised, deterministic
    # A plain forward's only fields, encoded: its match and its action (PLAIN_FORWARD_FIELDS).
    plain: tuple[bytes, bytes] | None = None


# The fields of a plain forward (EncodedRoute.plain).
PLAIN_FORWARD_FIELDS = ("match", "route")


def _built(
    route: Route,
    secure: bool,
    extra_header: HeaderMatch | None,
    fqdn: str,
    calls: RouteCalls,
    guard_upgrades: bool,
) -> route_components.Route:
    """Any route, field by field."""
    out = route_components.Route()
    _fill_match(out.match, route, extra_header)
    if route.https_redirect and not secure:
        out.redirect.https_redirect = True
    elif route.direct_response is not None:
        out.direct_response.CopyFrom(direct_response_action(route.direct_response))
    elif route.redirect is not None:
        out.redirect.CopyFrom(redirect_action(route.redirect))
    elif not route.clusters:
        # A route whose Services are all missing answers 503, like Contour's dangling references.
        failed = route.failed_share
        out.direct_response.status = 503 if failed is None else failed.status_code
    else:
        action = out.route
        # Only a route whose action may hold upgrade configs is looked at (reading them is not free).
        if _fill_action(action, route, calls) and guard_upgrades:
            mark_upgrades(out)
        if not route.request_headers.is_empty():
            out.request_headers_to_add.extend(header_value_options(route.request_headers))
            out.request_headers_to_remove.extend(route.request_headers.remove)
        if not route.response_headers.is_empty():
            out.response_headers_to_add.extend(header_value_options(route.response_headers))
            out.response_headers_to_remove.extend(route.response_headers.remove)
    if calls.per_route:
        for name, config in route_configs(calls, route, route_site(fqdn, secure)):
            out.typed_per_filter_config[name].CopyFrom(config)
    return out


# -- plain forwards, encoded directly --------------------------------------------------------------

# The Route fields build_route reads, by what reads them: a field added to Route must be placed
# here (tests/core/test_routes.py checks that every field is), so that _plain_forward never
# encodes a route that _built would give more.
PLAIN_FORWARD_READS = {
    "path": "encoded",
    "clusters": "encoded (one cluster without headers or per-filter configs)",
    "headers": "not plain",
    "query": "not plain",
    "failed_share": "not plain",
    "redirect": "not plain",
    "direct_response": "not plain",
    "https_redirect": "not plain",
    "websocket": "not plain",
    "timeout_policy": "not plain",
    "retry_policy": "not plain",
    "prefix_rewrite": "not plain",
    "regex_rewrite": "not plain",
    "request_headers": "not plain",
    "response_headers": "not plain",
    "mirrors": "not plain",
    "hash_policies": "not plain",
    "internal_redirect": "not plain",
    "cookie_rewrites": "filters (per-route configs)",
    "local_rate_limit": "filters (per-route configs)",
    "ip_filter": "filters (per-route configs)",
    "cors": "filters (per-route configs)",
    "attachments": "filters (per-route configs)",
    "precedence": "unused (sorting)",
    "origin": "unused (faults)",
}
_MATCH, _ACTION = 1, 2  # Route.match, Route.route
_CLUSTER = 1  # RouteAction.cluster
_PREFIX, _PATH, _SEPARATED_PREFIX = 1, 2, 14  # RouteMatch's path specifiers


def _plain_forward(
    route: Route, secure: bool, extra_header: HeaderMatch | None, fqdn: str, calls: RouteCalls
) -> tuple[bytes, bytes] | None:
    """A plain forward's match and action encoded, or None for any other route (_built's business)."""
    if (
        len(route.clusters) != 1
        or extra_header is not None
        or route.headers
        or route.query
        or route.failed_share is not None
        or route.redirect is not None
        or route.direct_response is not None
        or (route.https_redirect and not secure)
        or route.websocket
        or route.timeout_policy.response is not None
        or route.timeout_policy.idle is not None
        or route.retry_policy is not None
        or route.prefix_rewrite is not None
        or route.regex_rewrite is not None
        or route.mirrors
        or route.hash_policies
        or route.internal_redirect is not None
        or not route.request_headers.is_empty()
        or not route.response_headers.is_empty()
    ):
        return None
    path = route.path
    if path.kind is PathKind.PREFIX:
        match = embedded(_PREFIX, path.value.encode())
    elif path.kind is PathKind.EXACT:
        match = embedded(_PATH, path.value.encode())
    elif path.kind is PathKind.SEGMENT_PREFIX:
        trimmed = path.value.rstrip("/")  # as _fill_match
        match = embedded(_SEPARATED_PREFIX, trimmed.encode()) if trimmed else embedded(_PREFIX, b"/")
    else:
        return None
    if calls.route_action or not _single_simple_cluster(route, calls):
        return None
    if calls.per_route and route_configs(calls, route, route_site(fqdn, secure)):
        return None
    return match, embedded(_CLUSTER, cluster_name(route.clusters[0]).encode())
