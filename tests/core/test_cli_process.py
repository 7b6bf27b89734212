"""``OwnProcess.end``: the ``cpx`` process ends at once, with its exit code and all its output."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import atexit, logging, sys, threading
from cpx.cli.process import OwnProcess

atexit.register(lambda: print("exit handler ran", file=sys.stderr))
logging.basicConfig(stream=sys.stderr)
logging.getLogger("t").warning("logged")
sys.stdout.write("written, not flushed")
if sys.argv[1] == "thread":
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
    OwnProcess().end(3)
    print(" ...returned", end="")
    stop.set()
    sys.exit(4)
OwnProcess().end(3)
print("not reached")
"""


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=False)


def test_the_process_ends_with_its_code_its_output_and_its_exit_handlers() -> None:
    done = run("alone")
    assert done.returncode == 3
    assert done.stdout == "written, not flushed"
    assert "logged" in done.stderr
    assert "exit handler ran" in done.stderr


def test_with_another_thread_it_returns_for_an_ordinary_exit() -> None:
    done = run("thread")
    assert done.returncode == 4
    assert done.stdout == "written, not flushed ...returned"
    assert "exit handler ran" in done.stderr
