"""Keeping one object's faults its own: what went wrong in a build, and whose fault it was.

A build can go wrong in three ways: a processor or cache raises; a generated resource breaks a
rule Envoy enforces (:mod:`cpx.xds.constraints.validate`); or a checker (``--envoy-validate``)
refuses the snapshot.
Each becomes a :class:`Fault`.  A fault names the objects it came from when translation knows them
(``precise``: a route's origin); otherwise it names the objects that fed the resource (or none),
and the pipeline narrows that down to the objects changed since the last good build and, if more
than one remains, bisects them with trial builds (:func:`find_culprit`).  The culprit is left out
of every build (quarantined) until it changes; everything else is published.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from types import TracebackType
from typing import Protocol

import attrs

from cpx.dag.dag import Note
from cpx.objects import ObjectKey

# Envoy's and Python's messages can carry tenant-written text: keep one line, bounded.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_MESSAGE = 1024


def sanitize(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line, control characters escaped, at most ``limit`` characters."""
    cleaned = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."


@attrs.frozen(kw_only=True)
class Fault:
    """One problem found while building: the note to show, and who caused it."""

    note: Note
    origins: frozenset[ObjectKey] = frozenset()
    # True when translation knows exactly which object produced the offending part; False when
    # ``origins`` are merely the objects that fed the resource (suspects, to be narrowed down).
    precise: bool = False


def exception_note(err: BaseException) -> Note:
    return Note(
        type="InternalError", reason="TranslationFailed", message=sanitize(f"{type(err).__name__}: {err}")
    )


def find_culprit(
    candidates: Sequence[ObjectKey], fails_without: Callable[[Sequence[ObjectKey]], bool]
) -> ObjectKey | None:
    """The candidate whose presence makes the build fail, by bisection.

    ``fails_without(excluded)`` runs a trial build without the ``excluded`` objects and says
    whether it still fails.  With the failure present when every candidate is included and gone
    when none is, the smallest prefix of candidates that still fails ends at a culprit:
    ``log2(len(candidates)) + 1`` trial builds.  None when the build fails even without any
    candidate (the fault is not theirs).
    """
    if not candidates or fails_without(candidates):
        return None
    low, high = 0, len(candidates)  # including candidates[:low] passes; candidates[:high] fails
    while high - low > 1:
        mid = (low + high) // 2
        if fails_without(candidates[mid:]):
            high = mid
        else:
            low = mid
    return candidates[high - 1]


class ObjectFault(Exception):
    """Raised out of a processor: translating ``key`` failed with ``note``; the build goes on
    without that object (see :func:`blame`)."""

    def __init__(self, key: ObjectKey, note: Note) -> None:
        super().__init__(f"{key}: {note.message}")
        self.key = key
        self.note = note


class ReadAttribution(Protocol):
    """Where a build records what each blamed object's translation reads (the source cache)."""

    def attributed(self, key: ObjectKey) -> AbstractContextManager[object]: ...


_attribution: ContextVar[ReadAttribution | None] = ContextVar("cpx_read_attribution", default=None)


@contextlib.contextmanager
def attributing_reads(to: ReadAttribution) -> Iterator[None]:
    """While the block runs (a DAG build), :func:`blame` also records reads per object."""
    token = _attribution.set(to)
    try:
        yield
    finally:
        _attribution.reset(token)


def blame(key: ObjectKey) -> AbstractContextManager[None]:
    """Attribute any exception raised inside to ``key``: a processor wraps each object's
    translation in it, so that one object's crash leaves out that object, not the build.
    Nested uses keep the innermost object (an include's child, not its root).

    During a build, what the block reads from the source is recorded as ``key``'s reads too
    (nested blocks count for the enclosing object as well): see ``SourceView.referencing``."""
    return _Blame(key)


class _Blame:
    """:func:`blame`; a class, not a generator: processors enter one per object per build."""

    __slots__ = ("_key", "_reads")

    def __init__(self, key: ObjectKey) -> None:
        self._key = key
        self._reads: AbstractContextManager[object] | None = None

    def __enter__(self) -> None:
        attribution = _attribution.get()
        if attribution is not None:
            self._reads = attribution.attributed(self._key)
            self._reads.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._reads is not None:
            self._reads.__exit__(kind, err, tb)
        if isinstance(err, Exception) and not isinstance(err, ObjectFault):
            raise ObjectFault(self._key, exception_note(err)) from err
