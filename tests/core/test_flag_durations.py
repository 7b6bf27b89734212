"""Durations as flags and Contour's configuration file take them."""

from __future__ import annotations

import pytest

from cpx.durations import parse_duration, parse_timeout_seconds


@pytest.mark.parametrize(
    ("value", "seconds"), [("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("2", 2.0), (3, 3.0)]
)
def test_durations(value: str | float, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["inf", "infinity", "nan", "-1s", "+1s", "1x", "", float("inf")])
def test_what_is_not_a_finite_unsigned_duration_is_refused(value: str | float) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(value)


def test_a_timeout_setting_may_be_infinity_which_is_envoys_zero() -> None:
    assert parse_timeout_seconds("infinity") == 0.0 == parse_timeout_seconds("infinite")
    assert parse_timeout_seconds("1m") == 60.0
