"""The whole pipeline, offline (``cpx translate``): objects in, xDS and status out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpx.config import Config
from cpx.errors import ManifestError
from cpx.eventtypes import Event
from cpx.objects import KubeObject, ObjectKey
from cpx.plugins import PluginHost
from cpx.snapshot import BuildError, SnapshotHandler
from cpx.sources.manifests import expand
from cpx.sources.prefetch import prefetched
from cpx.sources.standalone import StandaloneSource
from cpx.status.reporter import translated_objects
from cpx.xds.resource import Snapshot

log = logging.getLogger("cpx.offline")
REDACTED = "[redacted]"


def redact_secrets(xds: dict[str, Any]) -> dict[str, Any]:
    """Private keys never leave the process in readable form, not even in translate output."""
    for secret in xds.get("secrets", ()):
        tls = secret.get("tlsCertificate")
        if tls and "privateKey" in tls:
            tls["privateKey"] = {"inlineBytes": REDACTED}
    return xds


@attrs.define(eq=False)
class _Apply:
    """The event handler's part, at once: a loaded file's changes go straight to the pipeline."""

    pipeline: SnapshotHandler

    def upsert(self, obj: KubeObject, source: str = "", *, admitted: bool = False) -> None:
        self.pipeline.upsert(obj, validate=not admitted)

    def delete(self, obj: KubeObject, source: str = "") -> None:
        self.pipeline.delete(obj)

    def submit(self, event: Event) -> None:
        pass  # one build at the end anyway


def translate(
    paths: Sequence[Path],
    host: PluginHost,
    config: Config,
    *,
    validator: Callable[[Snapshot], str | None] | None = None,
) -> dict[str, Any]:
    """Read manifests, build once, and return ``{"objects": [...], "errors": [...], "xds": {...}}``
    (:func:`translation`'s document)."""
    return translation(paths, host, config, validator=validator).doc


@attrs.frozen
class Translation:
    """:func:`translation`'s document, and the pipeline that made it: ``cpx translate`` keeps that
    until its process ends without freeing anything (freeing it costs ~7 ms at 10k routes)."""

    doc: dict[str, Any]
    pipeline: SnapshotHandler


def translation(
    paths: Sequence[Path],
    host: PluginHost,
    config: Config,
    *,
    validator: Callable[[Snapshot], str | None] | None = None,
    xds_json: Callable[[Snapshot], dict[str, Any]] = Snapshot.to_json,
) -> Translation:
    """Read manifests, build once, and make ``{"objects": [...], "errors": [...], "xds": {...}}``.

    Files are loaded as ``cpx serve`` loads them (refused documents, objects defined twice);
    raises ManifestError when an input cannot be read or parsed at all.  With a ``validator``
    (``--envoy-validate``) every build is checked by it (objects it refuses are left out, as in
    ``cpx serve``) and the output has ``"envoy": {"accepted": bool, "message": ...}``.
    ``xds_json`` renders the published snapshot (``cpx translate`` may leave a part to a child).
    """
    pipeline = SnapshotHandler.create(host, config)
    if validator is not None:
        pipeline.checkers.append(validator)
    loader = StandaloneSource(paths, pipeline)
    apply = _Apply(pipeline)
    read: list[dict[str, Any]] = []
    unknown: dict[ObjectKey, str] = {}
    for path, prepared in prefetched(expand(paths), loader.prepare):
        if isinstance(prepared, ManifestError):
            raise prepared  # the input is unreadable
        objects, doc_errors, admission = prepared
        unknown.update((e.key, e.message) for e in admission.unknown if e.key is not None)
        loader.apply_file(path, admission, doc_errors, apply)
        read += objects
    build_errors = []
    try:
        pipeline.rebuild()
    except BuildError as err:
        build_errors.append(f"the build failed and nothing was published: {err}")
    errors = [message for messages in loader.problems.values() for message in messages]
    errors += (  # `cpx serve` logs these too
        note.message
        for notes in pipeline.source_notes.values()
        for note in notes
        if note.reason == "DuplicateObject"
    )
    errors += build_errors
    xds = redact_secrets(xds_json(pipeline.snapshot)) if pipeline.snapshot is not None else {}
    doc: dict[str, Any] = {
        "objects": translated_objects(read, pipeline, unknown),
        "errors": errors,
        "xds": xds,
    }
    if host.declined:  # plugins that opted out in cpx_configure: say so, or their kinds look ignored
        doc["plugins"] = {"declined": dict(sorted(host.declined.items()))}
    if validator is not None:
        # The validator ran as a checker: objects Envoy refused are left out (their status says
        # so) and what was published is what Envoy accepted; no snapshot means nothing was.
        failed = pipeline.last_build_error
        doc["envoy"] = {"accepted": True} if failed is None else {"accepted": False, "message": failed}
    return Translation(doc, pipeline)
