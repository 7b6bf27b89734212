"""ExtensionService status as Contour writes it (``internal/status/extensionstatus.go``): one
DetailedCondition of type ``Valid`` with its errors and warnings::

    conditions:
    - type: Valid
      status: "True" | "False"
      reason: Valid | ErrorPresent
      message: Valid ExtensionService | At least one error present, see Errors for details
      observedGeneration: <metadata.generation>
      lastTransitionTime: <RFC 3339>
      errors: [{type, status: "True", reason, message}, ...]
      warnings: [...]

The previous ``lastTransitionTime`` is kept while the condition's status stays the same (the
Kubernetes convention; it also keeps ``cpx translate`` output stable).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from cpx.dag import Note

VALID = "Valid"
VALID_MESSAGE = "Valid ExtensionService"
ERROR_PRESENT = "ErrorPresent"
ERROR_PRESENT_MESSAGE = "At least one error present, see Errors for details"


@attrs.frozen
class SubCondition:
    type: str
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": "True", "reason": self.reason, "message": self.message}


@attrs.define
class Conditions:
    """The errors and warnings found for one ExtensionService."""

    errors: list[SubCondition] = attrs.field(factory=list)
    warnings: list[SubCondition] = attrs.field(factory=list)

    def error(self, type: str, reason: str, message: str) -> None:
        self.errors.append(SubCondition(type, reason, message))

    def warning(self, type: str, reason: str, message: str) -> None:
        self.warnings.append(SubCondition(type, reason, message))

    @property
    def valid(self) -> bool:
        return not self.errors

    def notes(self) -> Iterator[Note]:
        for e in self.errors:
            yield Note(type=e.type, reason=e.reason, message=e.message)
        for w in self.warnings:
            yield Note(type=w.type, reason=w.reason, message=w.message, severity="warning")

    def render(self, obj: Mapping[str, Any], now: dt.datetime | None = None) -> dict[str, Any]:
        """The status dict for ``DAG.set_status``, over the object's current status."""
        status = "True" if self.valid else "False"
        previous = _valid_condition(obj.get("status"))
        if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime"):
            transition = str(previous["lastTransitionTime"])
        else:
            transition = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition: dict[str, Any] = {
            "type": VALID,
            "status": status,
            "reason": VALID if self.valid else ERROR_PRESENT,
            "message": VALID_MESSAGE if self.valid else ERROR_PRESENT_MESSAGE,
            "observedGeneration": _generation(obj),
            "lastTransitionTime": transition,
        }
        if self.errors:  # Go's omitempty
            condition["errors"] = [e.to_dict() for e in self.errors]
        if self.warnings:
            condition["warnings"] = [w.to_dict() for w in self.warnings]
        return {"conditions": [condition]}


def _generation(obj: Mapping[str, Any]) -> int:
    meta = obj.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def _valid_condition(status: Any) -> Mapping[str, Any] | None:
    if not isinstance(status, Mapping):
        return None
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == VALID:
            return condition
    return None


def merge(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """StatusWriterSpec.merge: the computed Valid condition replaces ours; other controllers'
    conditions stay.  None when nothing but the transition time would change."""
    if not computed:
        return None
    new = _valid_condition(computed)
    kept = [c for c in current.get("conditions") or () if isinstance(c, Mapping) and c.get("type") != VALID]
    old = _valid_condition(current)
    if new is None:
        return None
    replacement = dict(new)
    if old is not None and old.get("status") == new.get("status") and old.get("lastTransitionTime"):
        replacement["lastTransitionTime"] = old["lastTransitionTime"]
    if old == replacement:
        return None
    return {**current, "conditions": [*kept, replacement]}


def refused(obj: Mapping[str, Any], notes: Sequence[Note]) -> dict[str, Any]:
    """The status of an ExtensionService cpx left out (StatusWriterSpec.refused): each note an error."""
    conditions = Conditions()
    for note in notes:
        conditions.error(note.type, note.reason, note.message)
    return conditions.render(obj)
