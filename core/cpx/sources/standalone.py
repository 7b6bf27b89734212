"""Feeds manifest files to the event handler and keeps them watched (watchfiles)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from cpx.dag.dag import Note
from cpx.errors import ManifestError
from cpx.eventtypes import Event, Op
from cpx.heap import collector_paused
from cpx.objects import KubeObject, ObjectKey
from cpx.snapshot import SnapshotHandler
from cpx.sources.admission import Admission, admit, conflict_note, kept_note, malformed_note, refusal_note
from cpx.sources.manifests import DocumentError, ManifestSet, expand, is_manifest, parse_file
from cpx.sources.prefetch import prefetched

if TYPE_CHECKING:
    import asyncio  # imported where a loop runs: `cpx translate` has none

    from cpx.events import EventHandler

log = logging.getLogger("cpx.sources.manifests")
SOURCE_NAME = "manifests"


class ObjectSink(Protocol):
    """Where a loaded file's changes go: the event handler, or `cpx translate`'s pipeline."""

    def upsert(self, obj: KubeObject, source: str = "", *, admitted: bool = False) -> None: ...

    def delete(self, obj: KubeObject, source: str = "") -> None: ...

    def submit(self, event: Event) -> None: ...


# A file that has problems and changed less than this ago is read again once it settles: it may
# be caught mid-write (an editor or `cp` writing in place), and then it is not malformed.
SETTLE_SECONDS = 0.25
WATCH_STEP_MS = 2
# Files loaded between two turns of the event loop during the initial load (see run()).
YIELD_FILES = 100
# The share of the initial load's files `cpx serve` prepares itself (cpx.sources.prefetch): less
# than `cpx translate`'s, as the event handler's part of each file (queueing, applying) also runs
# here (10k HTTPProxy files: about even CPU in this process and the child).
PREFETCH_OWN_SHARE = 0.33

# A file's objects, its document errors and their admission; or why it cannot be parsed.
Prepared = tuple[list[KubeObject], list[DocumentError], Admission] | ManifestError


@attrs.define(eq=False)
class StandaloneSource:
    paths: Sequence[Path]
    pipeline: SnapshotHandler
    manifests: ManifestSet = attrs.field(factory=ManifestSet)
    # Last problems per file, so that a fixed file logs that it recovered.
    problems: dict[Path, list[str]] = attrs.field(factory=dict)
    # The documents each file has refused, by the object they name.
    refused: dict[Path, dict[ObjectKey, list[DocumentError]]] = attrs.field(factory=dict)
    # Objects kept in force although their file no longer defines them: it has refused documents.
    kept: dict[Path, set[ObjectKey]] = attrs.field(factory=dict)
    # Files that no longer parse, with the error: their last good objects are kept, and say so.
    malformed: dict[Path, str] = attrs.field(factory=dict)
    settle: float = SETTLE_SECONDS
    # Files whose problems wait for them to settle, by the (mtime, size) they had.
    _unsettled: dict[Path, tuple[int, int]] = attrs.field(factory=dict)
    _timers: dict[Path, asyncio.TimerHandle] = attrs.field(factory=dict)
    # The initial load's files, prepared (start_prefetch), until run() consumes them.
    _initial: Iterator[tuple[Path, Prepared]] | None = attrs.field(default=None)

    def prepare(self, path: Path) -> Prepared:
        """A file parsed and admitted, or why it cannot be parsed: pure, see cpx.sources.prefetch."""
        positions: list[int] = []
        try:
            objects, doc_errors = parse_file(path, positions)
        except ManifestError as err:
            return err
        return objects, doc_errors, admit(self.pipeline, path, objects, positions)

    def load_file(self, path: Path, handler: ObjectSink, prepared: Prepared | None = None) -> None:
        timer = self._timers.pop(path, None)
        if timer is not None:
            timer.cancel()
        if prepared is None:
            prepared = self.prepare(path)
        if isinstance(prepared, ManifestError):
            if not self._wait_to_settle(path, handler):
                # Keep the file's last good objects: a half-written edit must not drop routes.
                self._report(path, [str(prepared)], kept_last_good=path in self.manifests.by_file)
                self.malformed[path] = str(prepared)
                self._update_notes(self.manifests.by_file.get(path, {}), handler)
            return
        _objects, doc_errors, admission = prepared
        if (doc_errors or admission.refused or admission.unknown) and self._wait_to_settle(path, handler):
            return
        self._unsettled.pop(path, None)
        self.apply_file(path, admission, doc_errors, handler)

    def start_prefetch(self) -> None:
        """Start preparing the initial load's files on a second core (a forked child): call it
        before any thread starts (`cpx serve`'s gRPC server), since only then is a fork safe."""
        try:
            roots = [p.resolve() for p in self.paths]
            self._initial = prefetched(expand(roots), self.prepare, PREFETCH_OWN_SHARE)
        except ManifestError:
            pass  # a root is missing: run() reports it, as without prefetching

    def apply_file(
        self, path: Path, admission: Admission, doc_errors: Sequence[DocumentError], handler: ObjectSink
    ) -> None:
        """Install a file's admitted objects and report its problems.

        While a file has refused documents, the objects it defined before stay in force: a refused
        document may be one of them edited (a bad ``metadata.name`` even hides which one).
        """
        new = {ObjectKey.of(obj): obj for obj in admission.accepted}
        old = self.manifests.by_file.get(path, {})
        refused: dict[ObjectKey, list[DocumentError]] = {}
        for error in admission.refused:
            assert error.key is not None
            refused.setdefault(error.key, []).append(error)
        kept = {key for key in old if key not in new and key not in refused}
        if doc_errors or admission.refused:
            new.update((key, obj) for key, obj in old.items() if key not in new)
        else:
            kept.clear()
        refused_before = self.refused.get(path, {})
        if old or refused or refused_before:
            touched: Iterable[ObjectKey] = {*old, *new, *refused_before, *refused}
        else:
            touched = new.keys()  # a new file, all accepted (the initial load)
        self.malformed.pop(path, None)
        _set_or_drop(self.refused, path, refused)
        _set_or_drop(self.kept, path, kept)
        upserts, deletes = self.manifests.replace_keyed(path, new)
        self._report(path, self._messages(doc_errors, admission), kept_last_good=False)
        for obj in deletes:
            handler.delete(obj, SOURCE_NAME)
        for obj in upserts:
            handler.upsert(obj, SOURCE_NAME, admitted=True)
        self._update_notes(touched, handler)

    def remove_file(self, path: Path, handler: ObjectSink) -> None:
        self.problems.pop(path, None)
        self._unsettled.pop(path, None)
        self.malformed.pop(path, None)
        self.kept.pop(path, None)
        touched = {*self.manifests.by_file.get(path, {}), *self.refused.pop(path, {})}
        upserts, deletes = self.manifests.remove_file(path)
        for obj in upserts:
            handler.upsert(obj, SOURCE_NAME, admitted=True)
        for obj in deletes:
            handler.delete(obj, SOURCE_NAME)
        self._update_notes(touched, handler)

    def _messages(self, doc_errors: Sequence[DocumentError], admission: Admission) -> list[str]:
        """The file's problems in document order."""
        if not (doc_errors or admission.unknown or admission.refused):
            return []  # most files
        messages = [(e.index, str(e)) for e in (*doc_errors, *admission.unknown)]
        for error in admission.refused:
            assert error.key is not None
            kept = self.manifests.served(error.key) is not None
            outcome = "the previous version is kept" if kept else "not served"
            messages.append((error.index, f"{error} (refused; {outcome})"))
        return [message for _index, message in sorted(messages, key=lambda m: m[0])]

    def _update_notes(self, keys: Iterable[ObjectKey], handler: ObjectSink) -> None:
        """Publish refusals and conflicts as the objects' status notes; rebuild when they changed
        (status is reported after a rebuild), so that a refused new object shows at once."""
        notes = self.pipeline.source_notes
        # Nothing refused, kept or malformed anywhere (the usual case): only a conflict makes a note.
        plain = not (self.refused or self.kept or self.malformed)
        holders = self.manifests.holders
        changed = False
        for key in keys:
            if plain and key not in notes and len(holders(key)) < 2:
                continue  # no note before, none now
            before, now = notes.get(key, ()), self._notes(key)
            if before == now:
                continue
            changed = True
            if now:
                notes[key] = now
            else:
                notes.pop(key, None)
            conflict = [n for n in now if n.reason == "DuplicateObject"]
            if conflict != [n for n in before if n.reason == "DuplicateObject"]:
                if conflict:
                    log.error("%s", conflict[0].message)
                else:
                    log.info("%s: no longer defined in more than one file", key)
        if changed:
            handler.submit(Event(Op.RESYNC, None, SOURCE_NAME))

    def _notes(self, key: ObjectKey) -> tuple[Note, ...]:
        out: list[Note] = []
        errors = [e for refused in self.refused.values() for e in refused.get(key, ())]
        if errors:
            out.append(refusal_note(errors, kept=self.manifests.served(key) is not None))
        holders = self.manifests.holders(key)
        if len(holders) > 1:
            out.append(conflict_note(key, holders))
        out += (malformed_note(self.malformed[p]) for p in holders if p in self.malformed)
        out += (kept_note(p) for p in holders if key in self.kept.get(p, ()))
        return tuple(out)

    def _wait_to_settle(self, path: Path, handler: ObjectSink) -> bool:
        """Whether the file changed too recently for its problems to count; if so, it is read
        again once it settled (once per version of it: a clock skew cannot defer it forever)."""
        import asyncio  # noqa: PLC0415 (only `cpx serve` runs a loop)

        try:
            stat = path.stat()
            loop = asyncio.get_running_loop()
        except (OSError, RuntimeError):
            return False
        version = (stat.st_mtime_ns, stat.st_size)
        age = time.time() - stat.st_mtime
        if age >= self.settle or self._unsettled.get(path) == version:
            return False
        self._unsettled[path] = version
        self._timers[path] = loop.call_later(self.settle, self._settled, path, handler)
        return True

    def _settled(self, path: Path, handler: ObjectSink) -> None:
        self._timers.pop(path, None)
        if path.is_file():
            self.load_file(path, handler)
        elif path in self.manifests.by_file:
            self.remove_file(path, handler)

    def _report(self, path: Path, messages: list[str], kept_last_good: bool) -> None:
        for message in messages:
            suffix = "; keeping its last good objects" if kept_last_good else ""
            log.error("%s%s", message, suffix)
        if not messages and self.problems.get(path):
            log.info("%s: loads cleanly again", path)
        self.problems[path] = messages

    async def run(self, handler: EventHandler) -> None:
        import asyncio  # noqa: PLC0415 (only `cpx serve` runs a loop)

        # Absolute paths throughout: the watch reports them so, and a file must have one name.
        roots = [p.resolve() for p in self.paths]
        initial = self._initial
        self._initial = None
        with collector_paused():  # the initial sync: every manifest object, long-lived, acyclic
            if initial is None:
                initial = ((path, self.prepare(path)) for path in expand(roots))
            for count, (path, prepared) in enumerate(initial, 1):
                self.load_file(path, handler, prepared)
                if count % YIELD_FILES == 0:
                    # The handler applies what is queued meanwhile (it builds nothing before the
                    # sync): its share of the load then runs while the prefetching child still
                    # prepares files, rather than after the last one.
                    await asyncio.sleep(0)
        handler.synced(SOURCE_NAME)
        watched = self._watch_roots(roots)
        if not watched:
            await wait_forever()
        import watchfiles  # noqa: PLC0415 (`cpx translate` reads files without watching them)

        # watchfiles reports a batch once a step passes without new events (so 1-2 steps after a
        # write), and after at most `debounce` ms of steady events: 2 ms steps bring a change in
        # 3-4 ms rather than 25-35 ms, for well under 1% of a core while idle.
        async for changes in watchfiles.awatch(*watched, debounce=50, step=WATCH_STEP_MS, recursive=True):
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


def _set_or_drop(table: dict[Path, Any], path: Path, value: Any) -> None:
    if value:
        table[path] = value
    else:
        table.pop(path, None)


async def wait_forever() -> None:
    import asyncio  # noqa: PLC0415

    await asyncio.Event().wait()
