"""HTTPProxy policies to DAG values (Contour's ``internal/dag/policy.go`` and the policy parts of
``httpproxy_processor.go``).

Each function turns one model policy into its DAG node and raises :class:`PolicyError` with
Contour's message when the policy is invalid; :mod:`cpx_httpproxy.routebuild` decides which
status error (type, reason, prefix) that becomes.  Functions that only warn take the
``ProxyStatus``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

import attrs
import re2
from cpx import MAX_ENVOY_DURATION_SECONDS, DurationError, go_quote, parse_go_duration_nanos, parse_timeout
from cpx.dag import (
    CookieRewrite,
    CORSPolicy,
    DirectResponse,
    Duration,
    HashPolicy,
    HeaderValue,
    HealthCheck,
    InternalRedirectPolicy,
    IPFilter,
    IPRule,
    LocalRateLimit,
    PathKind,
    Redirect,
    RetryPolicy,
    Route,
    SlowStart,
    TimeoutPolicy,
)

from cpx_httpproxy import model
from cpx_httpproxy.durations import parse_max_age
from cpx_httpproxy.headers import canonical_header_key, escape_header_value, valid_header_name
from cpx_httpproxy.status import IP_FILTER_ERROR, SPEC_ERROR, TCP_PROXY_ERROR, ProxyStatus

# Load balancer strategies (Contour's LoadBalancerPolicy* constants).
ROUND_ROBIN = "RoundRobin"
WEIGHTED_LEAST_REQUEST = "WeightedLeastRequest"
RANDOM = "Random"
COOKIE = "Cookie"
REQUEST_HASH = "RequestHash"
STRATEGIES = frozenset({ROUND_ROBIN, WEIGHTED_LEAST_REQUEST, RANDOM, COOKIE, REQUEST_HASH})
SESSION_AFFINITY_COOKIE = "X-Contour-Session-Affinity"

# Contour's health check defaults (internal/envoy/healthcheck.go).
HEALTH_CHECK_HOST = "contour-envoy-healthcheck"
HEALTH_CHECK_INTERVAL = 10.0
HEALTH_CHECK_TIMEOUT = 2.0
HEALTH_CHECK_UNHEALTHY_THRESHOLD = 3
HEALTH_CHECK_HEALTHY_THRESHOLD = 2

RATE_LIMIT_UNITS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}
DEFAULT_RATE_LIMIT_STATUS = 429

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
# An exact CORS origin: scheme://host[:port], nothing else (what Go's url.Parse round-trips).
_ORIGIN = re.compile(r"([a-z][a-z0-9+.-]*)://([-A-Za-z0-9._~!$&'()*+,;=:\[\]<>\"%]+)")


class PolicyError(ValueError):
    """An invalid policy; the message is Contour's."""


# -- timeouts and retries ----------------------------------------------------------------------

_NO_TIMEOUTS = TimeoutPolicy()  # frozen: shared by every route without a timeoutPolicy


def timeout_policies(policy: model.TimeoutPolicy | None) -> tuple[TimeoutPolicy, Duration | None]:
    """Contour's timeoutPolicy: the route's response/idle timeouts and the clusters' idle
    connection timeout.  PolicyError: ``error parsing response timeout: unable to parse ...``."""
    if policy is None:
        return _NO_TIMEOUTS, None
    parsed = []
    for what, text in (
        ("response timeout", policy.response),
        ("idle timeout", policy.idle),
        ("idle connection timeout", policy.idle_connection),
    ):
        try:
            parsed.append(parse_timeout(text))
        except DurationError as err:
            raise PolicyError(f"error parsing {what}: {err}") from None
    response, idle, idle_connection = parsed
    return TimeoutPolicy(response=response, idle=idle), idle_connection


