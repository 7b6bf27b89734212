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
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from cpx.forking import fork_worker

log = logging.getLogger(__name__)

T = TypeVar("T")

# Fewer files are not worth a fork (a few ms) unless they are big: below both, everything runs in
# this process.
MIN_FILES = 200
MIN_BYTES = 1 << 20
# Files per pickle, and fewer once they hold this many bytes: pickle keeps shared objects shared
# within one dump, and a file's results are never split between dumps.  The last pickle is
# unpickled and installed after the child ends: small ones keep that tail short (50 or 200 files
# per pickle cost the same to pickle and unpickle).
CHUNK_FILES = 50
CHUNK_BYTES = 1 << 20
# The share of the files prepared here by default: this process also installs all of them, the
# child only prepares its share (`cpx translate` of 1000 Ingresses of 10 paths: about even CPU
# after the fork, the child's a few ms less, the time this process takes to install its last
# pickle; at 0.43 this process spent ~8 ms more than that).
OWN_SHARE = 0.41
# How often this process empties the pipe while it prepares its own share.
DRAIN_SECONDS = 0.002
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
    if not hasattr(os, "fork"):
        return ((path, prepare(path)) for path in paths)
    sizes: list[int] | None = None  # known only for a few files: many are small ones
    if len(paths) >= MIN_FILES:
        split = int(len(paths) * own_share)
    else:  # a few files: worth it if they are big, and shared by size (a few big ones, many small)
        sizes = list(map(_size, paths))
        if sum(sizes) < MIN_BYTES or len(paths) < 2:
            return ((path, prepare(path)) for path in paths)
        split = _split_by_size(sizes, own_share)

    def work(fd: int) -> int:
        _prepare_into(paths[split:], sizes[split:] if sizes is not None else None, prepare, fd)
        return 0

    pid, read_end = fork_worker(work, "prefetching")
    return _collect(paths, split, prepare, pid, read_end)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # prepare() reports it


def _split_by_size(sizes: Sequence[int], own_share: float) -> int:
    """How many of the first files hold about ``own_share`` of the bytes (at least one each side)."""
    wanted, total = own_share * sum(sizes), 0
    for index, size in enumerate(sizes):
        if total + size / 2 > wanted:
            return min(max(index, 1), len(sizes) - 1)
        total += size
    return len(sizes) - 1


def _prepare_into(
    paths: Sequence[Path], sizes: Sequence[int] | None, prepare: Callable[[Path], Any], fd: int
) -> None:
    gc.disable()  # as in the parent's load: long-lived, acyclic objects
    with os.fdopen(fd, "wb") as out:
        chunk: list[Any] = []
        size = 0
        last = len(paths) - 1
        for index, path in enumerate(paths):
            chunk.append(prepare(path))
            size += sizes[index] if sizes is not None else 0
            if len(chunk) >= CHUNK_FILES or size >= CHUNK_BYTES or index == last:
                data = pickle.dumps(chunk, protocol=5)
                out.write(_HEADER.pack(len(data)))
                out.write(data)
                chunk, size = [], 0


def _collect(
    paths: Sequence[Path], split: int, prepare: Callable[[Path], T], pid: int, fd: int
) -> Generator[tuple[Path, T], None, None]:
    reader = _ChunkReader(fd)
    finished = False
    try:
        next_drain = 0.0
        for path in paths[:split]:
            yield path, prepare(path)
            # The child blocks once the pipe is full (64 KB: ~25 ms of its output at 10k routes):
            # keep it going, but not with a read (and its BlockingIOError) after every file.
            if time.monotonic() >= next_drain:
                reader.drain()
                next_drain = time.monotonic() + DRAIN_SECONDS
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
