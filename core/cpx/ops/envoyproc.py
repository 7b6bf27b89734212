"""Run a real Envoy (``cpx run``'s demo, and the tests through :mod:`cpx.testing`), and ports on loopback.

Envoy is started with ``--disable-hot-restart`` (plus ``--use-dynamic-base-id``): hot restart
would leave a shared-memory file in /dev/shm behind every run and makes parallel Envoys compete
for base ids. The admin interface is on a Unix socket, as ``cpx bootstrap`` puts it (whatever the
given bootstrap says, it is moved to a private directory of this process); the harness speaks
HTTP over that socket, so tests keep full admin access while no TCP port exposes it.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from cpx.ops.envoybinary import envoy_binary
from cpx.xds.envoy.admin import with_admin_socket
from cpx.xds.envoy.bootstrap import bootstrap_config

# Every Envoy we started and have not reaped; killed at interpreter exit whatever happened.
_RUNNING: set[subprocess.Popen[bytes]] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (for listeners Envoy must bind itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    """Wait until something accepts TCP connections on ``host:port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            time.sleep(0.05)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    _RUNNING.discard(proc)


@atexit.register
def _kill_all() -> None:
    for proc in list(_RUNNING):
        _kill(proc)


def _die_with_parent_prefix() -> list[str]:
    # Ask Linux to SIGKILL Envoy if the test process dies without running atexit (e.g. SIGKILL).
    # util-linux's setpriv sets the flag and execs Envoy (same pid); no preexec_fn, which is not
    # safe in a process with threads. The signal follows the forking *thread*, hence main only.
    setpriv = shutil.which("setpriv")
    if setpriv and sys.platform == "linux" and threading.current_thread() is threading.main_thread():
        return [setpriv, "--pdeathsig", "KILL", "--"]
    return []


class EnvoyError(RuntimeError):
    """Envoy failed to start or exited; the message ends with the tail of its log."""


