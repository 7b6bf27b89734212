"""Contour's DetailedCondition status (``apis/projectcontour/v1/detailedconditions.go``, ``helpers.go``),
for any plugin whose kind reports like Contour's CRDs (HTTPProxy, ExtensionService, ...)::

    conditions:
    - type: Valid
      status: "True" | "False"
      reason: Valid | ErrorPresent
      message: <valid_message> | At least one error present, see Errors for details
      observedGeneration: <metadata.generation>
      lastTransitionTime: <RFC 3339>
      errors: [{type, status: "True", reason, message}, ...]
      warnings: [...]

A plugin collects errors and warnings in a :class:`DetailedStatus` while building and renders its
condition.  Contour stamps ``lastTransitionTime`` at every update; cpx keeps the previous time while
the condition's status stays the same (the Kubernetes convention), which also keeps ``cpx translate``
output stable, and takes "now" from an injectable clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from cpx.dag.dag import Note

VALID = "Valid"
ERROR_PRESENT = "ErrorPresent"
ERROR_PRESENT_MESSAGE = "At least one error present, see Errors for details"

# Contour's LongMessageLength: the CRDs allow 32768; Contour cuts a little earlier.
LONG_MESSAGE_LENGTH = 32760

StatusClock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def fixed_clock(when: dt.datetime) -> StatusClock:
    """A clock that always answers ``when`` (for ``cpx translate`` and tests)."""
    return lambda: when


def truncate(message: str) -> str:
    """Contour's truncateLongMessage: at most 32760 bytes of UTF-8 (never half a character)."""
    raw = message.encode()
    if len(raw) <= LONG_MESSAGE_LENGTH:
        return message
    return raw[:LONG_MESSAGE_LENGTH].decode(errors="ignore")


def status_timestamp(when: dt.datetime) -> str:
    """A metav1.Time: RFC 3339 in UTC, whole seconds (a naive time is taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_generation(obj: Mapping[str, Any]) -> int:
    """``metadata.generation`` (0 when absent or not an integer): a condition's observedGeneration."""
    meta = obj.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def valid_condition(status: Any) -> Mapping[str, Any] | None:
    """The ``Valid`` condition of a status dict (None when there is none)."""
    if not isinstance(status, Mapping):
        return None
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == VALID), None)


@attrs.frozen
class SubCondition:
    """An error or a warning of the Valid condition (its status is always "True")."""

    type: str
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": "True", "reason": self.reason, "message": self.message}


@attrs.define
class DetailedStatus:
    """The errors and warnings found for one object; renders its ``Valid`` DetailedCondition.

    As in Contour, every error is kept (in order, duplicates included) and any error makes the object
    invalid; warnings never change validity.  Messages are cut to Contour's LongMessageLength.
    """

    valid_message: str
    generation: int = 0
    errors: list[SubCondition] = attrs.field(factory=list)
    warnings: list[SubCondition] = attrs.field(factory=list)

    def add_error(self, type: str, reason: str, message: str) -> None:
        self.errors.append(SubCondition(type, reason, truncate(message)))

    def add_warning(self, type: str, reason: str, message: str) -> None:
        self.warnings.append(SubCondition(type, reason, truncate(message)))

    @property
    def valid(self) -> bool:
        return not self.errors

    def keeps_transition_time(self, previous: Mapping[str, Any] | None) -> bool:
        """Whether :meth:`condition` over ``previous`` (the object's current status) keeps its
        lastTransitionTime rather than stamping "now": the Valid condition's status is unchanged."""
        return self._kept_transition_time(previous) is not None

    def _kept_transition_time(self, previous: Mapping[str, Any] | None) -> str | None:
        prior = valid_condition(previous)
        if prior is None or prior.get("status") != self._status or not prior.get("lastTransitionTime"):
            return None
        return str(prior["lastTransitionTime"])

    @property
    def _status(self) -> str:
        return "True" if self.valid else "False"

    @property
    def message(self) -> str:
        """The Valid condition's message (also HTTPProxy's ``description``)."""
        return self.valid_message if self.valid else ERROR_PRESENT_MESSAGE

    def condition(
        self, previous: Mapping[str, Any] | None = None, *, clock: StatusClock = utc_now
    ) -> dict[str, Any]:
        """The Valid DetailedCondition; ``previous`` is the object's current status."""
        transition = self._kept_transition_time(previous) or status_timestamp(clock())
        out: dict[str, Any] = {
            "type": VALID,
            "status": self._status,
            "reason": VALID if self.valid else ERROR_PRESENT,
            "message": self.message,
            "observedGeneration": self.generation,
            "lastTransitionTime": transition,
        }
        # Go's omitempty: empty lists are left out.
        if self.errors:
            out["errors"] = [e.to_dict() for e in self.errors]
        if self.warnings:
            out["warnings"] = [w.to_dict() for w in self.warnings]
        return out

    def notes(self) -> Iterator[Note]:
        """The same errors and warnings as DAG notes (for logs and ``cpx translate``)."""
        for e in self.errors:
            yield Note(type=e.type, reason=e.reason, message=e.message)
        for w in self.warnings:
            yield Note(type=w.type, reason=w.reason, message=w.message, severity="warning")
