"""Run ``cpx serve`` as a subprocess for end-to-end tests, and write manifests for it.

:class:`CpxProcess` starts ``python -m cpx serve`` on loopback with free ports, waits for
``/readyz``, reads ``/metrics`` and stops it with SIGTERM (asserting a clean exit in time). Like
:class:`~cpx.testing.envoy.EnvoyProcess` it never outlives the test process (atexit and a
parent-death signal). :func:`write_manifest` replaces a manifest file atomically (a temporary
dotfile, which cpx ignores, then ``os.replace``), and the builders return the plain dicts of the
Kubernetes objects a test needs: Services and EndpointSlices (a plugin's kinds: its own ``testing``).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from prometheus_client.parser import text_string_to_metric_families

from cpx.ops.envoyproc import _RUNNING, _die_with_parent_prefix, _kill, free_port

if TYPE_CHECKING:
    from cpx.ops.envoyproc import EnvoyProcess

PathLike = str | os.PathLike[str]


T = TypeVar("T")


class CpxProcessError(RuntimeError):
    """cpx failed to start, exited, or did not stop in time; the message ends with its log tail."""


def _metric_key(name: str, labels: Mapping[str, str]) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


class CpxProcess:
    """``cpx serve --manifests ...`` in a subprocess, every port on 127.0.0.1.

    Ports left as None are picked with :func:`free_port`; they stay fixed for the object's life,
    so :meth:`clone` gives an unstarted twin that serves on the same ports (a cpx restart). The
    log (stderr and stdout) goes to ``<workdir>/<name>.log`` and is appended to across restarts.
    """

    def __init__(  # noqa: PLR0913  (why: one keyword per `cpx serve` option under test)
        self,
        manifests: PathLike | Sequence[PathLike],
        workdir: PathLike,
        *,
        name: str = "cpx",
        xds_port: int | None = None,
        http_port: int | None = None,
        https_port: int | None = None,
        health_port: int | None = None,
        debug_port: int | None = None,
        status_file: PathLike | None = None,
        xds_cafile: PathLike | None = None,
        xds_cert_file: PathLike | None = None,
        xds_key_file: PathLike | None = None,
        plugins: Sequence[str] | None = None,
        log_level: str = "info",
        extra_args: Sequence[str] = (),
        start_timeout: float = 20.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        items = [manifests] if isinstance(manifests, str | os.PathLike) else list(manifests)
        self.manifests = [Path(p) for p in items]
        self.workdir = Path(workdir)
        self.name = name
        self.xds_port = xds_port or free_port()
        self.http_port = http_port or free_port()
        self.https_port = https_port or free_port()
        self.health_port = health_port or free_port()
        self.debug_port = debug_port or free_port()
        self.status_file = Path(status_file) if status_file is not None else None
        self.xds_tls = (xds_cafile, xds_cert_file, xds_key_file)
        self.plugins = list(plugins) if plugins is not None else None
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self.env = dict(env or {})  # added to the inherited environment
        self.log_path = self.workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def clone(self) -> CpxProcess:
        """An unstarted CpxProcess with the same manifests, ports, files and options."""
        cafile, cert, key = self.xds_tls
        return CpxProcess(
            self.manifests,
            workdir=self.workdir,
            name=self.name,
            xds_port=self.xds_port,
            http_port=self.http_port,
            https_port=self.https_port,
            health_port=self.health_port,
            debug_port=self.debug_port,
            status_file=self.status_file,
            xds_cafile=cafile,
            xds_cert_file=cert,
            xds_key_file=key,
            plugins=self.plugins,
            log_level=self.log_level,
            extra_args=self.extra_args,
            start_timeout=self.start_timeout,
            env=self.env,
        )

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "cpx", "--log-level", self.log_level, "serve"]
        for path in self.manifests:
            args += ["--manifests", str(path)]
        args += [
            "--xds-address", "127.0.0.1",
            "--xds-port", str(self.xds_port),
            "--envoy-service-http-address", "127.0.0.1",
            "--envoy-service-http-port", str(self.http_port),
            "--envoy-service-https-address", "127.0.0.1",
            "--envoy-service-https-port", str(self.https_port),
            "--http-address", "127.0.0.1",
            "--http-port", str(self.health_port),
            "--debug-http-address", "127.0.0.1",
            "--debug-http-port", str(self.debug_port),
        ]  # fmt: skip
        if self.status_file is not None:
            args += ["--status-file", str(self.status_file)]
        cafile, cert, key = self.xds_tls
        for flag, value in (("--xds-cafile", cafile), ("--xds-cert-file", cert), ("--xds-key-file", key)):
            if value is not None:
                args += [flag, str(value)]
        if self.plugins is not None:
            args += ["--plugins", ",".join(self.plugins)]
        return [*args, *self.extra_args]

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, wait: bool = True) -> CpxProcess:
        """Start cpx; with ``wait`` (default) return once ``/readyz`` answers 200."""
        if self.proc is not None:
            raise CpxProcessError("cpx is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        with self.log_path.open("ab") as log:
            log.write(f"--- {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [*_die_with_parent_prefix(), *self.command()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        _RUNNING.add(self.proc)
        weakref.finalize(self, _kill, self.proc)
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self.kill()
                raise
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until ``/readyz`` answers 200 (initial sync done and the first DAG built)."""
        limit = timeout if timeout is not None else self.start_timeout
        deadline = time.monotonic() + limit
        while True:
            self._check_running()
            with contextlib.suppress(OSError):
                if self.get("/readyz", timeout=1.0)[0] == 200:
                    return
            if time.monotonic() > deadline:
                raise CpxProcessError(f"cpx not ready after {limit}s\n{self.log_text()[-3000:]}")
            time.sleep(0.05)

    def _check_running(self) -> None:
        if self.proc is None:
            raise CpxProcessError("cpx was not started")
        code = self.proc.poll()
        if code is not None:
            raise CpxProcessError(f"cpx exited with status {code}\n{self.log_text()[-3000:]}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM and wait; raises CpxProcessError (after SIGKILL) unless cpx exits within ``timeout``.

        Returns the exit status (0 for a clean shutdown).
        """
        proc, self.proc = self.proc, None
        if proc is None:
            raise CpxProcessError("cpx was not started")
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    _kill(proc)
                    raise CpxProcessError(
                        f"cpx did not exit within {timeout}s of SIGTERM\n{self.log_text()[-3000:]}"
                    ) from None
        finally:
            _RUNNING.discard(proc)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL, for teardown after a failure (no assertion about the shutdown)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _kill(proc)

    def __enter__(self) -> CpxProcess:
        return self.start() if self.proc is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None and self.running:
            self.stop()
        else:
            self.kill()

    # -- observing ---------------------------------------------------------------------------

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_log(self, text: str, timeout: float = 5.0, *, start: int = 0) -> str:
        """Wait until the log (from character ``start`` on) contains ``text``; returns that line."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log_text()
            found = log.find(text, start)
            if found >= 0:
                begin = log.rfind("\n", 0, found) + 1
                end = log.find("\n", found)
                return log[begin : end if end >= 0 else len(log)]
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not in cpx's log after {timeout}s\n{log[start:][-3000:]}")
            time.sleep(0.02)

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET a path of the health/metrics server; returns (status, body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.health_port, timeout=timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()

    def metrics(self) -> dict[str, float]:
        """Every sample of ``/metrics``: ``name`` or ``name{label="value",...}`` (sorted labels)."""
        status, body = self.get("/metrics")
        if status != 200:
            raise CpxProcessError(f"/metrics answered {status}: {body[:500]}")
        return {
            _metric_key(sample.name, sample.labels): float(sample.value)
            for family in text_string_to_metric_families(body)
            for sample in family.samples
        }

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples called ``name`` whose labels include ``labels`` (0 if none)."""
        status, body = self.get("/metrics")
        if status != 200:
            raise CpxProcessError(f"/metrics answered {status}: {body[:500]}")
        return sum(
            float(sample.value)
            for family in text_string_to_metric_families(body)
            for sample in family.samples
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
        )


# -- manifests -------------------------------------------------------------------------------


def write_manifest(directory: PathLike, name: str, docs: Iterable[Mapping[str, Any]] | str) -> Path:
    """Atomically (re)write ``directory/name`` with the YAML documents ``docs`` (or raw text).

    The content goes to a temporary dotfile first, which cpx never reads, then replaces the file
    with ``os.replace``: cpx sees either the old or the new file, never half of one.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    text = docs if isinstance(docs, str) else yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, folder / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return folder / name


def service(
    name: str,
    *,
    namespace: str = "default",
    port: int = 80,
    target_port: int | str = "http",
    port_name: str = "http",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ClusterIP Service with one TCP port."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": {"app": name},
            "ports": [{"name": port_name, "port": port, "targetPort": target_port, "protocol": "TCP"}],
        },
    }


def endpoint_slice(
    service_name: str,
    port: int,
    *,
    addresses: Sequence[str] = ("127.0.0.1",),
    namespace: str = "default",
    name: str | None = None,
    port_name: str = "http",
) -> dict[str, Any]:
    """The EndpointSlice Kubernetes would write for ``service_name``: ready ``addresses`` on ``port``."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name or f"{service_name}-1",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}} for address in addresses],
    }


def backend(name: str, port: int, *, namespace: str = "default") -> list[dict[str, Any]]:
    """A Service (port 80) plus its EndpointSlice pointing at ``127.0.0.1:port``."""
    return [service(name, namespace=namespace), endpoint_slice(name, port, namespace=namespace)]


@contextlib.contextmanager
def cpx_with_envoy(
    manifests: PathLike,
    workdir: PathLike,
    *,
    plugins: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    **envoy_bootstrap: Any,
) -> Iterator[tuple[CpxProcess, EnvoyProcess]]:
    """``cpx serve`` on ``manifests`` plus a real Envoy bootstrapped to it, both started.

    On exit Envoy stops, then cpx gets SIGTERM (raising unless it exits promptly) and is killed.
    The caller waits for Envoy to be ready once its manifests are in place.
    """
    from cpx.ops.envoyproc import EnvoyProcess  # noqa: PLC0415 (keep the module import cheap)

    cpx = CpxProcess(manifests, workdir=workdir, plugins=plugins, env=env, extra_args=extra_args)
    envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=Path(workdir) / "envoy", **envoy_bootstrap)
    try:
        cpx.start()
        envoy.start()
        yield cpx, envoy
    finally:
        envoy.stop()
        try:
            if cpx.running:
                cpx.stop()
        finally:
            cpx.kill()


def eventually(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.05) -> T:
    """Call ``check`` until it returns without raising AssertionError or OSError; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, OSError):
            if time.monotonic() > deadline:
                raise
        time.sleep(interval)
