"""What the API server would refuse, checked for standalone mode's manifest files.

In Kubernetes mode the API server refuses a bad write and the object's previous version stays in
force; a manifest file has no such gatekeeper, so standalone mode plays its part: a document that
breaks its kind's schema or Kubernetes' naming rules is refused here, before it reaches the
pipeline, and the file's previous version of it is kept (see docs/design/0006).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import attrs

from cpx.dag.dag import Note
from cpx.objects import KubeObject, ObjectKey, metadata_problems
from cpx.records import WatchSpec
from cpx.snapshot import SnapshotHandler, UnknownKindError
from cpx.sources.manifests import DocumentError, default_namespace

log = logging.getLogger("cpx.sources.manifests")


@attrs.frozen
class Admission:
    """One file's objects sorted out: those to serve, those refused, those of unknown kinds."""

    accepted: list[KubeObject]
    refused: list[DocumentError]  # each with the key of the object it names
    unknown: list[DocumentError]  # kinds no enabled plugin handles: reported, otherwise ignored


def admit(
    pipeline: SnapshotHandler,
    path: Path,
    objects: Sequence[KubeObject],
    positions: Sequence[int] | None = None,
) -> Admission:
    """Default namespaces, then check every object as the API server would.

    ``positions`` are the objects' document indexes (from :func:`cpx.sources.manifests.parse_file`).
    """
    out = Admission([], [], [])
    first_index: dict[ObjectKey, int] = {}
    for i, obj in enumerate(objects):
        index = positions[i] if positions is not None else i
        key = ObjectKey.of(obj)
        try:
            spec = pipeline.watch_for(obj, key)
        except UnknownKindError as err:
            out.unknown.append(DocumentError(path, index, f"{obj['kind']} {key.name}: {err}", key))
            continue
        # A file's resourceVersion (e.g. from `kubectl get -o yaml`) means nothing here: an edit that
        # keeps it must still apply, so objects are compared by content.
        obj["metadata"].pop("resourceVersion", None)
        namespace = default_namespace(obj, spec.gvk.namespaced)["metadata"].get("namespace") or ""
        if str(namespace) != key.namespace:
            key = ObjectKey(key.group, key.kind, str(namespace), key.name)  # ObjectKey.of, defaulted
        problems = _problems(spec, obj, key, path)
        if key in first_index:  # as with two files: the first definition is served, others refused
            problems.append(f"defined again: document {first_index[key] + 1} of this file defines it")
        first_index.setdefault(key, index)
        if problems:
            out.refused.extend(DocumentError(path, index, f"{key}: {p}", key) for p in problems)
        else:
            out.accepted.append(obj)
    return out


def _problems(spec: WatchSpec, obj: KubeObject, key: ObjectKey, path: Path) -> list[str]:
    checked: list[str] = []
    if spec.validate is not None:
        try:
            checked = list(spec.validate(obj))
        except Exception as err:  # a plugin's check must not take the source down
            log.exception("%s: the schema check of %s failed", path, key)
            checked = [f"cannot be checked ({type(err).__name__})"]
    found = metadata_problems(obj, key)
    if not found:
        return checked  # nearly every object
    # Unless the kind's own check already judged the name (the Ingress plugin's does).
    return [p for p in found if not _same_field(p, checked)] + checked


def _same_field(problem: str, others: Sequence[str]) -> bool:
    field = problem.partition(": ")[0] + ": "
    return any(other.startswith(field) for other in others)


def refusal_note(errors: Sequence[DocumentError], kept: bool) -> Note:
    outcome = "the previous version is kept" if kept else "not served"
    return Note(
        type="SchemaError",
        reason="Invalid",
        message=f"refused ({outcome}): " + "; ".join(str(e) for e in errors),
    )


def conflict_note(key: ObjectKey, holders: Sequence[Path]) -> Note:
    files = ", ".join(str(p) for p in holders)
    return Note(
        type="ManifestError",
        reason="DuplicateObject",
        message=f"{key} is defined in {len(holders)} files ({files}): the one in {holders[0]} is served "
        "(the file that sorts first by path)",
    )


def malformed_note(error: str) -> Note:
    return Note(
        type="ManifestError",
        reason="Malformed",
        message=f"{error}; the last version read from the file is kept",
    )


def kept_note(path: Path) -> Note:
    return Note(
        type="ManifestError",
        reason="KeptWhileRefused",
        message=f"no longer in {path}, but kept: the file has refused documents and one of them may be "
        "this object edited; it goes once the file loads cleanly",
        severity="warning",
    )
