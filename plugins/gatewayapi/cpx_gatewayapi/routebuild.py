"""One HTTPRoute's rules as DAG routes, independent of the listeners it attaches to.

Each match of each rule is one :class:`cpx.dag.Route`.  Precedence between equally specific matches
(gateway.networking.k8s.io: older route, then namespace/name, then rule and match order) is the
route's ``precedence``.  Bad backends keep their weight as the route's failed share, answered 500
(503 for gRPC) by Envoy, as the spec asks; a rule left with none answers that status.  A rule
cpx cannot serve (unsupported filter, bad regex) is dropped and reported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from cpx import ObjectKey, SourceView
from cpx.dag import (
    Cluster,
    DirectResponse,
    Duration,
    FailedShare,
    MirrorPolicy,
    Redirect,
    RetryPolicy,
    Route,
    TimeoutPolicy,
)

from cpx_gatewayapi import backends, filters, grpcmatch, routematch, sessions
from cpx_gatewayapi.durations import duration
from cpx_gatewayapi.filters import Effects, FilterProblem
from cpx_gatewayapi.model import GRPCROUTE_KIND

# Rules and matches per route are capped by the schema (16 and 64): room to spare.
_RULE_SLOTS, _MATCH_SLOTS = 1_000, 1_000
NO_BACKENDS = DirectResponse(status_code=500)
_MIN_BACKOFF = 0.002  # seconds: GEP-2257 allows 1 ms, Envoy's base interval must exceed it


@attrs.frozen
class _KindRules:
    """What differs between the route kinds that share this translation."""

    matches: Callable[[Mapping[str, Any]], list[routematch.Match]]
    no_backends: DirectResponse  # the answer of a rule without a usable backend
    # The CRD's default when ``rules`` is absent (HTTPRoute: one rule matching every path, without
    # backends; GRPCRoute: none).
    default_rules: tuple[Mapping[str, Any], ...]


_HTTPROUTE_RULES = _KindRules(routematch.matches, NO_BACKENDS, ({},))
# gRPC: 503 is what clients read as UNAVAILABLE, which the spec asks for.
_KIND_RULES = {GRPCROUTE_KIND: _KindRules(grpcmatch.matches, DirectResponse(status_code=503), ())}


@attrs.frozen(kw_only=True)
class RuleRoutes:
    routes: tuple[Route, ...]
    # A redirect that names neither scheme nor port keeps the Gateway listener's port.
    redirect_keeps_listener_port: bool = False


@attrs.define
class Translated:
    """A route's rules, and what went wrong building them."""

    rules: list[RuleRoutes] = attrs.field(factory=list)
    dropped: list[str] = attrs.field(factory=list)  # "Dropped Rule" messages
    backend_problems: list[backends.BackendProblem] = attrs.field(factory=list)

    @property
    def all_dropped(self) -> bool:
        return bool(self.dropped) and not self.rules


def translate(source: SourceView, obj: Mapping[str, Any], key: ObjectKey, rank: int) -> Translated:
    """The rules of route ``obj`` (HTTPRoute or GRPCRoute), the ``rank``-th in precedence order."""
    out = Translated()
    spec = obj.get("spec") or {}
    rules = (
        spec.get("rules") if "rules" in spec else _KIND_RULES.get(key.kind, _HTTPROUTE_RULES).default_rules
    )
    for index, rule in enumerate(rules or ()):
        if not isinstance(rule, Mapping):
            continue
        try:
            out.rules.append(
                _rule(source, rule, key, index, rank * _RULE_SLOTS + index, out.backend_problems)
            )
        except FilterProblem as err:
            out.dropped.append(f"rule {index}: {err}")
    return out


