"""ExtensionService status as Contour writes it (``internal/status/extensionstatus.go``): the core's
:class:`cpx.DetailedStatus`, one DetailedCondition of type ``Valid`` (message ``Valid
ExtensionService``) with its errors and warnings, and nothing else (no currentStatus).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cpx import DetailedStatus, object_generation, valid_condition
from cpx.dag import Note

VALID_MESSAGE = "Valid ExtensionService"


def for_object(obj: Mapping[str, Any]) -> DetailedStatus:
    """An empty status for this ExtensionService; observedGeneration comes from metadata.generation."""
    return DetailedStatus(VALID_MESSAGE, generation=object_generation(obj))


def render(status: DetailedStatus, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The status dict for ``DAG.set_status``, over the object's current status."""
    previous = obj.get("status")
    return {"conditions": [status.condition(previous if isinstance(previous, Mapping) else None)]}


def merge(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """StatusWriterSpec.merge: the computed Valid condition replaces ours; other controllers'
    conditions stay.  None when nothing but the transition time would change."""
    if not computed:
        return None
    new = valid_condition(computed)
    kept = [c for c in current.get("conditions") or () if isinstance(c, Mapping) and c.get("type") != "Valid"]
    old = valid_condition(current)
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
    status = for_object(obj)
    for note in notes:
        status.add_error(note.type, note.reason, note.message)
    return render(status, obj)