def retry_policy(policy: model.RetryPolicy | None) -> RetryPolicy | None:
    """Contour's retryPolicy: count -1 ⇒ 0 retries, 0 or 1 ⇒ 1; retryOn joined (default 5xx);
    an unparsable (or negative) perTryTimeout means Envoy's default."""
    if policy is None:
        return None
    count = policy.count
    if count == -1:
        count = 0
    elif count <= 1:
        count = 1
    per_try: Duration | None = None
    try:
        nanos = parse_go_duration_nanos(policy.per_try_timeout)
    except DurationError:
        nanos = 0
    if nanos > 0:
        per_try = Duration(seconds=nanos / 1e9)
    return RetryPolicy(
        retry_on=",".join(policy.retry_on) if policy.retry_on else "5xx",
        num_retries=uint32(count),
        per_try_timeout=per_try,
        retriable_status_codes=tuple(c for c in policy.retriable_status_codes if 0 <= c <= UINT32_MAX),
    )


# -- Envoy's integer ranges ----------------------------------------------------------------------
UINT32_MAX = 2**32 - 1
# The largest duration Envoy accepts, in seconds (it converts durations to int64 nanoseconds).
MAX_DURATION_SECONDS = MAX_ENVOY_DURATION_SECONDS


def uint32(value: int) -> int:
    """A schema-valid int64 clamped into Envoy's uint32 (Contour truncates; cpx must not crash)."""
    return min(max(value, 0), UINT32_MAX)


