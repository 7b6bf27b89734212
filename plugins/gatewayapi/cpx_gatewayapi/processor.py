"""The one DAG processor: Gateways first, then the routes attached to them, then Gateway status.

One processor rather than one per kind: the route side needs the Gateways this build resolved,
and the Gateway status needs the routes that attached (``attachedRoutes``).  The Gateways are
resolved in every build (a few objects); the routes' part is kept between builds and worked out
again only where a change can affect it (:mod:`cpx_gatewayapi.incremental`).  It runs after the
Ingress and HTTPProxy processors, as in Contour, so that those hosts and a Gateway listener on the
same address and port share one Envoy listener.
"""

from __future__ import annotations

from typing import Any

import attrs
from cpx import Config, ObjectKey, SourceView
from cpx.dag import DAG

from cpx_gatewayapi import gateways, grpcroutes, httproutes, l4routes, sessionfilter
from cpx_gatewayapi.conditions import stabilize
from cpx_gatewayapi.incremental import RouteMemo
from cpx_gatewayapi.kinds import GATEWAY_CLASS, GROUP
from cpx_gatewayapi.listeners import HTTPS
from cpx_gatewayapi.model import HTTPROUTE_KIND, Attachments, Resolution
from cpx_gatewayapi.settings import Settings


@attrs.define
class GatewayAPIProcessor:
    settings: Settings
    # The HTTPRoute side, kept between builds (it stabilizes its own statuses).
    routes: RouteMemo = attrs.field(factory=RouteMemo)
    # The other statuses of the last build, by object: their transition times carry over.
    _statuses: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict, init=False)

    @classmethod
    def from_config(cls, config: Config) -> GatewayAPIProcessor:
        return cls(Settings.from_config(config))

    def run(self, dag: DAG, source: SourceView) -> None:
        resolution = gateways.resolve(dag, source, self.settings)
        attachments = Attachments()
        grpc = grpcroutes.plan(source, resolution, self.settings)
        httproutes.apply(dag, source, resolution, attachments, self.settings, self.routes, grpc.claims)
        grpcroutes.apply(dag, grpc, attachments, self.settings)
        l4routes.apply(dag, source, resolution, attachments, self.settings)
        _catch_all_hosts(dag, resolution)
        gateways.report(dag, source, resolution, attachments, self.settings)
        # No GatewayClass: nothing of ours carries a condition, and a build of Ingresses and
        # HTTPProxies alone need not pass over their statuses.
        in_use = source.count(GATEWAY_CLASS) > 0
        if in_use:
            dag.attachments = dag.attachments.set(sessionfilter.IN_USE, True)
        if self._statuses or in_use:
            self._stabilize(dag)

    def _stabilize(self, dag: DAG) -> None:
        # A comprehension, not a loop: it passes over every HTTPRoute's status too.
        ours = [(k, v) for k, v in dag.statuses.items() if k.group == GROUP and k.kind != HTTPROUTE_KIND]
        last, self._statuses = self._statuses, {}
        for key, computed in ours:
            stable = stabilize(computed, last.get(key))
            if stable is not computed:
                dag.set_status(key, stable)
            self._statuses[key] = stable


def _catch_all_hosts(dag: DAG, resolution: Resolution) -> None:
    """An HTTPS listener without hostname answers any SNI with its certificate, and a Host no route
    serves with a 404 (upstream HTTPRouteHTTPSListener): its ``*`` host exists even with no route."""
    for gateway in resolution:
        for listener in gateway.listeners:
            if listener.protocol != HTTPS or listener.hostname is not None:
                continue
            if listener.dag_listener is None or listener.secret is None:
                continue
            hosts = dag.listeners[listener.dag_listener].secure_virtual_hosts
            # The hosts of this listener (those no more specific listener on the port owns): a
            # connection with another SNI may ask for them (upstream ...DetectMisdirectedRequests).
            check = listener.authority_check
            refused = () if check is None else check.refuse
            served = tuple(sorted(name for name in hosts if name != "*" and not _owned(name, refused)))
            vhost = dag.ensure_secure_virtual_host(listener.dag_listener, "*")
            if vhost.secret is None:  # routes without hostname made it, or an earlier listener
                vhost.secret = listener.secret
                vhost.downstream_validation = listener.client_validation
                vhost.serve_without_routes = True
                vhost.authority_check = check
            vhost.serves_hosts_of = served


def _owned(name: str, hostnames: tuple[str, ...]) -> bool:
    """Whether a host falls under one of these listener hostnames."""
    return any(name == h or (h.startswith("*.") and name.endswith(h[1:])) for h in hostnames)
