"""A forked child that works for this process on the second core, then ends without ever
returning into this process's code (the initial load's prefetch, translate's rendering)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

log = logging.getLogger(__name__)


def fork_worker(work: Callable[[int], int], name: str) -> tuple[int, int]:
    """Fork a child that runs ``work(fd)`` with the write end of a pipe and exits with the status
    ``work`` returns (1 when it raises; a parent that stopped reading is not logged: it is
    stopping too).  Returns the child's pid and the pipe's read end.  Fork before any thread
    starts: a lock another thread holds would stay held in the child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: end quietly, the parent stops anyway
            os.close(read_end)
            status = work(write_end)
        except BrokenPipeError:
            pass
        except BaseException:
            log.exception("the %s child failed", name)
        finally:
            os._exit(status)
    os.close(write_end)
    return pid, read_end
