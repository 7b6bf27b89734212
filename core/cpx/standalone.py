"""Feeds manifest files to the event handler and keeps them watched (watchfiles)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
import watchfiles

from cpx.errors import ManifestError
from cpx.events import EventHandler
from cpx.manifests import DocumentError, ManifestSet, default_namespace, expand, is_manifest, parse_file
from cpx.objects import KubeObject
from cpx.pipeline import Pipeline, UnknownKindError

log = logging.getLogger("cpx.manifests")
SOURCE_NAME = "manifests"


def prepare(
    pipeline: Pipeline, path: Path, objects: Iterable[KubeObject], positions: Sequence[int] | None = None
) -> tuple[list[KubeObject], list[DocumentError]]:
    """Default namespaces and drop documents of kinds no enabled plugin handles (reported).

    ``positions`` are the objects' document indexes (from :func:`parse_file`), for the errors.
    """
    kept: list[KubeObject] = []
    errors: list[DocumentError] = []
    for i, obj in enumerate(objects):
        try:
            spec = pipeline.watch_for(obj)
        except UnknownKindError as err:
            index = positions[i] if positions is not None else i
            errors.append(DocumentError(path, index, f"{obj['kind']} {obj['metadata'].get('name')}: {err}"))
            continue
        # A file's resourceVersion (e.g. from `kubectl get -o yaml`) means nothing here: an edit that
        # keeps it must still apply, so objects are compared by content.
        obj["metadata"].pop("resourceVersion", None)
        kept.append(default_namespace(obj, spec.gvk.namespaced))
    return kept, errors


@attrs.define(eq=False)
class StandaloneSource:
    paths: Sequence[Path]
    pipeline: Pipeline
    manifests: ManifestSet = attrs.field(factory=ManifestSet)
    # Last problems per file, so that a fixed file logs that it recovered.
    problems: dict[Path, list[str]] = attrs.field(factory=dict)

    def load_file(self, path: Path, handler: EventHandler) -> None:
        positions: list[int] = []
        try:
            objects, doc_errors = parse_file(path, positions)
        except ManifestError as err:
            # Keep the file's last good objects: a half-written edit must not drop routes.
            self._report(path, [str(err)], kept_last_good=path in self.manifests.by_file)
            return
        objects, kind_errors = prepare(self.pipeline, path, objects, positions)
        self._report(path, [str(e) for e in (*doc_errors, *kind_errors)], kept_last_good=False)
        upserts, deletes = self.manifests.replace_file(path, objects)
        for obj in deletes:
            handler.delete(obj, SOURCE_NAME)
        for obj in upserts:
            handler.upsert(obj, SOURCE_NAME)

    def remove_file(self, path: Path, handler: EventHandler) -> None:
        self.problems.pop(path, None)
        upserts, deletes = self.manifests.remove_file(path)
        for obj in upserts:
            handler.upsert(obj, SOURCE_NAME)
        for obj in deletes:
            handler.delete(obj, SOURCE_NAME)

    def _report(self, path: Path, messages: list[str], kept_last_good: bool) -> None:
        for message in messages:
            suffix = "; keeping its last good objects" if kept_last_good else ""
            log.error("%s%s", message, suffix)
        if not messages and self.problems.get(path):
            log.info("%s: loads cleanly again", path)
        self.problems[path] = messages

    async def run(self, handler: EventHandler) -> None:
        # Absolute paths throughout: the watch reports them so, and a file must have one name.
        roots = [p.resolve() for p in self.paths]
        for path in expand(roots):
            self.load_file(path, handler)
        handler.synced(SOURCE_NAME)
        watched = self._watch_roots(roots)
        if not watched:
            await wait_forever()
        async for changes in watchfiles.awatch(*watched, debounce=50, step=20, recursive=True):
            for path in sorted({Path(p) for _change, p in changes}):
                self.path_changed(path, roots, handler)

    def path_changed(self, path: Path, roots: Sequence[Path], handler: EventHandler) -> None:
        if path.is_file():
            if self._wanted(path, roots):
                self.load_file(path, handler)
        elif path.is_dir():
            # A folder moved in or renamed: its files get no events of their own.
            for file in expand([path]):
                if self._wanted(file, roots):
                    self.load_file(file, handler)
        elif self._wanted(path, roots):
            self.remove_file(path, handler)
        else:
            # Perhaps a folder moved away or renamed: again no events for the files it held.
            prefix = f"{path}{os.sep}"
            for file in [f for f in self.manifests.by_file if str(f).startswith(prefix)]:
                self.remove_file(file, handler)

    @staticmethod
    def _watch_roots(roots: Sequence[Path]) -> list[Path]:
        # Watch a file's folder, not the file: an atomic rename replaces the inode we'd watch.
        return sorted({p if p.is_dir() else p.parent for p in roots})

    @staticmethod
    def _wanted(path: Path, roots: Sequence[Path]) -> bool:
        for root in roots:
            if root.is_dir() and is_manifest(path):
                try:
                    rel = path.relative_to(root)
                except ValueError:
                    continue
                if not any(part.startswith(".") for part in rel.parts):
                    return True
            elif path == root:
                return True
        return False


async def wait_forever() -> None:
    await asyncio.Event().wait()
