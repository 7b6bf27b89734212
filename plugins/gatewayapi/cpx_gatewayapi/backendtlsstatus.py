"""BackendTLSPolicy status: ``status.ancestors[]``, one entry per Gateway that accepted a route
using a backend the policy targets (the conformance suite looks the entry up by Gateway).

A separate processor that runs after the routes: it reads the route statuses the Gateway API
processor computed in this build (``dag.statuses``), so it needs no hook into the route side.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from cpx import Config, ObjectKey, ServicePortError, SourceView, lookup_service_port
from cpx.dag import DAG

from cpx_gatewayapi import backendtls
from cpx_gatewayapi.conditions import TRUE, condition, current_status, find, stabilize
from cpx_gatewayapi.kinds import GROUP, GRPCROUTE, HTTPROUTE
from cpx_gatewayapi.settings import Settings

ROUTE_KINDS = (HTTPROUTE, GRPCROUTE)
RESOLVED_REFS = "ResolvedRefs"

GatewayRef = tuple[str, str]  # namespace, name


@attrs.define
class BackendTLSStatusProcessor:
    settings: Settings
    _statuses: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict, init=False)

    @classmethod
    def from_config(cls, config: Config) -> BackendTLSStatusProcessor:
        return cls(Settings.from_config(config))

    def run(self, dag: DAG, source: SourceView) -> None:
        found = backendtls.policies(source)
        ancestors: dict[ObjectKey, set[GatewayRef]] = {p.key: set() for p in found.all}
        if found.all:
            for route_key, namespace, name, port in self._served_backends(dag, source):
                gateways = self._accepting_gateways(dag, route_key)
                port_name = _port_name(source, namespace, name, port)
                for policy in found.naming(namespace, name, port_name):
                    ancestors[policy.key].update(gateways)
        last, self._statuses = self._statuses, {}
        for policy in found.all:
            computed = stabilize(
                self._status(source, policy, sorted(ancestors[policy.key])), last.get(policy.key)
            )
            dag.set_status(policy.key, computed)
            self._statuses[policy.key] = computed

    def _served_backends(self, dag: DAG, source: SourceView) -> Iterator[tuple[ObjectKey, str, str, int]]:
        """(route, Service namespace, name, port) of every Service backendRef of a route of ours."""
        for gvk in ROUTE_KINDS:
            for route in source.list(gvk):
                key = ObjectKey.of(route)
                if key in dag.statuses:
                    for ref in _service_refs(route):
                        port = ref.get("port")
                        namespace = str(ref.get("namespace") or key.namespace)
                        yield key, namespace, str(ref.get("name") or ""), port if isinstance(port, int) else 0

    def _accepting_gateways(self, dag: DAG, route_key: ObjectKey) -> set[GatewayRef]:
        found = set()
        for parent in dag.statuses[route_key].get("parents") or ():
            if parent.get("controllerName") != self.settings.controller_name:
                continue
            accepted = find(parent.get("conditions") or (), "Accepted")
            ref = parent.get("parentRef") or {}
            if accepted is not None and accepted.get("status") == TRUE:
                found.add((str(ref.get("namespace") or route_key.namespace), str(ref.get("name") or "")))
        return found

    def _status(
        self, source: SourceView, policy: backendtls.Policy, gateways: list[GatewayRef]
    ) -> dict[str, Any]:
        obj = source.get(policy.key) or {}
        current = [a for a in current_status(obj).get("ancestors") or () if isinstance(a, Mapping)]
        entries = []
        for namespace, name in gateways:
            ref = {"group": GROUP, "kind": "Gateway", "namespace": namespace, "name": name}
            previous = next(
                (
                    a.get("conditions") or ()
                    for a in current
                    if a.get("ancestorRef") == ref
                    and a.get("controllerName") == self.settings.controller_name
                ),
                (),
            )
            accepted, resolved = policy.accepted, policy.resolved_refs
            conditions = [
                condition(
                    "Accepted", accepted.ok, accepted.reason, accepted.message, policy.generation, previous
                ),
                condition(
                    RESOLVED_REFS, resolved.ok, resolved.reason, resolved.message, policy.generation, previous
                ),
            ]
            entries.append(
                {
                    "ancestorRef": ref,
                    "controllerName": self.settings.controller_name,
                    "conditions": conditions,
                }
            )
        return {"ancestors": entries}


def _service_refs(route: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for rule in (route.get("spec") or {}).get("rules") or ():
        refs = rule.get("backendRefs") if isinstance(rule, Mapping) else None
        for ref in refs or ():
            if isinstance(ref, Mapping) and (ref.get("group") or "", ref.get("kind") or "Service") == (
                "",
                "Service",
            ):
                yield ref


def _port_name(source: SourceView, namespace: str, name: str, port: int) -> str:
    try:
        return lookup_service_port(source, namespace, name, port).port_name
    except ServicePortError:
        return ""