def fit_weights(weights: Sequence[int]) -> list[int]:
    """Weights scaled down, proportionally, so that their sum fits Envoy's uint32 total."""
    total = sum(max(w, 0) for w in weights)
    if total <= UINT32_MAX:
        return [max(w, 0) for w in weights]
    return [max(w, 0) * UINT32_MAX // total for w in weights]


def _seconds(value: int, default: float) -> float:
    return float(min(value, MAX_DURATION_SECONDS)) if value > 0 else default


# -- load balancing ------------------------------------------------------------------------------


def load_balancer_strategy(policy: model.LoadBalancerPolicy | None) -> str:
    """Contour's loadBalancerPolicy: a known strategy, or "" (RoundRobin) for anything else."""
    if policy is None or policy.strategy not in STRATEGIES or policy.strategy == ROUND_ROBIN:
        return ""
    return policy.strategy


def request_hash_policies(
    policy: model.LoadBalancerPolicy | None, status: ProxyStatus
) -> tuple[tuple[HashPolicy, ...], str]:
    """Contour's loadBalancerRequestHashPolicies: the hash policies and the strategy to use
    ("" = RoundRobin).  Invalid request-hash entries are dropped with SpecError/IgnoredField
    warnings; a RequestHash strategy without a valid entry falls back to RoundRobin."""
    strategy = load_balancer_strategy(policy)
    if policy is None:
        return (), strategy
    if strategy == COOKIE:
        return (HashPolicy(cookie=SESSION_AFFINITY_COOKIE, cookie_ttl=0.0, cookie_path="/"),), COOKIE
    if strategy != REQUEST_HASH:
        return (), strategy
    out: list[HashPolicy] = []
    for entry in policy.request_hash_policies:
        hashed = _request_hash_policy(entry)
        if isinstance(hashed, HashPolicy) and any(_hash_input(hashed) == _hash_input(p) for p in out):
            hashed = _duplicate_hash_input(hashed)
        if isinstance(hashed, str):
            status.add_warning(SPEC_ERROR, "IgnoredField", hashed)
        else:
            out.append(hashed)
    if not out:
        status.add_warning(
            SPEC_ERROR,
            "IgnoredField",
            "ignoring invalid request hash policy options, setting load balancer strategy to default "
            + ROUND_ROBIN,
        )
        return (), ROUND_ROBIN
    return tuple(out), REQUEST_HASH


def _request_hash_policy(entry: model.RequestHashPolicy) -> HashPolicy | str:
    """One request hash entry's policy, or Contour's words for why it is ignored (duplicates are
    the caller's to find)."""
    set_count = (
        int(entry.hash_source_ip)
        + int(entry.header_hash_options is not None)
        + int(entry.query_parameter_hash_options is not None)
    )
    if set_count != 1:
        return (
            "ignoring invalid request hash policy, must set exactly one of hashSourceIP or "
            "headerHashOptions or queryParameterHashOptions"
        )
    if entry.header_hash_options is not None:
        name = canonical_header_key(entry.header_hash_options.header_name)
        if not valid_header_name(name):
            return (
                f"ignoring invalid header hash policy options with invalid header name {go_quote(name)}: "
                "[a valid HTTP header must consist of alphanumeric characters or '-' "
                "(e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')]"
            )
        return HashPolicy(header=name, terminal=entry.terminal)
    if entry.query_parameter_hash_options is not None:
        # Contour lower-cases parameter names: most people assume they are case-insensitive.
        name = entry.query_parameter_hash_options.parameter_name.lower()
        if not name:
            return (
                "ignoring invalid query parameter hash policy options with an invalid empty query "
                "parameter name"
            )
        return HashPolicy(query_parameter=name, terminal=entry.terminal)
    return HashPolicy(source_ip=True, terminal=entry.terminal)  # hashSourceIP, the only one left


def _hash_input(policy: HashPolicy) -> tuple[bool, str | None, str | None]:
    """What a request hash policy hashes: a second policy on the same input is a duplicate."""
    return policy.source_ip, policy.header, policy.query_parameter


def _duplicate_hash_input(policy: HashPolicy) -> str:
    if policy.source_ip:
        return "ignoring invalid request hash policy, hashSourceIP specified multiple times"
    if policy.header is not None:
        return f"ignoring invalid header hash policy options with duplicated header name {policy.header}"
    return (
        "ignoring invalid query parameter hash policy options with duplicated query "
        f"parameter name {policy.query_parameter}"
    )


def tcp_load_balancer_strategy(policy: model.LoadBalancerPolicy | None, status: ProxyStatus) -> str:
    """A TCP proxy's strategy: Cookie and RequestHash are ignored with a TCPProxyError warning."""
    strategy = load_balancer_strategy(policy)
    if strategy in (COOKIE, REQUEST_HASH):
        status.add_warning(
            TCP_PROXY_ERROR,
            "IgnoredField",
            f'ignoring field "Spec.TCPProxy.LoadBalancerPolicy"; {strategy} load balancer policy is '
            "not supported for TCPProxies",
        )
        return ""
    return strategy


# -- redirects and direct responses ----------------------------------------------------------------


def redirect(policy: model.HTTPRequestRedirectPolicy | None) -> Redirect | None:
    """Contour's redirectRoutePolicy; PolicyError when both path and prefix are given."""
    if policy is None:
        return None
    if policy.path and policy.prefix:
        raise PolicyError("cannot specify both redirect path and redirect prefix")
    return Redirect(
        scheme=policy.scheme or None,
        hostname=policy.hostname or None,
        port=policy.port or None,
        path=policy.path or None,
        prefix=policy.prefix or None,
        status_code=policy.status_code or 302,
    )


def direct_response(policy: model.HTTPDirectResponsePolicy | None) -> DirectResponse | None:
    if policy is None:
        return None
    return DirectResponse(status_code=policy.status_code, body=policy.body or None)


def internal_redirect(policy: model.HTTPInternalRedirectPolicy | None) -> InternalRedirectPolicy | None:
    if policy is None:
        return None
    cross_scheme = policy.allow_cross_scheme_redirect
    return InternalRedirectPolicy(
        max_internal_redirects=uint32(policy.max_internal_redirects),
        redirect_response_codes=tuple(policy.redirect_response_codes),
        allow_cross_scheme_redirect=cross_scheme if cross_scheme in ("Always", "SafeOnly") else "Never",
        deny_repeated_route_redirect=policy.deny_repeated_route_redirect,
    )


# -- cookies -------------------------------------------------------------------------------------


def cookie_rewrites(policies: Sequence[model.CookieRewritePolicy]) -> tuple[CookieRewrite, ...]:
    """Contour's cookieRewritePolicies: names unique, at least one attribute each."""
    out: list[CookieRewrite] = []
    names: set[str] = set()
    for policy in policies:
        if policy.name in names:
            raise PolicyError(f"duplicate cookie rewrite rule for cookie {go_quote(policy.name)}")
        names.add(policy.name)
        rewrite = CookieRewrite(
            name=policy.name,
            path=policy.path_rewrite.value if policy.path_rewrite is not None else None,
            domain=policy.domain_rewrite.value if policy.domain_rewrite is not None else None,
            secure=policy.secure,
            same_site=policy.same_site or None,
        )
        if rewrite == CookieRewrite(name=policy.name):
            raise PolicyError(f"no attributes rewritten for cookie {go_quote(policy.name)}")
        out.append(rewrite)
    return tuple(out)


# -- rate limiting -------------------------------------------------------------------------------


def local_rate_limit(policy: model.RateLimitPolicy | None) -> LocalRateLimit | None:
    """Contour's localRateLimitPolicy (the ``local`` half of a rateLimitPolicy)."""
    local = policy.local if policy is not None else None
    if local is None:
        return None
    if local.requests <= 0:
        raise PolicyError(f"invalid requests value {local.requests} in local rate limit policy")
    unit = RATE_LIMIT_UNITS.get(local.unit)
    if unit is None:
        raise PolicyError(f"invalid unit {go_quote(local.unit)} in local rate limit policy")
    headers: dict[str, HeaderValue] = {}
    for header in local.response_headers_to_add:
        key = canonical_header_key(header.name)
        if key in headers:
            raise PolicyError(f"duplicate header addition: {go_quote(key)}")
        if not valid_header_name(key):
            raise PolicyError(
                f"invalid header name {go_quote(key)}: [a valid HTTP header must consist of alphanumeric "
                "characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')]"
            )
        headers[key] = HeaderValue(name=key, value=escape_header_value(header.value, {}))
    return LocalRateLimit(
        # Envoy's bucket holds requests + burst tokens, a uint32.
        requests=uint32(local.requests),
        unit_seconds=unit,
        burst=min(uint32(local.burst), UINT32_MAX - uint32(local.requests)),
        status_code=local.response_status_code or DEFAULT_RATE_LIMIT_STATUS,
        response_headers=tuple(headers.values()),
    )


# -- IP filters ----------------------------------------------------------------------------------


def ip_filter(
    allow: Sequence[model.IPFilterPolicy], deny: Sequence[model.IPFilterPolicy], status: ProxyStatus
) -> IPFilter | None:
    """Contour's toIPFilterRules: None when neither list is set.

    Records IPFilterError/IncompatibleIPAddressFilters when both are set, and
    IPFilterError/InvalidCIDR for every unparsable CIDR, then raises PolicyError (whose message
    is the last parse error, for the vhost's IPFilterPolicyNotValid).  Contour only fails when
    the *last* CIDR is bad (its error variable is overwritten in the loop); cpx fails on any.
    """
    if allow and deny:
        status.add_error(
            IP_FILTER_ERROR,
            "IncompatibleIPAddressFilters",
            "cannot specify both `ipAllowPolicy` and `ipDenyPolicy`",
        )
        raise PolicyError("invalid ip filter")
    policies = allow or deny
    if not policies:
        return None
    rules: list[IPRule] = []
    failure: str | None = None
    for policy in policies:
        cidr, error = parse_cidr(policy.cidr)
        if cidr is None:
            failure = error
            status.add_error(IP_FILTER_ERROR, "InvalidCIDR", f"{policy.cidr} failed to parse: {error}")
            continue
        rules.append(IPRule(cidr=cidr, remote=policy.source == "Remote"))
    if failure is not None:
        raise PolicyError(failure)
    return IPFilter(allow=bool(allow), rules=tuple(rules))


def parse_cidr(text: str) -> tuple[str | None, str]:
    """(normalised CIDR, "") or (None, Go's ParseCIDR error); a bare address is /32 or /128."""
    unparsed = text
    if "/" not in unparsed:
        unparsed += "/128" if ":" in unparsed else "/32"
    address, _, length = unparsed.partition("/")
    try:
        if not (length.isascii() and length.isdigit()) or (length != "0" and length.startswith("0")):
            raise ValueError(length)
        network = ipaddress.ip_network(f"{address}/{int(length)}", strict=False)
    except ValueError:
        return None, f"invalid CIDR address: {unparsed}"
    return str(network), ""


# -- CORS ----------------------------------------------------------------------------------------


def cors_policy(policy: model.CORSPolicy | None) -> CORSPolicy | None:
    """Contour's toCORSPolicy; PolicyError with its messages."""
    if policy is None:
        return None
    if not policy.allow_origin:
        raise PolicyError("invalid allowed origin configuration with length 0")
    origins = []
    for origin in policy.allow_origin:
        if origin == "*" or _exact_origin(origin):
            origins.append(origin)
            continue
        try:
            re2.compile(origin, options=_RE2_OPTIONS)
        except re2.error:
            raise PolicyError(
                f"invalid allowed origin {go_quote(origin)}: "
                "allowed origin is invalid exact match and invalid regex match"
            ) from None
        origins.append("regex:" + origin)
    if not policy.allow_methods:
        raise PolicyError("invalid allowed methods configuration with length 0")
    try:
        max_age = parse_max_age(policy.max_age)
    except DurationError as err:
        raise PolicyError(str(err)) from None
    return CORSPolicy(
        allow_origin=tuple(origins),
        allow_methods=tuple(policy.allow_methods),
        allow_headers=tuple(policy.allow_headers),
        expose_headers=tuple(policy.expose_headers),
        allow_credentials=policy.allow_credentials,
        max_age=max_age,
        allow_private_network=policy.allow_private_network,
    )


def _exact_origin(origin: str) -> bool:
    """Whether Go's url.Parse gives back exactly ``scheme://host[:port]`` for ``origin``."""
    match = _ORIGIN.fullmatch(origin)
    if match is None:
        return False
    host = match.group(2)
    if host.startswith("["):  # [IPv6]:port
        end = host.find("]")
        if end < 0:
            return False
        port = host[end + 1 :]
        if port and not port.startswith(":"):
            return False
        port = port[1:]
    else:
        _, _, port = host.rpartition(":") if ":" in host else ("", "", "")
    return port == "" or (port.isascii() and port.isdigit())


# -- health checks -------------------------------------------------------------------------------


def http_health_check(policy: model.HTTPHealthCheckPolicy | None) -> HealthCheck | None:
    """An HTTP health check with Contour's defaults for unset (zero) fields.

    Expected status ranges are half-open [start, end) within 100..600 (Envoy refuses others).
    """
    if policy is None:
        return None
    statuses = []
    for status_range in policy.expected_statuses:
        start, end = status_range.start, status_range.end
        if not 100 <= start < 600:
            raise PolicyError(f"expected status range start {start} is not in the range 100-599")
        if not 100 < end <= 600:
            raise PolicyError(f"expected status range end {end} is not in the range 101-600")
        if start >= end:
            raise PolicyError(f"expected status range [{start}, {end}) is empty: start must be less than end")
        statuses.append((start, end))
    return HealthCheck(
        path=policy.path,
        host=policy.host or HEALTH_CHECK_HOST,
        interval=_seconds(policy.interval_seconds, HEALTH_CHECK_INTERVAL),
        timeout=_seconds(policy.timeout_seconds, HEALTH_CHECK_TIMEOUT),
        unhealthy_threshold=uint32(policy.unhealthy_threshold_count) or HEALTH_CHECK_UNHEALTHY_THRESHOLD,
        healthy_threshold=uint32(policy.healthy_threshold_count) or HEALTH_CHECK_HEALTHY_THRESHOLD,
        expected_statuses=tuple(statuses),
    )


def tcp_health_check(policy: model.TCPHealthCheckPolicy | None) -> HealthCheck | None:
    """A TCP health check (no path) with Contour's defaults for unset (zero) fields."""
    if policy is None:
        return None
    return HealthCheck(
        path="",
        interval=_seconds(policy.interval_seconds, HEALTH_CHECK_INTERVAL),
        timeout=_seconds(policy.timeout_seconds, HEALTH_CHECK_TIMEOUT),
        unhealthy_threshold=uint32(policy.unhealthy_threshold_count) or HEALTH_CHECK_UNHEALTHY_THRESHOLD,
        healthy_threshold=uint32(policy.healthy_threshold_count) or HEALTH_CHECK_HEALTHY_THRESHOLD,
    )


# -- slow start ----------------------------------------------------------------------------------


def slow_start(policy: model.SlowStartPolicy | None, strategy: str) -> SlowStart | None:
    """Contour's slowStartConfig; only with RoundRobin or WeightedLeastRequest."""
    if policy is None:
        return None
    if strategy not in ("", ROUND_ROBIN, WEIGHTED_LEAST_REQUEST):
        raise PolicyError(
            "slow start is only supported with RoundRobin or WeightedLeastRequest load balancer strategy"
        )
    try:
        window = parse_go_duration_nanos(policy.window) / 1e9
    except DurationError as err:
        raise PolicyError(f"error parsing window: {err} on slow start") from None
    aggression = 1.0
    if policy.aggression:
        try:
            aggression = _go_float(policy.aggression)
        except ValueError:
            raise PolicyError(
                f'error parsing aggression: "{policy.aggression}" is not a decimal number on slow start'
            ) from None
    return SlowStart(window=window, aggression=aggression, min_weight_percent=policy.min_weight_percent)


_GO_FLOAT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.I)