def _rule(
    source: SourceView,
    rule: Mapping[str, Any],
    key: ObjectKey,
    rule_index: int,
    slot: int,
    problems: list[backends.BackendProblem],
) -> RuleRoutes:
    effects = _with_backend_filters(filters.effects(rule.get("filters")), rule)
    kind_rules = _KIND_RULES.get(key.kind, _HTTPROUTE_RULES)
    matches = kind_rules.matches(rule)
    filters.check_prefix_modifier(effects.path_rewrite, [m.path for m in matches])
    if effects.redirect is not None:
        filters.check_prefix_modifier(effects.redirect.path, [m.path for m in matches])
    clusters, failed_weight, websocket = _clusters(source, rule, key, problems)
    mirrors = tuple(_mirrors(source, effects, key, problems))
    timeouts, retry = _timeouts(rule)
    session = sessions.parse(rule.get("sessionPersistence"), key, rule_index)
    request_headers = effects.request_headers
    if effects.host_rewrite is not None:
        request_headers = attrs.evolve(request_headers, host_rewrite=effects.host_rewrite)
    routes = []
    for index, match in enumerate(matches):
        route = Route(
            path=match.path,
            headers=match.headers,
            query=match.query,
            precedence=slot * _MATCH_SLOTS + index,
            cors=effects.cors,
            origin=key,
        )
        if effects.redirect is not None:
            route = attrs.evolve(route, redirect=_redirect(effects, match.path))
        elif not clusters:
            route = attrs.evolve(route, direct_response=kind_rules.no_backends)
        else:
            prefix_rewrite, regex_rewrite = (
                effects.path_rewrite.rewrite(match.path) if effects.path_rewrite else (None, None)
            )
            route = attrs.evolve(
                route,
                clusters=clusters,
                websocket=websocket,
                request_headers=request_headers,
                response_headers=effects.response_headers,
                prefix_rewrite=prefix_rewrite,
                regex_rewrite=regex_rewrite,
                mirrors=mirrors,
                timeout_policy=timeouts,
                retry_policy=retry,
                failed_share=_failed_share(failed_weight, kind_rules.no_backends),
            )
            if session is not None:
                route = attrs.evolve(
                    route, attachments=route.attachments.set(sessions.SESSION, session, origin=key)
                )
        routes.append(route)
    redirect = effects.redirect
    keeps_port = redirect is not None and redirect.port is None and redirect.scheme is None
    return RuleRoutes(routes=tuple(routes), redirect_keeps_listener_port=keeps_port)


def _with_backend_filters(effects: Effects, rule: Mapping[str, Any]) -> Effects:
    """A rule's only backendRef may carry what Envoy does per route (redirect, rewrites, mirrors,
    CORS): it is the rule's then.  With several backends only header modifiers can be per backend."""
    refs = [ref for ref in rule.get("backendRefs") or () if isinstance(ref, Mapping)]
    own = [filters.effects(ref.get("filters")) for ref in refs]
    lifted = [e for e in own if e.redirect or e.path_rewrite or e.host_rewrite or e.mirrors or e.cors]
    if not lifted:
        return effects
    if len(refs) > 1:
        raise FilterProblem(
            "RequestRedirect, URLRewrite, RequestMirror and CORS filters of a backendRef "
            "are only supported on a rule with one backendRef"
        )
    [backend] = lifted
    return attrs.evolve(
        effects,
        redirect=backend.redirect or effects.redirect,
        path_rewrite=backend.path_rewrite or effects.path_rewrite,
        host_rewrite=backend.host_rewrite or effects.host_rewrite,
        mirrors=(*effects.mirrors, *backend.mirrors),
        cors=backend.cors or effects.cors,
    )


def _redirect(effects: Effects, path: Any) -> Redirect:
    spec = effects.redirect
    assert spec is not None
    port = spec.port if spec.port is not None else filters.SCHEME_PORTS.get(spec.scheme or "")
    redirect = Redirect(scheme=spec.scheme, hostname=spec.hostname, port=port, status_code=spec.status_code)
    if spec.path is None:
        return redirect
    prefix, regex = spec.path.rewrite(path)
    if spec.path.type == filters.FULL_PATH:
        return attrs.evolve(redirect, path=spec.path.value)
    return attrs.evolve(redirect, prefix=prefix, regex_rewrite=regex)


