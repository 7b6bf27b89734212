"""The status writers' merges: ours replaced, other controllers' entries untouched, no-op as None."""

from __future__ import annotations

from typing import Any

from cpx.testing import PluginHost

from cpx_gatewayapi import status
from cpx_gatewayapi.kinds import HTTPROUTE

OURS, THEIRS = "projectcontour.io/gateway-controller", "example.com/other"


def condition(
    type_: str, value: str = "True", reason: str | None = None, generation: int = 1
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": value,
        "reason": reason or type_,
        "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def parent(
    name: str, controller: str = OURS, section: str | None = None, accepted: str = "True"
) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "namespace": "infra",
        "name": name,
    }
    if section is not None:
        ref["sectionName"] = section
    return {"parentRef": ref, "controllerName": controller, "conditions": [condition("Accepted", accepted)]}


def merge(current: dict[str, Any], computed: dict[str, Any]) -> Any:
    return status.merge_route(current, computed, controller_name=OURS)


# -- routes ------------------------------------------------------------------------------------------


def test_route_status_is_the_parents_list() -> None:
    entries = [parent("a"), parent("b", section="http")]
    assert status.route_status(entries) == {"parents": entries}
    assert status.route_status([]) == {"parents": []}


def test_our_entries_are_added_beside_other_controllers() -> None:
    theirs = parent("x", THEIRS)
    merged = merge({"parents": [theirs]}, status.route_status([parent("a")]))
    assert merged == {"parents": [theirs, parent("a")]}


def test_our_entries_are_replaced_in_place_and_others_untouched() -> None:
    theirs_before, theirs_after = parent("x", THEIRS), parent("y", THEIRS)
    current = {"parents": [theirs_before, parent("a", accepted="False"), theirs_after]}
    merged = merge(current, status.route_status([parent("a")]))
    assert merged == {"parents": [theirs_before, parent("a"), theirs_after]}


def test_another_controllers_entry_for_the_same_parent_is_kept() -> None:
    theirs = parent("a", THEIRS, accepted="False")
    merged = merge({"parents": [theirs]}, status.route_status([parent("a")]))
    assert merged == {"parents": [theirs, parent("a")]}


def test_our_stale_entries_are_dropped() -> None:
    theirs = parent("x", THEIRS)
    current = {"parents": [parent("old"), theirs, parent("a", section="http")]}
    merged = merge(current, status.route_status([parent("a", section="http")]))
    assert merged == {"parents": [theirs, parent("a", section="http")]}
    # A route that left our scope: computed with no entries, ours all go.
    assert merge(current, status.route_status([])) == {"parents": [theirs]}


def test_parent_refs_match_with_defaults_filled_in() -> None:
    bare = {"parentRef": {"name": "a", "namespace": "infra"}, "controllerName": OURS, "conditions": []}
    merged = merge({"parents": [bare]}, status.route_status([parent("a")]))
    assert merged == {"parents": [parent("a")]}
    assert status.parent_ref_key(bare) == status.parent_ref_key(parent("a"))
    assert status.parent_ref_key(parent("a")) != status.parent_ref_key(parent("a", section="http"))


def test_nothing_to_write_is_none() -> None:
    current = {"parents": [parent("x", THEIRS), parent("a")]}
    assert merge(current, status.route_status([parent("a")])) is None
    assert merge(current, {}) is None  # not computed: a route that was never ours
    assert merge({}, status.route_status([])) is None
    assert merge({"parents": [parent("x", THEIRS)]}, status.route_status([])) is None


def test_other_status_fields_and_junk_entries_are_kept() -> None:
    current = {"parents": ["junk", parent("a", accepted="False")], "extra": 1}
    merged = merge(current, status.route_status([parent("a")]))
    assert merged == {"parents": ["junk", parent("a")], "extra": 1}


def test_has_parents_of() -> None:
    route = {"status": {"parents": [parent("x", THEIRS), parent("a")]}}
    assert status.has_parents_of(route, OURS)
    assert not status.has_parents_of(route, "example.com/nobody")
    assert not status.has_parents_of({}, OURS)
    assert not status.has_parents_of({"status": {"parents": "junk"}}, OURS)


def test_the_registered_route_merge_uses_the_configured_controller_name() -> None:
    host = PluginHost.load(["gatewayapi"])
    from cpx import Config

    host.configure(
        Config(options={**{o.name: o.default for o in host.options()}, "gateway_controller_name": THEIRS})
    )
    [route_writer] = [w for w in host.status_writers() if w.gvk == HTTPROUTE]
    assert route_writer.merge is not None
    current = {"parents": [parent("x", THEIRS), parent("a")]}
    assert route_writer.merge(current, status.route_status([])) == {"parents": [parent("a")]}


# -- GatewayClass and Gateway ----------------------------------------------------------------------


def test_gateway_merge_keeps_other_condition_types_and_replaces_listeners_and_addresses() -> None:
    current = {
        "conditions": [condition("Accepted", "False"), condition("example.com/Extra")],
        "listeners": [{"name": "old"}],
        "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}],
    }
    computed = {
        "conditions": [condition("Accepted"), condition("Programmed")],
        "listeners": [{"name": "http"}],
        "addresses": [{"type": "IPAddress", "value": "127.0.0.2"}],
    }
    assert status.merge_gateway(current, computed) == {
        "conditions": [condition("Accepted"), condition("example.com/Extra"), condition("Programmed")],
        "listeners": [{"name": "http"}],
        "addresses": [{"type": "IPAddress", "value": "127.0.0.2"}],
    }


def test_gateway_merge_leaves_newer_conditions() -> None:
    current = {"conditions": [condition("Accepted", generation=5)]}
    assert (
        status.merge_gateway(current, {"conditions": [condition("Accepted", "False", generation=4)]}) is None
    )


def test_gateway_and_class_merges_of_nothing_write_nothing() -> None:
    current = {"conditions": [condition("Accepted", "False", "Theirs")]}
    assert status.merge_gateway(current, {}) is None
    assert status.merge_gateway_class(current, {}) is None
    computed = {"conditions": [condition("Accepted")], "listeners": []}
    assert status.merge_gateway({**computed}, computed) is None


def test_gateway_class_merge() -> None:
    features = [{"name": "Gateway"}]
    merged = status.merge_gateway_class(
        {"conditions": [condition("Accepted", "Unknown", "Pending")]},
        {"conditions": [condition("Accepted"), condition("SupportedVersion")], "supportedFeatures": features},
    )
    assert merged == {
        "conditions": [condition("Accepted"), condition("SupportedVersion")],
        "supportedFeatures": features,
    }