def _go_float(text: str) -> float:
    """strconv.ParseFloat for the decimal forms (Python's float() is more lenient with spaces)."""
    if _GO_FLOAT.fullmatch(text) is None:
        raise ValueError(text)
    return float(text)


# -- path rewriting ------------------------------------------------------------------------------


def replace_prefix_pairs(policy: model.PathRewritePolicy | None) -> tuple[tuple[str, str], ...]:
    if policy is None:
        return ()
    return tuple((r.prefix, r.replacement) for r in policy.replace_prefix)


def check_prefix_replacements(pairs: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """Contour's prefixReplacementsAreValid: None, or (reason, message) of the first problem."""
    seen: set[str] = set()
    for prefix, _ in pairs:
        if prefix in seen:
            if prefix:
                return "DuplicateReplacement", f"duplicate replacement prefix '{prefix}'"
            return "AmbiguousReplacement", "ambiguous prefix replacement"
        seen.add(prefix)
    return None


def resolve_prefix_rewrite(replace_prefix: Iterable[tuple[str, str]], merged_prefix: str) -> str | None:
    """The replacement for a route whose merged prefix condition is ``merged_prefix``: the entry
    whose (non-empty) prefix equals it, else the entry with an empty prefix, else None."""
    pairs = list(replace_prefix)
    for prefix, replacement in pairs:
        if prefix and prefix == merged_prefix:
            return replacement
    for prefix, replacement in pairs:
        if not prefix:
            return replacement
    return None


def expand_prefix_routes(routes: Sequence[Route]) -> list[Route]:
    """Contour's expandPrefixMatches, on the routes of one proxy (includes' routes included).

    Prefix routes are grouped by their prefix without trailing slashes (header and query
    conditions are ignored, as in Contour).  A group of one route that rewrites its prefix, and
    whose prefix is not ``/``, becomes two routes so ``/foo`` and ``/foo/...`` both rewrite
    cleanly: ``/foo`` → replacement without trailing slash (``/`` if that leaves nothing), and
    ``/foo/`` → that replacement plus ``/``.  Other routes pass through unchanged.
    """
    if all(route.prefix_rewrite is None for route in routes):
        return list(routes)  # nothing to expand: what most proxies have
    groups: dict[str, list[int]] = {}
    for index, route in enumerate(routes):
        if route.path.kind is PathKind.PREFIX:
            value = route.path.value
            groups.setdefault(value if value == "/" else value.rstrip("/"), []).append(index)
    extra: dict[int, Route] = {}
    replaced: dict[int, Route] = {}
    for prefix, members in groups.items():
        if len(members) != 1:
            continue
        route = routes[members[0]]
        if route.prefix_rewrite is None or route.path.value == "/":
            continue
        trimmed = route.prefix_rewrite.rstrip("/")
        replaced[members[0]] = attrs.evolve(
            route, path=attrs.evolve(route.path, value=prefix), prefix_rewrite=trimmed or "/"
        )
        extra[members[0]] = attrs.evolve(
            route, path=attrs.evolve(route.path, value=prefix + "/"), prefix_rewrite=trimmed + "/"
        )
    out: list[Route] = []
    for index, route in enumerate(routes):
        out.append(replaced.get(index, route))
        if index in extra:
            out.append(extra[index])
    return out
