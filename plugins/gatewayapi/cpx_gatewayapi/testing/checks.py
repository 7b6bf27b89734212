"""Status checks of ``conformance/utils/kubernetes/helpers.go``, on what cpx wrote."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cpx_gatewayapi.testing.base import CLUSTER_SCOPED, CONTROLLER_NAME, GROUP, NotYet


def stale_conditions(conditions: Sequence[Mapping[str, Any]], generation: int, what: str) -> None:
    """``ConditionsHaveLatestObservedGeneration``."""
    stale = [
        f"{c.get('type')} (generation {c.get('observedGeneration')})"
        for c in conditions
        if c.get("observedGeneration") != generation
    ]
    if stale:
        raise NotYet(f"{what}: conditions not at generation {generation}: {', '.join(stale)}")


def require_condition(
    conditions: Sequence[Mapping[str, Any]], type_: str, status: str, reason: str, what: str
) -> None:
    """``findConditionInList``: an empty status or reason matches any."""
    for condition in conditions:
        if condition.get("type") != type_:
            continue
        if (not status or condition.get("status") == status) and (
            not reason or condition.get("reason") == reason
        ):
            return
    raise NotYet(f"{what}: no condition {type_}={status or '*'} ({reason or '*'}) in {list(conditions)}")


def listeners_match(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]) -> None:
    """``gatewayListenersMatch``."""
    if len(expected) != len(actual):
        raise NotYet(f"{len(actual)} listener statuses, expected {len(expected)}: {actual}")
    for want in expected:
        got = next((entry for entry in actual if entry.get("name") == want["name"]), None)
        if got is None:
            raise NotYet(f"no status for listener {want['name']}: {actual}")
        kinds = [(k.get("group") or GROUP, k.get("kind")) for k in got.get("supportedKinds") or ()]
        want_kinds = [(GROUP, kind) for kind in want.get("supportedKinds", ())]
        if "supportedKinds" in want and not want_kinds and kinds:
            raise NotYet(f"listener {want['name']}: supportedKinds {kinds}, expected none")
        if any(kind not in kinds for kind in want_kinds):
            raise NotYet(f"listener {want['name']}: supportedKinds {kinds}, expected {want_kinds} among them")
        if got.get("attachedRoutes") != want["attachedRoutes"]:
            attached = got.get("attachedRoutes")
            raise NotYet(
                f"listener {want['name']}: attachedRoutes {attached}, expected {want['attachedRoutes']}"
            )
        for type_, status, reason in want.get("conditions", ()):
            require_condition(got.get("conditions") or [], type_, status, reason, f"listener {want['name']}")


def parents_match(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], namespace_required: bool
) -> None:
    """``parentsForRouteMatch``: each expected parent has an entry of our controller."""
    for want in expected:
        problems = []
        for parent in actual:
            ref = parent.get("parentRef") or {}
            if parent.get("controllerName") != CONTROLLER_NAME:
                problems.append(f"controllerName {parent.get('controllerName')}")
                continue
            if ref.get("group") != GROUP or ref.get("kind") != "Gateway":
                problems.append(f"parentRef group/kind {ref.get('group')}/{ref.get('kind')}")
                continue
            if ref.get("name") != want["name"]:
                continue
            if ref.get("namespace") != want.get("namespace") and (namespace_required or "namespace" in ref):
                problems.append(f"parentRef namespace {ref.get('namespace')}")
                continue
            try:
                for type_, status, reason in want.get("conditions", ()):
                    require_condition(parent.get("conditions") or [], type_, status, reason, "")
            except AssertionError as err:
                problems.append(str(err))
                continue
            break
        else:
            raise NotYet(f"no parent entry like {dict(want)}: {problems or actual}")


def status_namespace(entry: Mapping[str, Any]) -> str:
    # The status file shows cluster-scoped objects in namespace "default": they have none.
    return "" if entry["kind"] in CLUSTER_SCOPED else str(entry.get("namespace") or "")
