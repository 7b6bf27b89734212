"""HTTPProxy status as Contour writes it, and the status writer's merge."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from cpx import fixed_clock
from cpx.dag import Note

from cpx_httpproxy import status
from cpx_httpproxy.status import ProxyStatus, merge

T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
T1 = dt.datetime(2024, 5, 2, 8, 30, 15, 999, tzinfo=dt.UTC)
CLOCK = fixed_clock(T0)


def _obj(generation: int | None = 3) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default"}
    if generation is not None:
        meta["generation"] = generation
    return {"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": meta, "spec": {}}


def test_valid() -> None:
    assert ProxyStatus.for_object(_obj()).render(clock=CLOCK) == {
        "currentStatus": "valid",
        "description": "Valid HTTPProxy",
        "conditions": [
            {
                "type": "Valid",
                "status": "True",
                "reason": "Valid",
                "message": "Valid HTTPProxy",
                "observedGeneration": 3,
                "lastTransitionTime": "2024-05-01T12:00:00Z",
            }
        ],
    }


def test_warnings_keep_it_valid() -> None:
    ps = ProxyStatus.for_object(_obj())
    ps.add_warning(status.SPEC_ERROR, "IgnoredField", 'ignoring field "Spec.Routes.LoadBalancerPolicy"')
    rendered = ps.render(clock=CLOCK)
    assert rendered["currentStatus"] == "valid" and rendered["description"] == "Valid HTTPProxy"
    [condition] = rendered["conditions"]
    assert (condition["status"], condition["reason"]) == ("True", "Valid")
    assert "errors" not in condition
    assert condition["warnings"] == [
        {
            "type": "SpecError",
            "status": "True",
            "reason": "IgnoredField",
            "message": 'ignoring field "Spec.Routes.LoadBalancerPolicy"',
        }
    ]


def test_invalid() -> None:
    ps = ProxyStatus.for_object(_obj())
    ps.add_error(status.VIRTUAL_HOST_ERROR, "FQDNNotSpecified", "Spec.VirtualHost.Fqdn must be specified")
    ps.add_error(status.SERVICE_ERROR, "ServicePortInvalid", 'service "x": port must be in the range 1-65535')
    ps.add_warning(status.TCP_PROXY_ERROR, "IgnoredField", "ignored")
    rendered = ps.render(clock=CLOCK)
    assert rendered["currentStatus"] == "invalid"
    assert rendered["description"] == "At least one error present, see Errors for details"
    [condition] = rendered["conditions"]
    assert condition["status"] == "False" and condition["reason"] == "ErrorPresent"
    assert condition["message"] == "At least one error present, see Errors for details"
    assert [(e["type"], e["reason"], e["status"]) for e in condition["errors"]] == [
        ("VirtualHostError", "FQDNNotSpecified", "True"),
        ("ServiceError", "ServicePortInvalid", "True"),
    ]
    assert len(condition["warnings"]) == 1
    assert not ps.valid and ps.current_status == "invalid"


def test_orphaned() -> None:
    ps = ProxyStatus.for_object(_obj())
    ps.orphan()
    rendered = ps.render(clock=CLOCK)
    assert rendered["currentStatus"] == "orphaned"
    assert rendered["description"] == "this HTTPProxy is not part of a delegation chain from a root HTTPProxy"
    [condition] = rendered["conditions"]
    assert condition["status"] == "False" and condition["reason"] == "ErrorPresent"
    assert condition["errors"] == [
        {
            "type": "Orphaned",
            "status": "True",
            "reason": "Orphaned",
            "message": "this HTTPProxy is not part of a delegation chain from a root HTTPProxy",
        }
    ]


def test_generation() -> None:
    assert ProxyStatus.for_object(_obj(None)).generation == 0
    assert ProxyStatus.for_object({"metadata": {"generation": "7"}}).generation == 0
    assert ProxyStatus.for_object(_obj(12)).condition(clock=CLOCK)["observedGeneration"] == 12


def test_truncation() -> None:
    ps = ProxyStatus()
    ps.add_error(status.ROUTE_ERROR, "R", "x" * 40000)
    ps.add_warning(status.ROUTE_ERROR, "R", "é" * 20000)  # 40000 bytes of UTF-8
    ps.add_error(status.ROUTE_ERROR, "R", "short")
    assert len(ps.errors[0].message) == 32760
    assert ps.warnings[0].message == "é" * 16380  # cut on a character boundary
    assert ps.errors[1].message == "short"


def test_transition_time() -> None:
    ps = ProxyStatus.for_object(_obj())
    first = ps.render(clock=CLOCK)
    # Same status: the previous transition time is kept, whatever the clock says.
    assert ps.render(first, clock=fixed_clock(T1)) == first
    # The status changes: the clock decides.
    ps.add_error(status.ROUTE_ERROR, "R", "boom")
    second = ps.render(first, clock=fixed_clock(T1))
    assert second["conditions"][0]["lastTransitionTime"] == "2024-05-02T08:30:15Z"


def test_notes() -> None:
    ps = ProxyStatus()
    ps.add_error(status.TLS_ERROR, "SecretNotValid", "Secret not found")
    ps.add_warning(status.SPEC_ERROR, "IgnoredField", "ignored")
    assert list(ps.notes()) == [
        Note(type="TLSError", reason="SecretNotValid", message="Secret not found"),
        Note(type="SpecError", reason="IgnoredField", message="ignored", severity="warning"),
    ]


# -- merge ----------------------------------------------------------------------------------------


def _rendered(*errors: str, generation: int = 3, when: dt.datetime = T0) -> dict[str, Any]:
    ps = ProxyStatus(generation=generation)
    for e in errors:
        ps.add_error(status.ROUTE_ERROR, "R", e)
    return ps.render(clock=fixed_clock(when))


def test_merge_into_empty_status() -> None:
    computed = _rendered()
    assert merge({}, computed) == computed


def test_merge_is_a_no_op_when_only_timestamps_differ() -> None:
    current = _rendered(when=T0)
    assert merge(current, _rendered(when=T1)) is None
    assert merge(current, copy.deepcopy(current)) is None
    assert merge(current, {}) is None  # nothing computed: leave the object alone


def test_merge_writes_real_changes_and_keeps_the_transition_time() -> None:
    current = _rendered("one", when=T0)
    merged = merge(current, _rendered("two", when=T1))
    assert merged is not None
    [condition] = merged["conditions"]
    assert condition["errors"][0]["message"] == "two"
    assert condition["lastTransitionTime"] == "2024-05-01T12:00:00Z"  # still False: no transition
    fixed = merge(current, _rendered(when=T1))
    assert fixed is not None and fixed["currentStatus"] == "valid"
    assert fixed["conditions"][0]["lastTransitionTime"] == "2024-05-02T08:30:15Z"


def test_merge_keeps_other_conditions_and_load_balancer() -> None:
    foreign = {
        "type": "example.com/Ready",
        "status": "True",
        "reason": "Ready",
        "message": "",
        "lastTransitionTime": "2020-01-01T00:00:00Z",
    }
    current = {
        "currentStatus": "NotReconciled",
        "description": "Waiting for controller",
        "loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]},
        "conditions": [foreign],
    }
    merged = merge(current, _rendered("bad"))
    assert merged is not None
    assert merged["loadBalancer"] == current["loadBalancer"]
    assert [c["type"] for c in merged["conditions"]] == ["example.com/Ready", "Valid"]
    assert (merged["currentStatus"], merged["description"]) == (
        "invalid",
        "At least one error present, see Errors for details",
    )
    assert current["conditions"] == [foreign]  # the current status is not mutated


def test_merge_writes_a_computed_load_balancer() -> None:
    current = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    computed = {**_rendered(), "loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}
    merged = merge(current, computed)
    assert merged is not None and merged["loadBalancer"] == computed["loadBalancer"]
    assert merge(merged, computed) is None


def test_merge_does_not_overwrite_a_newer_observation() -> None:
    current = _rendered(generation=5)
    assert merge(current, _rendered("stale", generation=4)) is None


def test_merge_derives_orphaned_from_the_condition() -> None:
    ps = ProxyStatus(generation=1)
    ps.orphan()
    merged = merge({"currentStatus": "valid"}, ps.render(clock=CLOCK))
    assert merged is not None
    assert merged["currentStatus"] == "orphaned"
    assert merged["description"] == status.ORPHANED_MESSAGE
