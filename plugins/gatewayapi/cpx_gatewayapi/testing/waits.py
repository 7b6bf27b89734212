"""The harness's waits on the status file (``conformance/utils/kubernetes/helpers.go``)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cpx_gatewayapi.testing.base import Key, NotYet, wait_until
from cpx_gatewayapi.testing.checks import (
    listeners_match,
    parents_match,
    require_condition,
    stale_conditions,
    status_namespace,
)


class StatusWaits:
    """Reads the status file; the waits poll it until upstream's conditions hold."""

    status_file: Path
    addresses: dict[tuple[str, str], str]

    def generation(self, kind: str, namespace: str, name: str) -> int:
        raise NotImplementedError

    # -- status -------------------------------------------------------------------------------------

    def statuses(self) -> dict[Key, dict[str, Any]]:
        try:
            text = self.status_file.read_text()
        except FileNotFoundError:
            return {}
        loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        return {
            Key(obj["kind"], status_namespace(obj), obj["name"]): obj.get("status") or {}
            for obj in loaded.get("objects") or ()
        }

    def status(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The status cpx computed for an object (None: not in the status file)."""
        return self.statuses().get(Key(kind, namespace, name))

    def _current(self, kind: str, namespace: str, name: str) -> tuple[dict[str, Any], int]:
        status = self.status(kind, namespace, name)
        if status is None:
            raise NotYet(f"{kind} {namespace}/{name} has no status")
        return status, self.generation(kind, namespace, name)

    # -- waits (conformance/utils/kubernetes/helpers.go) -------------------------------------------

    def gateway_status(self, namespace: str, name: str) -> dict[str, Any]:
        """The Gateway's status once every condition is at its current generation."""
        status, generation = self._current("Gateway", namespace, name)
        stale_conditions(status.get("conditions") or [], generation, f"Gateway {namespace}/{name}")
        return status

    def wait_gateway_ready(self, namespace: str, name: str) -> None:
        """Accepted and Programmed True at the current generation (upstream's readiness wait)."""

        def check() -> None:
            conditions = self.gateway_status(namespace, name).get("conditions") or []
            require_condition(conditions, "Accepted", "True", "", f"Gateway {namespace}/{name}")
            require_condition(conditions, "Programmed", "True", "", f"Gateway {namespace}/{name}")

        wait_until(check)

    def wait_gateway_condition(
        self, namespace: str, name: str, type_: str, status: str, reason: str = ""
    ) -> None:
        """``GatewayMustHaveCondition``."""
        wait_until(
            lambda: require_condition(
                self.gateway_status(namespace, name).get("conditions") or [],
                type_,
                status,
                reason,
                f"Gateway {namespace}/{name}",
            )
        )

    def wait_latest_conditions(self, kind: str, namespace: str, name: str) -> None:
        """``GatewayMustHaveLatestConditions`` / ``GatewayClassMustHaveLatestConditions``: every
        condition at the object's current generation (and a status at all)."""

        def check() -> None:
            status, generation = self._current(kind, namespace, name)
            stale_conditions(status.get("conditions") or [], generation, f"{kind} {namespace}/{name}")

        wait_until(check)

    def wait_class_accepted_any(self, name: str) -> None:
        """``GWCMustHaveAcceptedConditionAny``: the GatewayClass has an Accepted condition."""
        wait_until(
            lambda: require_condition(
                self._current("GatewayClass", "", name)[0].get("conditions") or [], "Accepted", "", "", name
            )
        )

    def gateway_address(self, namespace: str, name: str) -> str:
        """``WaitForGatewayAddress``: the typed address in status (cpx's, which must be ours)."""

        def check() -> str:
            status, _ = self._current("Gateway", namespace, name)
            typed = [a["value"] for a in status.get("addresses") or () if a.get("type") and a.get("value")]
            if not typed:
                raise NotYet(
                    f"Gateway {namespace}/{name}: no typed address in status: {status.get('addresses')}"
                )
            return str(typed[0])

        address = wait_until(check)
        assert address == self.addresses[(namespace, name)], (
            f"status address {address}, spec asked for another"
        )
        return address

    def wait_listeners(
        self,
        namespace: str,
        name: str,
        conditions: Sequence[tuple[str, str, str]],
        listeners: Sequence[str] = (),
    ) -> None:
        """``GatewayListenersMustHaveConditions``: every listener (or those named) has each condition."""

        def check() -> None:
            status, _ = self._current("Gateway", namespace, name)
            entries = status.get("listeners") or []
            missing = set(listeners)
            for entry in entries:
                if listeners and entry.get("name") not in listeners:
                    continue
                for type_, value, reason in conditions:
                    require_condition(
                        entry.get("conditions") or [], type_, value, reason, f"listener {entry.get('name')}"
                    )
                missing.discard(entry.get("name"))
            if missing:
                raise NotYet(f"Gateway {namespace}/{name}: no status for listeners {sorted(missing)}")

        wait_until(check)

    def wait_listener_statuses(
        self, namespace: str, name: str, expected: Sequence[Mapping[str, Any]]
    ) -> None:
        """``GatewayStatusMustHaveListeners``: one entry per expected listener (name, supportedKinds
        as a subset, attachedRoutes, conditions as (type, status, reason))."""

        def check() -> None:
            entries = self.gateway_status(namespace, name).get("listeners") or []
            listeners_match(expected, entries)

        wait_until(check)

    def wait_zero_routes(self, namespace: str, name: str) -> None:
        """``GatewayMustHaveZeroRoutes``: no listener status, or one listener with 0 attached routes."""

        def check() -> None:
            entries = self.gateway_status(namespace, name).get("listeners") or []
            if entries and not (len(entries) == 1 and entries[0].get("attachedRoutes") == 0):
                raise NotYet(f"Gateway {namespace}/{name} listeners: {entries}")

        wait_until(check)

    def route_parents(self, namespace: str, name: str, kind: str = "HTTPRoute") -> list[dict[str, Any]]:
        status, generation = self._current(kind, namespace, name)
        parents: list[dict[str, Any]] = status.get("parents") or []
        for parent in parents:
            stale_conditions(parent.get("conditions") or [], generation, f"{kind} {namespace}/{name} parent")
        return parents

    def wait_route_parents(
        self,
        namespace: str,
        name: str,
        expected: Sequence[Mapping[str, Any]],
        *,
        namespace_required: bool,
    ) -> None:
        """``HTTPRouteMustHaveParents``: each expected parent (``{"name", "namespace", "sectionName",
        "conditions": [(type, status, reason)]}``) has a matching entry of our controller."""
        wait_until(lambda: parents_match(expected, self.route_parents(namespace, name), namespace_required))

    def wait_route_condition(
        self, namespace: str, name: str, gateway: tuple[str, str], type_: str, status: str, reason: str = ""
    ) -> None:
        """``HTTPRouteMustHaveCondition``: the parent entry for ``gateway`` has the condition."""

        def check() -> None:
            found = False
            for parent in self.route_parents(namespace, name):
                ref = parent.get("parentRef") or {}
                if ref.get("name") == gateway[1] and ref.get("namespace", gateway[0]) == gateway[0]:
                    with contextlib.suppress(AssertionError):
                        require_condition(parent.get("conditions") or [], type_, status, reason, "")
                        found = True
            if not found:
                raise NotYet(
                    f"HTTPRoute {namespace}/{name}: no parent {gateway} with {type_}={status} {reason}"
                )

        wait_until(check)

    def wait_no_accepted_parents(self, namespace: str, name: str) -> None:
        """``HTTPRouteMustHaveNoAcceptedParents``: no parents (seen twice), or one not Accepted."""
        empty_seen = [False]

        def check() -> None:
            parents = self.route_parents(namespace, name)
            if not parents:
                if not empty_seen[0]:
                    empty_seen[0] = True
                    raise NotYet("no parents yet: look again")
                return
            if len(parents) > 1:
                raise NotYet(f"HTTPRoute {namespace}/{name}: {len(parents)} parents, expected at most one")
            require_condition(
                parents[0].get("conditions") or [], "Accepted", "False", "", f"HTTPRoute {name}"
            )

        wait_until(check, interval=0.5)

    def wait_gateway_and_routes(
        self,
        gateway: tuple[str, str],
        routes: Sequence[tuple[str, str]],
        section_names: Sequence[str | None] = (None,),
    ) -> str:
        """``GatewayAndHTTPRoutesMustBeAccepted``: the Gateway's address, after each route has an
        Accepted parent entry for it and every listener is ResolvedRefs, Accepted and Programmed."""
        address = self.gateway_address(*gateway)
        for route_ns, route_name in routes:
            parents = [
                {
                    "name": gateway[1],
                    "namespace": gateway[0],
                    "sectionName": section,
                    "conditions": [("Accepted", "True", "Accepted")],
                }
                for section in section_names
            ]
            self.wait_route_parents(route_ns, route_name, parents, namespace_required=route_ns != gateway[0])
        self.wait_listeners(
            *gateway, [("ResolvedRefs", "True", ""), ("Accepted", "True", ""), ("Programmed", "True", "")]
        )
        return address

    def wait_routes_accepted(self, gateway: tuple[str, str], *routes: tuple[str, str]) -> str:
        """The common opening: ``GatewayAndHTTPRoutesMustBeAccepted`` then, for each route,
        ``HTTPRouteMustHaveResolvedRefsConditionsTrue``."""
        address = self.wait_gateway_and_routes(gateway, routes)
        for route_ns, route_name in routes:
            self.wait_route_condition(route_ns, route_name, gateway, "ResolvedRefs", "True", "ResolvedRefs")
        return address
