"""cpx.DetailedStatus: Contour's Valid DetailedCondition, shared by the plugins of Contour's CRDs."""

from __future__ import annotations

import datetime as dt

from cpx import (
    DetailedStatus,
    SubCondition,
    fixed_clock,
    object_generation,
    status_timestamp,
    valid_condition,
)
from cpx.dag import Note

T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
T1 = dt.datetime(2024, 5, 2, 8, 30, 15, 999, tzinfo=dt.UTC)


def test_valid_condition_omits_empty_lists() -> None:
    status = DetailedStatus("Valid Widget", generation=4)
    assert status.valid
    assert status.condition(clock=fixed_clock(T0)) == {
        "type": "Valid",
        "status": "True",
        "reason": "Valid",
        "message": "Valid Widget",
        "observedGeneration": 4,
        "lastTransitionTime": "2024-05-01T12:00:00Z",
    }


def test_errors_and_warnings() -> None:
    status = DetailedStatus("Valid Widget")
    status.add_warning("SpecError", "Ignored", "w")
    assert status.valid  # warnings never change validity
    status.add_error("SpecError", "Bad", "one")
    status.add_error("SpecError", "Bad", "one")  # duplicates kept, as Contour does
    condition = status.condition(clock=fixed_clock(T0))
    assert (condition["status"], condition["reason"]) == ("False", "ErrorPresent")
    assert condition["message"] == "At least one error present, see Errors for details"
    assert (
        condition["errors"]
        == [{"type": "SpecError", "status": "True", "reason": "Bad", "message": "one"}] * 2
    )
    assert condition["warnings"] == [
        {"type": "SpecError", "status": "True", "reason": "Ignored", "message": "w"}
    ]
    assert list(status.notes()) == [
        Note(type="SpecError", reason="Bad", message="one"),
        Note(type="SpecError", reason="Bad", message="one"),
        Note(type="SpecError", reason="Ignored", message="w", severity="warning"),
    ]
    assert status.errors[0] == SubCondition("SpecError", "Bad", "one")


def test_transition_time_kept_while_status_stays() -> None:
    status = DetailedStatus("Valid Widget")
    first = {"conditions": [status.condition(clock=fixed_clock(T0))]}
    assert status.keeps_transition_time(first)
    assert status.condition(first, clock=fixed_clock(T1)) == first["conditions"][0]
    status.add_error("SpecError", "Bad", "boom")
    assert not status.keeps_transition_time(first)
    assert status.condition(first, clock=fixed_clock(T1))["lastTransitionTime"] == "2024-05-02T08:30:15Z"
    assert not status.keeps_transition_time(None)
    assert not status.keeps_transition_time({"conditions": [{"type": "Valid", "status": "False"}]})


def test_truncation() -> None:
    status = DetailedStatus("Valid Widget")
    status.add_error("E", "R", "x" * 40000)
    status.add_warning("E", "R", "é" * 20000)  # 40000 bytes of UTF-8
    assert len(status.errors[0].message) == 32760
    assert status.warnings[0].message == "é" * 16380  # cut on a character boundary


def test_helpers() -> None:
    assert status_timestamp(dt.datetime(2024, 1, 1)) == "2024-01-01T00:00:00Z"  # naive means UTC
    assert object_generation({"metadata": {"generation": 7}}) == 7
    assert object_generation({"metadata": {"generation": "7"}}) == 0
    assert object_generation({"metadata": {"generation": True}}) == 0
    assert object_generation({}) == 0
    other = {"type": "Ready", "status": "True"}
    valid = {"type": "Valid", "status": "True"}
    assert valid_condition({"conditions": [other, valid]}) == valid
    assert valid_condition({"conditions": [other]}) is None
    assert valid_condition("nonsense") is None
