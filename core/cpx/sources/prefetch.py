"""The initial load on both cores: a forked child parses and admits the later files meanwhile.

Parsing and admitting a file is pure (no state but the read-only watch specs), and it is most of
the initial load's CPU; installing the results is not, and stays in this process, in path order.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import signal
import struct
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# Fewer files are not worth a fork (a few ms); below this, everything runs in this process.
MIN_FILES = 200
# Files per pickle: pickle keeps shared objects shared within one dump, and a file's results are
# never split between dumps.
CHUNK_FILES = 200
# The share of the files prepared here by default: this process also installs all of them, the
# child only prepares its share (`cpx translate`, 10k HTTPProxy files or 1000 Ingresses of 10
# paths: about even finishing times).
OWN_SHARE = 0.40
_HEADER = struct.Struct("<Q")


def prefetched(
    paths: Sequence[Path], prepare: Callable[[Path], T], own_share: float = OWN_SHARE
) -> Generator[tuple[Path, T], None, None]:
    """``(path, prepare(path))`` for every path, in order; the later part prepared by a child
    forked now (where the OS can fork): call this before starting any thread.  ``own_share``:
    the share of the paths prepared here, the less the more installing each one costs.

    If the child fails, what it did not deliver is prepared here (with a warning).
    """
    paths = list(paths)
    if len(paths) < MIN_FILES or not hasattr(os, "fork"):
        return ((path, prepare(path)) for path in paths)
    split = int(len(paths) * own_share)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's code
        status = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: end quietly, the parent stops anyway
            os.close(read_end)
            _prepare_into(paths[split:], prepare, write_end)
            status = 0
        except BrokenPipeError:
            pass  # the parent stopped reading: it is stopping too
        except BaseException:
            log.exception("the prefetching child failed")
        finally:
            os._exit(status)
    os.close(write_end)
    return _collect(paths, split, prepare, pid, read_end)


def _prepare_into(paths: Sequence[Path], prepare: Callable[[Path], Any], fd: int) -> None:
    gc.disable()  # as in the parent's load: long-lived, acyclic objects
    with os.fdopen(fd, "wb") as out:
        for start in range(0, len(paths), CHUNK_FILES):
            data = pickle.dumps([prepare(p) for p in paths[start : start + CHUNK_FILES]], protocol=5)
            out.write(_HEADER.pack(len(data)))
            out.write(data)


def _collect(
    paths: Sequence[Path], split: int, prepare: Callable[[Path], T], pid: int, fd: int
) -> Generator[tuple[Path, T], None, None]:
    reader = _ChunkReader(fd)
    finished = False
    try:
        for path in paths[:split]:
            yield path, prepare(path)
            reader.drain()  # the child blocks once the pipe is full: keep it going
        done = split
        try:
            for chunk in reader.chunks():
                results: list[T] = pickle.loads(chunk)  # our own child's output
                yield from zip(paths[done : done + len(results)], results, strict=True)
                done += len(results)
        except Exception:  # any failure of the child: do its work here
            log.warning("the prefetching child failed; preparing its files here", exc_info=True)
        if done < len(paths):
            log.warning("the prefetching child delivered %d of %d files", done - split, len(paths) - split)
        for path in paths[done:]:
            yield path, prepare(path)
        finished = True
    finally:
        os.close(fd)
        if not finished:  # the caller stopped early (e.g. on an unreadable file): so does the child
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if status and finished:
            log.warning("the prefetching child exited with status %#x", status)


class _ChunkReader:
    """Length-prefixed chunks from the child's pipe; read ahead without blocking meanwhile."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.eof = False
        os.set_blocking(fd, False)

    def drain(self) -> None:
        while not self.eof:
            try:
                data = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                return
            self._add(data)

    def chunks(self) -> Iterator[bytes]:
        os.set_blocking(self.fd, True)
        while self._fill(_HEADER.size):
            (size,) = _HEADER.unpack_from(self.buffer)
            end = _HEADER.size + size
            if not self._fill(end):
                raise EOFError("the child's output ends mid-chunk")
            yield bytes(self.buffer[_HEADER.size : end])
            del self.buffer[:end]
        if self.buffer:
            raise EOFError("the child's output ends mid-chunk")

    def _fill(self, size: int) -> bool:
        while len(self.buffer) < size and not self.eof:
            self._add(os.read(self.fd, 1 << 20))
        return len(self.buffer) >= size

    def _add(self, data: bytes) -> None:
        if data:
            self.buffer += data
        else:
            self.eof = True
