"""``cpx translate``: the whole pipeline, offline: objects in, xDS and status out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cpx.config import Config
from cpx.manifests import expand, parse_file
from cpx.objects import ObjectKey
from cpx.pipeline import Pipeline, UnknownKindError
from cpx.plugins import PluginHost
from cpx.standalone import prepare
from cpx.xds.resource import Snapshot

log = logging.getLogger("cpx.translate")
REDACTED = "[redacted]"


def _identity(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ident: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("namespace"):
        ident["namespace"] = meta["namespace"]
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": ident}


def redact_secrets(xds: dict[str, Any]) -> dict[str, Any]:
    """Private keys never leave the process in readable form, not even in translate output."""
    for secret in xds.get("secrets", ()):
        tls = secret.get("tlsCertificate")
        if tls and "privateKey" in tls:
            tls["privateKey"] = {"inlineBytes": REDACTED}
    return xds


def translate(
    paths: Sequence[Path],
    host: PluginHost,
    config: Config,
    *,
    validator: Callable[[Snapshot], str | None] | None = None,
) -> dict[str, Any]:
    """Read manifests, build once, and return ``{"objects": [...], "errors": [...], "xds": {...}}``.

    With a ``validator`` (``--envoy-validate``) also ``"envoy": {"accepted": bool, "message": ...}``,
    its verdict on the snapshot.  Raises ManifestError when an input cannot be read or parsed at all.
    """
    pipeline = Pipeline.create(host, config)
    read: list[dict[str, Any]] = []
    errors: list[str] = []
    unknown: dict[ObjectKey, str] = {}
    for path in expand(paths):
        objects, doc_errors = parse_file(path)  # ManifestError propagates: input unreadable
        errors += [str(e) for e in doc_errors]
        for obj in objects:
            try:
                pipeline.watch_for(obj)
            except UnknownKindError as err:
                unknown[ObjectKey.of(obj)] = str(err)
        kept, _ = prepare(pipeline, path, objects)
        read += objects
        for obj in kept:
            if not pipeline.accepts(obj):
                continue
            pipeline.upsert(obj, validate=True)
    pipeline.rebuild()
    statuses = pipeline.statuses()
    out_objects = []
    for obj in read:
        key = ObjectKey.of(obj)
        entry = _identity(obj)
        if key in unknown:
            entry["status"] = {
                "cpx": {
                    "problems": [
                        {
                            "type": "UnknownKind",
                            "reason": "NotHandled",
                            "message": unknown[key],
                            "severity": "error",
                        }
                    ]
                }
            }
        elif key in statuses:
            entry["status"] = statuses[key].to_dict()
        elif key.group_kind in pipeline.status_writers and not pipeline.accepts(obj):
            entry["status"] = {"cpx": {"ignored": "not selected by this cpx (class or filter)"}}
        out_objects.append(entry)
    assert pipeline.snapshot is not None
    doc = {"objects": out_objects, "errors": errors, "xds": redact_secrets(pipeline.snapshot.to_json())}
    if validator is not None:
        reason = validator(pipeline.snapshot)
        doc["envoy"] = {"accepted": True} if reason is None else {"accepted": False, "message": reason}
    return doc