def _failed_share(weight: int, answer: DirectResponse) -> FailedShare | None:
    return FailedShare(weight=weight, status_code=answer.status_code) if weight > 0 else None


def _clusters(
    source: SourceView, rule: Mapping[str, Any], key: ObjectKey, problems: list[backends.BackendProblem]
) -> tuple[tuple[Cluster, ...], int, bool]:
    """The rule's valid backends with a weight, the weight of its invalid ones, and whether a valid
    one speaks WebSocket."""
    found: list[Cluster] = []
    failed_weight = 0
    websocket = False
    for ref in rule.get("backendRefs") or ():
        if not isinstance(ref, Mapping):
            continue
        try:
            own = filters.effects(ref.get("filters"))
            backend = backends.resolve(
                source, ref, key.kind, key.namespace, own.request_headers, own.response_headers
            )
        except backends.BackendProblem as problem:
            problems.append(problem)
            failed_weight += backends.weight(ref)
            continue
        if backend.cluster.weight > 0:
            found.append(backend.cluster)
            websocket = websocket or backend.websocket
    return tuple(found), failed_weight, websocket


def _mirrors(
    source: SourceView, effects: Effects, key: ObjectKey, problems: list[backends.BackendProblem]
) -> list[MirrorPolicy]:
    found = []
    for mirror in effects.mirrors:
        ref = mirror.get("backendRef")
        if not isinstance(ref, Mapping):
            continue
        try:
            backend = backends.resolve(source, {**ref, "weight": 1}, key.kind, key.namespace)
        except backends.BackendProblem as problem:
            problems.append(problem)
            continue
        found.append(MirrorPolicy(cluster=backend.cluster, percent=_mirror_percent(mirror)))
    return found


def _mirror_percent(mirror: Mapping[str, Any]) -> float:
    percent, fraction = mirror.get("percent"), mirror.get("fraction")
    if isinstance(percent, int):
        return float(min(max(percent, 0), 100))
    if isinstance(fraction, Mapping) and isinstance(fraction.get("numerator"), int):
        denominator = fraction.get("denominator") or 100
        return min(100.0, 100.0 * fraction["numerator"] / denominator) if denominator > 0 else 100.0
    return 100.0


def _timeouts(rule: Mapping[str, Any]) -> tuple[TimeoutPolicy, RetryPolicy | None]:
    """``request`` bounds the whole exchange, ``backendRequest`` each try: without retries one try
    is the exchange, so the tighter of the two is the route timeout."""
    spec = rule.get("timeouts") or {}
    request, backend = duration(spec.get("request")), duration(spec.get("backendRequest"))
    retry = _retry(rule.get("retry"), backend)
    given = [d for d in (request, backend if retry is None else None) if d is not None]
    if not given:
        return TimeoutPolicy(), retry
    enabled = [d.seconds for d in given if d.seconds is not None]
    return TimeoutPolicy(response=Duration(seconds=min(enabled) if enabled else None)), retry


def _retry(spec: object, per_try: Duration | None) -> RetryPolicy | None:
    """The experimental ``retry`` stanza: connection failures always, plus the listed codes;
    ``backoff`` is the base of Envoy's exponential backoff (which wants more than 1 ms)."""
    if not isinstance(spec, Mapping):
        return None
    codes = tuple(c for c in spec.get("codes") or () if isinstance(c, int))
    attempts = spec.get("attempts")
    retry_on = "connect-failure,refused-stream,reset" + (",retriable-status-codes" if codes else "")
    backoff = duration(spec.get("backoff"))
    return RetryPolicy(
        retry_on=retry_on,
        num_retries=attempts if isinstance(attempts, int) else 1,
        per_try_timeout=per_try if per_try is not None and not per_try.disabled else None,
        retriable_status_codes=codes,
        backoff=max(backoff.seconds, _MIN_BACKOFF) if backoff is not None and backoff.seconds else None,
    )
