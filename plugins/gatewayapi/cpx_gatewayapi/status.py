"""The status writers' merges: what cpx computed, put into what the object's status holds.

A Gateway API status is shared with other controllers: a route's ``status.parents[]`` holds one
entry per (parentRef, controllerName), a GatewayClass or Gateway of another controller is not ours
to touch.  So every merge here changes only what is ours and returns None when nothing would
change (the status updater then writes nothing):

- an empty computed status means "not ours": no write at all (GatewayClasses and Gateways of
  other controllers, routes that never named one of our Gateways);
- GatewayClass / Gateway: conditions merged by type (others' types kept, in place), the fields we
  compute (``supportedFeatures``, ``addresses``, ``listeners``) replaced;
- routes: our ``status.parents[]`` entries (those whose ``controllerName`` is ours) replaced by the
  computed ones, matched by parentRef and kept in place; our entries the build no longer computes
  dropped; other controllers' entries left exactly as they are (a BackendTLSPolicy's
  ``status.ancestors[]`` alike, matched by ancestorRef);
- a condition whose status does not change keeps the object's lastTransitionTime (the computed
  one may come from an older status), so a status that differs only in those times is not written.

In Kubernetes mode a Gateway with no address of its own reports the Envoy Service's load-balancer
addresses (:func:`envoy_load_balancer`, the Gateway writer's ``load_balancer``).

How a route merge knows our controller name: the plugin binds it when it registers the writers
(:func:`route_merge`), since a route that left our scope is computed as ``{"parents": []}`` (see
:func:`route_status`) and then carries no entry to read it from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cpx_gatewayapi.conditions import TRUE, condition, find, keep_transition_times, merge_conditions
from cpx_gatewayapi.kinds import GROUP

Status = Mapping[str, Any]
Merge = Callable[[Status, Status], Status | None]


def route_status(parents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The status a route processor computes for a route (``dag.set_status``): our parent entries
    (``{parentRef fields..., "controllerName": ..., "conditions": [...]}``), one per parentRef that
    names one of our Gateways.

    Compute it for every route that names one of our Gateways, and also, with no entries, for a
    route whose current status still holds entries of ours (``has_parents_of``): the merge then
    drops them.  Routes that are neither get no status at all.
    """
    return {"parents": [dict(parent) for parent in parents]}


def has_parents_of(obj: Mapping[str, Any], controller_name: str) -> bool:
    """Whether the object's current status (in the source cache) has ``status.parents`` entries
    written by ``controller_name``."""
    status = obj.get("status")
    parents = status.get("parents") if isinstance(status, Mapping) else None
    return isinstance(parents, list) and any(
        isinstance(p, Mapping) and p.get("controllerName") == controller_name for p in parents
    )


def parent_ref_key(entry: Mapping[str, Any], field: str = "parentRef") -> tuple[str, str, str, str, str, int]:
    """A ``status.parents[]`` entry's parentRef (or a ``status.ancestors[]`` entry's
    ``ancestorRef``), defaults filled in, for matching entries."""
    ref = entry.get(field)
    ref = ref if isinstance(ref, Mapping) else {}
    port = ref.get("port")
    return (
        str(ref.get("group") or GROUP),
        str(ref.get("kind") or "Gateway"),
        str(ref.get("namespace") or ""),
        str(ref.get("name") or ""),
        str(ref.get("sectionName") or ""),
        port if isinstance(port, int) else 0,
    )


def merge_gateway_class(current: Status, computed: Status) -> Status | None:
    return _merge_owned(current, computed, replaced=("supportedFeatures",))


def merge_gateway(current: Status, computed: Status) -> Status | None:
    if "listeners" in computed:
        before = {entry.get("name"): entry for entry in _list(current.get("listeners"))}
        listeners = [
            _keeping_times(before.get(entry.get("name")), entry) for entry in _list(computed["listeners"])
        ]
        computed = {**computed, "listeners": listeners}
    return _merge_owned(current, computed, replaced=("addresses", "listeners"))


def _merge_owned(current: Status, computed: Status, *, replaced: tuple[str, ...]) -> Status | None:
    if not computed:
        return None  # another controller's object (or not ours any more): leave it alone
    merged = dict(current)
    merged["conditions"] = merge_conditions(
        _list(current.get("conditions")), _list(computed.get("conditions"))
    )
    for field in replaced:
        if field in computed:
            merged[field] = computed[field]
    return _changed(current, merged)


