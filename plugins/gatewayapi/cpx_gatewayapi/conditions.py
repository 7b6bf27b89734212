"""Gateway API conditions: ``metav1.Condition`` values with the rules every kind shares.

A condition carries the generation it was computed from (``observedGeneration``) and keeps its
``lastTransitionTime`` while its status does not change, so that an unchanged object is never
rewritten (and the suite's "current generation" checks pass).  The previous conditions come from
the object's current status in the source cache.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str,
    status: bool | str,
    reason: str,
    message: str,
    generation: int,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """One condition; ``previous`` (the current conditions) supplies an unchanged transition time."""
    value = status if isinstance(status, str) else (TRUE if status else FALSE)
    prior = find(previous, type_)
    transition = None
    if prior is not None and prior.get("status") == value and prior.get("lastTransitionTime"):
        transition = str(prior["lastTransitionTime"])
    return {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": transition or now(),
    }


def find(conditions: Iterable[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == type_), None)


def merge_conditions(
    current: Sequence[Mapping[str, Any]], computed: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Computed conditions replace those of their type, others (another controller's) stay, in
    place; a current condition observed at a newer generation than ours is left as it is, and one
    whose status does not change keeps its lastTransitionTime (whatever the computed one says: it
    may have been computed from an older status than the object's)."""
    merged = [dict(c) for c in current if isinstance(c, Mapping)]
    for new in computed:
        index = next((i for i, c in enumerate(merged) if c.get("type") == new.get("type")), None)
        if index is None:
            merged.append(dict(new))
            continue
        old = merged[index]
        old_generation, new_generation = old.get("observedGeneration"), new.get("observedGeneration")
        if (
            isinstance(old_generation, int)
            and isinstance(new_generation, int)
            and old_generation > new_generation
        ):
            continue
        merged[index] = _keeping_transition_time(old, new)
    return merged


def keep_transition_times(
    current: Sequence[Mapping[str, Any]], computed: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The computed conditions, each keeping the lastTransitionTime of the current one of its type
    when its status is the same (a list replaced as a whole: a listener's, a route parent's)."""
    by_type = {c.get("type"): c for c in current if isinstance(c, Mapping)}
    return [_keeping_transition_time(by_type.get(new.get("type")), new) for new in computed]


def _keeping_transition_time(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    replacement = dict(new)
    if old is not None and old.get("status") == new.get("status") and old.get("lastTransitionTime"):
        replacement["lastTransitionTime"] = old["lastTransitionTime"]
    return replacement


def generation_of(obj: Mapping[str, Any]) -> int:
    value = (obj.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else 0


def current_status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


TRANSITION = "lastTransitionTime"


def stabilize(computed: dict[str, Any], last: dict[str, Any] | None) -> dict[str, Any]:
    """``computed`` with the transition times of the status computed for the object last build.

    A condition takes its previous time from the object's stored status, but objects read from
    files have none, and a status written to the API server comes back later: without this, every
    rebuild a second apart would stamp new times on every condition and report every Gateway API
    object as changed.  Equal but for those times → ``last`` itself (the same object: nothing to
    write); otherwise each condition whose type and status are unchanged keeps its time.
    """
    if last is None:
        return computed
    if _without_times(computed) == _without_times(last):
        return last
    return _carry_times(computed, last)  # type: ignore[no-any-return]


def _without_times(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_times(v) for k, v in value.items() if k != TRANSITION}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _carry_times(value: Any, last: Any) -> Any:
    """Walk ``value`` beside ``last`` (lists matched by their entries' type / name / parentRef /
    ancestorRef)."""
    if isinstance(value, Mapping) and isinstance(last, Mapping):
        out = {k: _carry_times(v, last.get(k)) for k, v in value.items()}
        if _same_condition(value, last):
            out[TRANSITION] = last[TRANSITION]
        return out
    if isinstance(value, list) and isinstance(last, list):
        return [_carry_times(v, _partner(v, last)) for v in value]
    return value


def _same_condition(value: Mapping[str, Any], last: Mapping[str, Any]) -> bool:
    return (
        TRANSITION in value
        and bool(last.get(TRANSITION))
        and "type" in value
        and (last.get("type"), last.get("status")) == (value["type"], value.get("status"))
    )


def _partner(entry: Any, last: list[Any]) -> Any:
    if not isinstance(entry, Mapping):
        return None
    for field in ("type", "name", "parentRef", "ancestorRef"):
        if field in entry:
            return next((e for e in last if isinstance(e, Mapping) and e.get(field) == entry[field]), None)
    return None
