"""A route's computed ``status.parents[]``: one entry per parentRef naming one of our Gateways.

Accepted follows the first failing attachment step, then whether any rule could be served;
ResolvedRefs the first bad backend reference; PartiallyInvalid says which rules were dropped.
Conditions keep their lastTransitionTime from the object's current entry for the same parentRef.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cpx_gatewayapi import status
from cpx_gatewayapi.conditions import condition, current_status, generation_of
from cpx_gatewayapi.kinds import GROUP
from cpx_gatewayapi.routebuild import Translated
from cpx_gatewayapi.routeparents import (
    ACCEPTED,
    INVALID_GATEWAY,
    NO_MATCHING_LISTENER_HOSTNAME,
    NO_MATCHING_PARENT,
    NOT_ALLOWED_BY_LISTENERS,
    Attached,
)

RESOLVED_REFS = "ResolvedRefs"
PARTIALLY_INVALID = "PartiallyInvalid"
UNSUPPORTED_VALUE = "UnsupportedValue"
RULE_MATCH_CONFLICT = "RuleMatchConflict"
RULE_MATCH_PARTIALLY_CONFLICT = "RuleMatchPartiallyConflict"

PARENT_MESSAGES = {
    NO_MATCHING_PARENT: "No listeners match this parent ref",
    NOT_ALLOWED_BY_LISTENERS: "No listeners included by this parent ref allowed this attachment.",
    NO_MATCHING_LISTENER_HOSTNAME: "No intersecting hostnames were found between the listener and the route.",
    INVALID_GATEWAY: "Invalid Gateway",
}


def parent_ref(ref: Mapping[str, Any]) -> dict[str, Any]:
    """The spec parentRef as status repeats it: group and kind filled in."""
    echoed: dict[str, Any] = {"group": ref.get("group") or GROUP, "kind": ref.get("kind") or "Gateway"}
    for field in ("namespace", "name", "sectionName", "port"):
        if ref.get(field) is not None:
            echoed[field] = ref[field]
    return echoed


def stored_conditions(obj: Mapping[str, Any], ref: Mapping[str, Any], controller: str) -> Sequence[Any]:
    """The conditions the object's stored status holds for one parent of one controller."""
    for entry in current_status(obj).get("parents") or ():
        if isinstance(entry, Mapping) and (entry.get("parentRef"), entry.get("controllerName")) == (
            ref,
            controller,
        ):
            return entry.get("conditions") or ()
    return ()


def route_status(
    obj: Mapping[str, Any],
    attached: Sequence[Attached],
    built: Translated,
    conflicts: int,
    served: set[tuple[str, str, bool, str]],
    yielded_to: str | None = None,
) -> dict[str, Any]:
    """``yielded_to``: the kind of the older routes some of the route's hosts went to (an HTTPRoute
    and a GRPCRoute never share a host)."""
    generation = generation_of(obj)
    parents = []
    for parent in attached:
        ref = parent_ref(parent.ref)
        controller = parent.gateway.controller_name
        previous = stored_conditions(obj, ref, controller)
        kind = str(obj.get("kind") or "HTTPRoute")
        conflicts_with = _conflicts_message(yielded_to)
        conditions = _conditions(
            kind, parent, built, conflicts, conflicts_with, bool(served), generation, previous
        )
        parents.append({"parentRef": ref, "controllerName": controller, "conditions": conditions})
    return status.route_status(parents)


def _conflicts_message(yielded_to: str | None) -> str:
    if yielded_to is None:
        return "rules of other routes"
    return f"rules of other routes or an older {yielded_to} on the same hostname"


def _conditions(
    kind: str,
    parent: Attached,
    built: Translated,
    conflicts: int,
    conflicts_with: str,
    any_served: bool,
    generation: int,
    previous: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    accepted: tuple[bool, str, str] = (True, ACCEPTED, f"Accepted {kind}")
    partial: tuple[str, str] | None = None
    if parent.reason != ACCEPTED:
        accepted = (False, parent.reason, PARENT_MESSAGES[parent.reason])
    elif built.all_dropped:
        accepted = (False, UNSUPPORTED_VALUE, "; ".join(built.dropped))
    elif conflicts and not any_served:
        accepted = (False, RULE_MATCH_CONFLICT, f"All rules conflict with {conflicts_with}")
    elif built.dropped:
        partial = (UNSUPPORTED_VALUE, "Dropped Rule: " + "; ".join(built.dropped))
    elif conflicts:
        partial = (
            RULE_MATCH_PARTIALLY_CONFLICT,
            f"Dropped Rule: some matches conflict with {conflicts_with}",
        )
    found = [condition(ACCEPTED, accepted[0], accepted[1], accepted[2], generation, previous)]
    if built.backend_problems:
        problem = built.backend_problems[0]
        found.append(condition(RESOLVED_REFS, False, problem.reason, problem.message, generation, previous))
    else:
        found.append(
            condition(RESOLVED_REFS, True, RESOLVED_REFS, "References resolved", generation, previous)
        )
    if partial is not None:
        found.append(condition(PARTIALLY_INVALID, True, partial[0], partial[1], generation, previous))
    return found