def _keeping_times(before: Mapping[str, Any] | None, entry: Mapping[str, Any]) -> dict[str, Any]:
    """A computed listener or route parent entry whose conditions keep the lastTransitionTime of
    the current entry's (``before``) where their status is the same."""
    if before is None:
        return dict(entry)
    conditions = keep_transition_times(_list(before.get("conditions")), _list(entry.get("conditions")))
    return {**entry, "conditions": conditions}


def merge_route(
    current: Status,
    computed: Status,
    *,
    controller_name: str,
    field: str = "parents",
    ref_field: str = "parentRef",
) -> Status | None:
    """``status.parents[]`` (or a policy's ``status.ancestors[]``, keyed by ``ancestorRef``): ours
    replaced (in place), our stale ones dropped, others' untouched."""
    if field not in computed:
        return None
    fresh = {parent_ref_key(p, ref_field): dict(p) for p in _list(computed.get(field))}
    entries: list[Any] = []
    for entry in _list(current.get(field), keep_all=True):
        if not isinstance(entry, Mapping) or entry.get("controllerName") != controller_name:
            entries.append(entry)  # another controller's (or not an entry at all): not ours
            continue
        replacement = fresh.pop(parent_ref_key(entry, ref_field), None)
        if replacement is not None:
            entries.append(_keeping_times(entry, replacement))
    entries.extend(fresh.values())
    if not entries and field not in current:
        return None
    merged = dict(current)
    merged[field] = entries
    return _changed(current, merged)


def envoy_load_balancer(service_lb: Status, computed: Status) -> Status:
    """``StatusWriterSpec.load_balancer`` of Gateways (Kubernetes mode, no ``--ingress-status-address``).

    A Gateway of ours with no address to report (``Programmed=False AddressNotAssigned``: accepted,
    nothing usable in ``spec.addresses``, so served on the default address behind the Envoy
    Service) reports the Service's load-balancer addresses and is Programmed when its listeners
    are.  Every other computed status is left as it is: another controller's Gateway (empty), one
    with an address of its own (served there), one not accepted or with an unusable address.
    """
    # Imported here: loading the plugin (its status writers) must not import the Gateway model.
    from cpx_gatewayapi import gateways  # noqa: PLC0415

    conditions = _list(computed.get("conditions"))
    programmed = find(conditions, "Programmed")
    if (
        programmed is None
        or programmed.get("reason") != gateways.ADDRESS_NOT_ASSIGNED
        or computed.get("addresses")
    ):
        return computed
    addresses = gateways.typed_addresses(service_lb.get("ingress"))
    if not addresses:
        return computed  # no load-balancer address yet (e.g. no load balancer): not assigned
    not_programmed = [
        str(listener.get("name"))
        for listener in _list(computed.get("listeners"))
        if (find(_list(listener.get("conditions")), "Programmed") or {}).get("status") != TRUE
    ]
    verdict = gateways.programmed(True, not_programmed)
    generation = programmed.get("observedGeneration")
    replacement = condition(
        "Programmed",
        verdict.ok,
        verdict.reason,
        verdict.message,
        generation if isinstance(generation, int) else 0,
        [programmed],
    )
    return {
        **computed,
        "conditions": [replacement if c is programmed else c for c in conditions],
        "addresses": [{"type": kind, "value": value} for kind, value in addresses],
    }


def route_merge(controller_name: str) -> Merge:
    """:func:`merge_route` for one controller name: a ``StatusWriterSpec.merge`` for a route kind."""
    return functools.partial(merge_route, controller_name=controller_name)


def ancestors_merge(controller_name: str) -> Merge:
    """The ``StatusWriterSpec.merge`` of BackendTLSPolicies: our ``status.ancestors[]`` entries."""
    return functools.partial(
        merge_route, controller_name=controller_name, field="ancestors", ref_field="ancestorRef"
    )


def _list(value: Any, *, keep_all: bool = False) -> list[Any]:
    if not isinstance(value, list | tuple):
        return []
    return list(value) if keep_all else [v for v in value if isinstance(v, Mapping)]


def _changed(current: Status, merged: dict[str, Any]) -> Status | None:
    return None if merged == dict(current) else merged
