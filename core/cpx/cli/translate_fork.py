"""YAML output of ``cpx translate`` on both cores: a child forked after the build renders the last
resources (most of the routes) while this process renders everything else.

Rendering the xDS resources (:func:`~cpx.xds.protojson.message_json`, then YAML) is pure and is
most of what translate does after its build; the child writes its part as YAML text, which
follows this process's text: the last type (``routes``) is the last entry of ``xds``, and block
YAML lines depend on their own entry only (:func:`~cpx.cli.translate_yaml.items_text`).
"""

from __future__ import annotations

import logging
import os
import signal
import struct
import threading
from typing import Any

from cpx.cli.translate_yaml import block_text, dump, items_text
from cpx.forking import fork_worker
from cpx.xds.resource import PUSH_ORDER, SHORT_NAMES, Snapshot

log = logging.getLogger(__name__)

# Fewer resources of the last type are not worth a fork (~3 ms, and copy-on-write faults in
# both processes after it).
MIN_RESOURCES = 200
# The share of the last type's resources the child renders (10k Ingress routes: about even
# finishing times, this process also rendering the other types and every object's status).
CHILD_SHARE = 0.85
_LAST = SHORT_NAMES[PUSH_ORDER[-1]]
_INDENT = 2  # the column of the dashes of a list in ``xds``
_CANNOT = 3  # the child's exit status when its part needs libyaml (this process renders it all)
_HEADER = struct.Struct("<Q")  # the length of the child's text, before it: whether all of it came
_PIPE_SIZE = 1 << 20  # Linux's most for an unprivileged process by default


class ForkedYaml:
    """Within ``with``: give :meth:`xds_json` to :func:`cpx.offline.translation`, then
    :meth:`pieces` its document."""

    def __init__(self) -> None:
        self._child: tuple[int, int] | None = None  # the child's pid and pipe, until its text is read
        self._pid: int | None = None  # until reaped
        self._snapshot: Snapshot | None = None
        self._split = 0

    def xds_json(self, snapshot: Snapshot) -> dict[str, Any]:
        """The snapshot's JSON, the child's part left out (a child is forked now when worth it)."""
        count = len(snapshot.get(PUSH_ORDER[-1]).resources)
        # Not with another thread running (--envoy-validate's, say): it may hold a lock the child needs.
        if not hasattr(os, "fork") or count < MIN_RESOURCES or threading.active_count() > 1:
            return snapshot.to_json()
        split = count - int(count * CHILD_SHARE)

        def work(fd: int) -> int:
            _widen(fd)
            data = _rendered(snapshot, split)
            if data is None:
                return _CANNOT
            with os.fdopen(fd, "wb") as out:
                out.write(_HEADER.pack(len(data)))
                out.write(data)
            return 0

        pid, read_end = fork_worker(work, "rendering")
        self._child, self._pid, self._snapshot, self._split = (pid, read_end), pid, snapshot, split
        return snapshot.to_json(last_until=split)

    def pieces(self, doc: dict[str, Any]) -> list[str | bytes]:
        """``doc`` (from :func:`cpx.offline.translation`) as block YAML, the child's part included,
        in pieces to write one after the other (the child's as the UTF-8 it sent)."""
        if self._child is None or self._snapshot is None:
            return [dump(doc)]
        keys = list(doc)
        cut = keys.index("xds") + 1
        rest = {key: doc[key] for key in keys[cut:]}
        head = block_text({key: doc[key] for key in keys[:cut]})  # meanwhile, the child renders its part
        after = block_text(rest) if rest else ""
        tail = self._collect(*self._child)
        self._child = None
        if head is not None and after is not None and tail is not None:
            return [head, tail, after]
        # Not written without libyaml (or the child failed): the whole document here.
        doc["xds"][_LAST] += self._snapshot.last_json(self._split)
        return [dump(doc)]

    def __enter__(self) -> ForkedYaml:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.reap()

    def reap(self) -> None:
        """Wait for the child's end: after its text (its exit, freeing its copy of the heap, need
        not delay the output), or at once when its text was not asked for (an error).  Reaped,
        its CPU time counts in this process's children's (``time``, ``os.wait4``)."""
        if self._child is not None:
            pid, fd = self._child
            os.close(fd)
            os.kill(pid, signal.SIGKILL)
            self._child = None
        if self._pid is not None:
            os.waitpid(self._pid, 0)
            self._pid = None

    def _collect(self, pid: int, fd: int) -> bytes | None:
        """The child's text; None if it has none (it could not, or it failed)."""
        with os.fdopen(fd, "rb") as pipe:
            header = pipe.read(_HEADER.size)
            size = _HEADER.unpack(header)[0] if len(header) == _HEADER.size else -1
            data = pipe.read(size) if size >= 0 else b""
        if len(data) == size:
            return data
        _, status = os.waitpid(pid, 0)
        self._pid = None
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == _CANNOT):
            log.warning("the rendering child exited with status %#x; rendering its part here", status)
        return None


def _rendered(snapshot: Snapshot, split: int) -> bytes | None:
    """The child's part: each resource rendered and its JSON dropped before the next one's is
    made, so that they all use the same memory. Memory that was free at the fork is shared with
    the parent, and writing a page of it copies it first (~2.5 us): holding all of them cost the
    child ~6000 such copies at 10k Ingress routes, a tenth of its time."""
    pieces = []
    for js in snapshot.last_json(split):
        text = items_text([js], _INDENT)
        if text is None:
            return None
        pieces.append(text.encode())
    return b"".join(pieces)


def _widen(fd: int) -> None:
    """A pipe that holds the child's text in a few writes (Linux), not 64 KiB at a time."""
    try:
        import fcntl  # noqa: PLC0415 (POSIX only)

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, AttributeError, OSError):
        pass  # a smaller pipe only takes more turns