class EnvoyProcess:
    """A real Envoy running a given bootstrap (see :func:`cpx.xds.envoy.bootstrap.bootstrap_config`).

    ``with EnvoyProcess(config) as envoy:`` starts it and waits until the admin interface
    answers; leaving the block stops it. The log goes to ``<workdir>/envoy.log``.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        workdir: str | os.PathLike[str] | None = None,
        log_level: str = "warn",
        concurrency: int = 1,
        extra_args: Sequence[str] = (),
        start_timeout: float = 20.0,
    ) -> None:
        self.config = config
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="cpx-envoy-"))
        if self._own_workdir:
            weakref.finalize(self, shutil.rmtree, self.workdir, True)
        self.log_path = self.workdir / "envoy.log"
        self.log_level = log_level
        self.concurrency = concurrency
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        # A short private path: Unix socket paths are limited to 107 bytes, test workdirs are long.
        self._socket_dir = Path(tempfile.mkdtemp(prefix="cpx-admin-"))
        weakref.finalize(self, shutil.rmtree, self._socket_dir, True)
        self.admin_socket = str(self._socket_dir / "admin.sock")
        self._admin: str | None = None
        self._log_tail = ""

    @classmethod
    def with_xds(
        cls,
        xds_port: int,
        *,
        xds_address: str = "127.0.0.1",
        workdir: str | os.PathLike[str] | None = None,
        log_level: str = "warn",
        **bootstrap: Any,
    ) -> EnvoyProcess:
        """An (unstarted) Envoy whose bootstrap points at a cpx xDS server on ``xds_port``.

        ``bootstrap`` goes to :func:`cpx.xds.envoy.bootstrap.bootstrap_config` (e.g. the xDS TLS files).
        """
        config = bootstrap_config(xds_address=xds_address, xds_port=xds_port, **bootstrap)
        return cls(config, workdir=workdir, log_level=log_level)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> EnvoyProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        bootstrap = self.workdir / "bootstrap.json"
        bootstrap.write_text(json.dumps(with_admin_socket(self.config, self.admin_socket), indent=2))
        self._socket_dir.mkdir(parents=True, exist_ok=True)
        Path(self.admin_socket).unlink(missing_ok=True)
        args = [
            *_die_with_parent_prefix(),
            envoy_binary(),
            "-c",
            str(bootstrap),
            "--disable-hot-restart",
            "--use-dynamic-base-id",
            "--log-level",
            self.log_level,
            "--concurrency",
            str(self.concurrency),
            # Listener removal drains for 600 s by default; tests want removals to take effect.
            "--drain-time-s",
            "1",
            *self.extra_args,
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        _RUNNING.add(self.proc)
        weakref.finalize(self, _kill, self.proc)
        try:
            self._admin = self._wait_admin(self.admin_socket)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_admin(self, socket_path: str) -> str:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            self._check_running()
            if os.path.exists(socket_path):
                with contextlib.suppress(OSError):
                    if _get(socket_path, "/server_info", 1.0)[0] == 200:
                        return socket_path
            time.sleep(0.05)
        raise EnvoyError(
            f"Envoy admin did not answer within {self.start_timeout}s\n{self.log_text()[-3000:]}"
        )

    def _check_running(self) -> None:
        if self.proc is None:
            raise EnvoyError("Envoy was not started")
        code = self.proc.poll()
        if code is not None:
            raise EnvoyError(f"Envoy exited with status {code}\n{self.log_text()[-3000:]}")

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit status."""
        proc, self.proc = self.proc, None
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            _RUNNING.discard(proc)
            code = proc.returncode
        if self._own_workdir and self.workdir.exists():
            self._log_tail = self.log_text()[-20000:]
            shutil.rmtree(self.workdir, ignore_errors=True)
        Path(self.admin_socket).unlink(missing_ok=True)
        return code

    def __enter__(self) -> EnvoyProcess:
        return self.start() if self.proc is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        """Envoy's log so far (after :meth:`stop` of a temporary workdir: its last 20 kB)."""
        if self.log_path.exists():
            return self.log_path.read_text(errors="replace")
        return self._log_tail

    # -- admin interface ---------------------------------------------------------------------

    @property
    def admin_address(self) -> str:
        """The path of the admin interface's Unix socket (there is no admin TCP port)."""
        if self._admin is None:
            raise EnvoyError("Envoy is not running")
        return self._admin

    def listening_ports(self) -> set[tuple[str, int]]:
        """Every TCP (address, port) this Envoy listens on (Linux: read from /proc)."""
        if self.proc is None:
            raise EnvoyError("Envoy is not running")
        return listening_tcp_ports(self.proc.pid)

    def admin_get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET an admin path, e.g. ``/ready``; returns (status, body)."""
        return _get(self.admin_address, path, timeout)

    def admin_post(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """POST to an admin path, e.g. ``/runtime_modify?key=value`` or ``/healthcheck/fail``."""
        return _get(self.admin_address, path, timeout, method="POST")

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until ``/ready`` says LIVE (initial xDS fetches done or timed out).

        While Envoy creates thousands of clusters its main thread, which also serves the admin
        interface, can be busy for many seconds: a slow answer is retried until ``timeout``.
        """
        deadline = time.monotonic() + timeout
        body = ""
        while time.monotonic() < deadline:
            self._check_running()
            try:
                status, body = self.admin_get("/ready", timeout=max(1.0, deadline - time.monotonic()))
            except OSError as err:  # includes TimeoutError: the admin thread did not answer in time
                status, body = 0, f"admin interface: {err}"
            if status == 200:
                return
            time.sleep(0.05)
        raise TimeoutError(f"Envoy not ready after {timeout}s: {body.strip()}")

    def config_dump(self, resource: str | None = None, *, include_eds: bool = False) -> dict[str, Any]:
        """``/config_dump`` as JSON; ``resource`` selects e.g. ``dynamic_active_clusters``."""
        query = [f"resource={resource}"] if resource else []
        if include_eds:
            query.append("include_eds")
        status, body = self.admin_get("/config_dump" + ("?" + "&".join(query) if query else ""))
        if status != 200:
            raise EnvoyError(f"/config_dump answered {status}: {body[:500]}")
        dump: dict[str, Any] = json.loads(body)
        return dump

    def stats(self, filter_regex: str | None = None) -> dict[str, int]:
        """Counters and gauges from ``/stats`` (histograms are left out)."""
        from urllib.parse import quote  # noqa: PLC0415

        path = "/stats" + (f"?filter={quote(filter_regex)}" if filter_regex else "")
        status, body = self.admin_get(path)
        if status != 200:
            raise EnvoyError(f"/stats answered {status}: {body[:500]}")
        out: dict[str, int] = {}
        for line in body.splitlines():
            name, sep, value = line.rpartition(": ")
            if sep and value.lstrip("-").isdigit():
                out[name] = int(value)
        return out

    def wait_stat(
        self, name: str, predicate: Callable[[int], bool] = lambda v: v > 0, timeout: float = 10.0
    ) -> int:
        """Wait until stat ``name`` exists and satisfies ``predicate``; returns its value."""
        deadline = time.monotonic() + timeout
        value: int | None = None
        while True:
            self._check_running()
            value = self.stats().get(name)
            if value is not None and predicate(value):
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"stat {name} is {value} after {timeout}s")
            time.sleep(0.05)


def listening_tcp_ports(pid: int) -> set[tuple[str, int]]:
    """The TCP sockets in LISTEN state that process ``pid`` holds, as (address, port)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    address, port = fields[1].split(":")
                    found.add((_proc_address(address, family), int(port, 16)))
    return found


def _proc_address(hex_address: str, family: int) -> str:
    # /proc/net prints each 32-bit word of the address in host (little-endian) order.
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(family, words)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a Unix socket (the standard library only dials TCP)."""

    def __init__(self, socket_path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _get(socket_path: str, path: str, timeout: float, method: str = "GET") -> tuple[int, str]:
    conn = _UnixHTTPConnection(socket_path, timeout)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        conn.close()
