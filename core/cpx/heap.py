"""The cyclic garbage collector around bulk work that makes no cycles."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection meanwhile, and none over what was made meanwhile.

    Loading manifests, translating and printing build many long-lived containers and almost no
    cycles: each full collection the allocations trigger walks every object the process holds, so
    at 10k routes the passes over the growing heap cost a sixth of `cpx serve`'s start (and a third
    of `cpx translate`'s parsing, rendering and dumping) and found nothing.  Re-enabled as it was,
    the collector would then walk all of it at the next allocation: what is alive at the end is
    moved to the permanent generation first (``gc.freeze``), as `cpx serve` does after its first
    build; it is acyclic, so reference counting frees it when it is replaced.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.freeze()
            gc.enable()


def return_free_memory() -> None:
    """Hand the C allocator's free pages back to the system (glibc's ``malloc_trim``).

    The start-up frees many temporaries (YAML nodes, per-file lists, the first responses) among
    objects that stay; glibc keeps the pages of those holes, a few MB of RSS at 10k routes.  A
    no-op where the C library has no ``malloc_trim`` (musl, macOS).
    """
    import ctypes  # noqa: PLC0415 (only `cpx serve` calls this: `cpx translate` spares the import)

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)
