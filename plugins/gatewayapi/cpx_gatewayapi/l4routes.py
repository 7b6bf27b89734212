"""TLSRoutes and TCPRoutes: attachment to TLS and TCP listeners, TCP proxying, status.

Attachment follows the HTTPRoute steps (:mod:`cpx_gatewayapi.routeparents`, by route kind: a TLS
listener admits TLSRoutes, a TCP listener TCPRoutes, anything else gives NotAllowedByListeners).
What a route serves is one TCP proxy to the Services of its backendRefs (weighted; bad references
are left out and reported in ResolvedRefs, a route without a usable backend serves nothing, so
its connections are refused):

- on a TLS listener, per effective hostname (the SNI), a secure virtual host proxying TCP: the TLS
  connection as it is (Passthrough) or its content after termination with the listener's
  certificate (Terminate).  Routes go oldest first: the first to claim a hostname keeps it;
- on a TCP listener, the listener's one destination (``Protocol.TCP``): the oldest route's, the
  others stay Accepted and counted in attachedRoutes, as the spec wants, but get no traffic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from cpx import ObjectKey, SourceView, blame
from cpx.dag import DAG, Cluster, SecureVirtualHost, TCPProxy

from cpx_gatewayapi import backends, hostnames, listeners, routeparents, status
from cpx_gatewayapi.conditions import condition, generation_of
from cpx_gatewayapi.kinds import TCPROUTE, TLSROUTE
from cpx_gatewayapi.model import Attachments, GatewayListener, Resolution
from cpx_gatewayapi.routestatus import PARENT_MESSAGES, parent_ref, stored_conditions
from cpx_gatewayapi.settings import Settings

RESOLVED_REFS = "ResolvedRefs"


@attrs.frozen
class _Backends:
    """A route's usable clusters and the first problem with the others."""

    clusters: tuple[Cluster, ...]
    problem: backends.BackendProblem | None

    @property
    def proxy(self) -> TCPProxy | None:
        # Weight 0 gets nothing (Envoy's tcp_proxy would spread over all-zero weights evenly).
        serving = tuple(c for c in self.clusters if c.weight > 0)
        return TCPProxy(clusters=serving) if serving else None


@attrs.frozen
class _Build:
    dag: DAG
    source: SourceView
    resolution: Resolution
    attachments: Attachments
    controller_name: str
    owners: Mapping[str, Sequence[str | None]]  # per DAG listener, its Gateway listeners' hostnames


def apply(
    dag: DAG, source: SourceView, resolution: Resolution, attachments: Attachments, settings: Settings
) -> None:
    """Attach every TLSRoute and TCPRoute, proxy their connections, count them, set their status."""
    build = _Build(
        dag,
        source,
        resolution,
        attachments,
        settings.controller_name,
        routeparents.port_hostnames(resolution),
    )
    for gvk in (TLSROUTE, TCPROUTE):
        for obj in listeners.ordered_by_age(source.list(gvk)):
            key = ObjectKey.of(obj)
            with blame(key):
                _apply_route(build, gvk.kind, obj, key)


def _apply_route(build: _Build, kind: str, obj: Mapping[str, Any], key: ObjectKey) -> None:
    spec = obj.get("spec") or {}
    parents = list(routeparents.parents(spec, key.namespace, build.resolution))
    if not parents:
        if status.has_parents_of(obj, build.controller_name):
            build.dag.set_status(key, status.route_status(()))
        return
    route_hostnames = [str(h) for h in spec.get("hostnames") or () if isinstance(h, str)]
    labels = routeparents.namespace_labels(build.source, key.namespace)
    attached = [
        routeparents.attach(kind, ref, gateway, key.namespace, labels, route_hostnames)
        for ref, gateway in parents
    ]
    found = _resolve_backends(build.source, spec, kind, key.namespace)
    proxy = found.proxy
    for parent in attached:
        for listener, hosts in parent.listeners:
            build.attachments.add(listener)
            if proxy is not None and listener.dag_listener is not None:
                _serve(build.dag, listener, hosts, build.owners[listener.dag_listener], proxy)
    build.dag.set_status(key, _route_status(obj, kind, attached, found))


def _resolve_backends(source: SourceView, spec: Mapping[str, Any], kind: str, namespace: str) -> _Backends:
    clusters: list[Cluster] = []
    problem: backends.BackendProblem | None = None
    for rule in spec.get("rules") or ():
        refs = rule.get("backendRefs") if isinstance(rule, Mapping) else None
        for ref in refs if isinstance(refs, list) else ():
            if not isinstance(ref, Mapping):
                continue
            try:
                clusters.append(backends.resolve(source, ref, kind, namespace).cluster)
            except backends.BackendProblem as bad:
                problem = problem or bad
    return _Backends(tuple(clusters), problem)


def _serve(
    dag: DAG,
    listener: GatewayListener,
    hosts: Sequence[str],
    owners: Sequence[str | None],
    proxy: TCPProxy,
) -> None:
    assert listener.dag_listener is not None
    if listener.protocol == listeners.TCP:
        envoy_listener = dag.get_listener(listener.dag_listener)
        if envoy_listener is not None and envoy_listener.tcp_proxy is None:
            envoy_listener.tcp_proxy = proxy  # the oldest route's
        return
    mine = listener.hostname or hostnames.ANY
    for host in hosts:
        if hostnames.owner(owners, host) != mine:
            continue  # a more specific listener on this port owns the name
        if _taken(dag.get_secure_virtual_host(listener.dag_listener, host)):
            continue  # an older route (or an HTTPS host) has it
        vhost = dag.ensure_secure_virtual_host(listener.dag_listener, host)
        vhost.tcp_proxy = proxy
        vhost.passthrough = listener.tls_mode == listeners.PASSTHROUGH
        vhost.secret = None if vhost.passthrough else listener.secret


def _taken(vhost: SecureVirtualHost | None) -> bool:
    return vhost is not None and (vhost.tcp_proxy is not None or bool(vhost.routes))


def _route_status(
    obj: Mapping[str, Any], kind: str, attached: Sequence[routeparents.Attached], found: _Backends
) -> dict[str, Any]:
    generation = generation_of(obj)
    parents = []
    for parent in attached:
        ref = parent_ref(parent.ref)
        controller = parent.gateway.controller_name
        previous = stored_conditions(obj, ref, controller)
        accepted = parent.reason == routeparents.ACCEPTED
        message = f"Accepted {kind}" if accepted else PARENT_MESSAGES[parent.reason]
        conditions = [
            condition(routeparents.ACCEPTED, accepted, parent.reason, message, generation, previous)
        ]
        problem = found.problem
        if problem is not None:
            conditions.append(
                condition(RESOLVED_REFS, False, problem.reason, problem.message, generation, previous)
            )
        else:
            conditions.append(
                condition(RESOLVED_REFS, True, RESOLVED_REFS, "References resolved", generation, previous)
            )
        parents.append({"parentRef": ref, "controllerName": controller, "conditions": conditions})
    return status.route_status(parents)
