"""The tenant-safety check every "hostile input" regression test makes (issue: tenant-safe translation).

A :class:`TenantStack` is ``cpx serve`` on a manifests folder (with ``--status-file``) in front of a
real Envoy and one echo backend.  :meth:`TenantStack.check_bad_input` is the whole contract for one
bad input, as a tenant would write it while cpx serves:

1. a control host, served before the bad input, keeps being served;
2. the bad input is applied; cpx keeps running;
3. the bad object's status (status file) names the problem;
4. a new, valid object added afterwards is served (the stack's ``valid_object``: a kind of the
   plugin under test, e.g. ``cpx_httpproxy.testing.valid_httpproxy``);
5. no Envoy ``*.update_rejected`` counter moved.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from cpx.ops import certgen
from cpx.testing.backends import EchoServer
from cpx.testing.cpxproc import CpxProcess, backend, write_manifest
from cpx.testing.envoy import EnvoyProcess
from cpx.testing.tls import http_get

BACKEND = "tenant-echo"  # the Service (namespace default, port 80) every stack serves


def wait_until(check: Callable[[], bool], timeout: float = 5.0, what: str = "") -> float:
    """Poll ``check`` until true; returns the seconds it took, or raises AssertionError."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.02)
    return time.monotonic() - started


def rejected_updates(envoy: EnvoyProcess) -> int:
    """Every ``*.update_rejected`` counter of Envoy, summed (LDS, CDS, RDS, EDS, SDS)."""
    return sum(v for k, v in envoy.stats(r"update_rejected$").items() if k.endswith(".update_rejected"))


# A valid object of the kind under test: (name, host, backend Service) -> the object, serving every
# path of host from port 80 of that Service.
ValidObject = Callable[..., Mapping[str, Any]]


@attrs.define(eq=False)
class TenantStack:
    cpx: CpxProcess
    envoy: EnvoyProcess
    manifests: Path
    status_file: Path
    echo: EchoServer
    valid_object: ValidObject
    _serial: Iterator[int] = attrs.field(factory=itertools.count)

    # -- manifests ---------------------------------------------------------------------------
    def apply(self, name: str, docs: Sequence[Mapping[str, Any]] | str) -> Path:
        return write_manifest(self.manifests, name, docs)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.manifests / name).unlink()

    # -- traffic -----------------------------------------------------------------------------
    def get(self, host: str, path: str = "/") -> int:
        """The status of a request through Envoy's HTTP listener (0 when the connection fails)."""
        try:
            return http_get(
                f"http://127.0.0.1:{self.cpx.http_port}{path}", host_header=host, timeout=2.0
            ).status
        except OSError:
            return 0

    def wait_served(self, host: str, path: str = "/", status: int = 200, timeout: float = 5.0) -> None:
        wait_until(lambda: self.get(host, path) == status, timeout, f"{host}{path} -> {status}")

    def add_valid(self, prefix: str = "later") -> str:
        """A new valid object with a host of its own; returns the host once Envoy serves it."""
        n = next(self._serial)
        host = f"{prefix}-{n}.tenant.test"
        self.apply(f"{prefix}-{n}.yaml", [self.valid_object(f"{prefix}-{n}", host, service=BACKEND)])
        self.wait_served(host)
        return host

    # -- status ------------------------------------------------------------------------------
    def statuses(self) -> list[dict[str, Any]]:
        try:
            loaded = yaml.safe_load(self.status_file.read_text())
        except (FileNotFoundError, yaml.YAMLError):
            return []
        if not isinstance(loaded, dict):
            return []
        return list(loaded.get("objects") or [])

    def status(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        for entry in self.statuses():
            if (entry.get("kind"), entry.get("namespace"), entry.get("name")) == (kind, namespace, name):
                found: dict[str, Any] = entry.get("status") or {}
                return found
        return None

    def wait_status(self, kind: str, namespace: str, name: str, text: str, timeout: float = 5.0) -> str:
        """Wait until the object's status (as YAML text) contains ``text``; returns that text."""
        shown = ""

        def has() -> bool:
            nonlocal shown
            status = self.status(kind, namespace, name)
            # Unwrapped: a long message must stay searchable as one line.
            shown = yaml.safe_dump(status, width=1 << 20) if status is not None else ""
            return text in shown

        try:
            wait_until(has, timeout, f"status of {kind} {namespace}/{name} to contain {text!r}")
        except AssertionError as err:
            raise AssertionError(
                f"{err}; status now:\n{shown}\ncpx log:\n{self.cpx.log_text()[-3000:]}"
            ) from None
        return shown

    # -- the contract --------------------------------------------------------------------------
    def check_bad_input(
        self,
        file_name: str,
        docs: Sequence[Mapping[str, Any]] | str,
        *,
        kind: str,
        name: str,
        problem: str,
        namespace: str = "default",
        timeout: float = 5.0,
        check: Callable[[], object] | None = None,
    ) -> str:
        """Apply a bad input and assert the tenant-safety contract (module docstring); returns
        the bad object's status text.  ``check`` runs once the status is there, before the bad
        file is removed afterwards."""
        control = self.add_valid("control")
        before = rejected_updates(self.envoy)
        self.apply(file_name, docs)
        try:
            shown = self.wait_status(kind, namespace, name, problem, timeout)
            assert self.cpx.running, "cpx exited"
            if check is not None:
                check()  # the caller's own assertions, while the bad input is in place
            later = self.add_valid("after")
            assert self.get(control) == 200, f"{control} no longer served"
            assert self.get(later) == 200
            # A NACK arrives asynchronously: give Envoy a moment to have answered the last push.
            time.sleep(0.3)
            assert rejected_updates(self.envoy) == before, "Envoy rejected an update"
            assert self.cpx.running, "cpx exited"
        finally:
            self.remove(file_name)
        return shown


@contextlib.contextmanager
def tenant_stack(
    workdir: Path,
    *,
    valid_object: ValidObject,
    plugins: Sequence[str] | None = None,
    extra_args: Sequence[str] = (),
    envoy_bootstrap: Mapping[str, Any] | None = None,
    envoy_runtime: Mapping[str, Any] | None = None,
    mtls: bool = False,
) -> Iterator[TenantStack]:
    """A started :class:`TenantStack` in ``workdir``, its backend already served; ``valid_object``
    makes the valid objects of :meth:`TenantStack.add_valid`.

    ``extra_args`` go to ``cpx serve``, ``envoy_bootstrap`` to
    :func:`cpx.xds.envoy.bootstrap.bootstrap_config` (e.g. ``admin_port`` for the read-only admin
    listener), ``envoy_runtime`` into Envoy's static
    runtime layer; ``mtls`` serves xDS over mutual TLS (certificates from ``cpx certgen``)."""
    manifests = workdir / "manifests"
    status_file = workdir / "status.yaml"
    bootstrap = dict(envoy_bootstrap or {})
    tls: dict[str, Any] = {}
    if mtls:
        certs = workdir / "certs"
        certgen.generate(certs)
        ca = str(certs / certgen.CA_CERT_FILE)
        bootstrap.update(
            xds_cafile=ca,
            xds_cert_file=str(certs / certgen.ENVOY_CERT_FILE),
            xds_key_file=str(certs / certgen.ENVOY_KEY_FILE),
        )
        tls = {
            "xds_cafile": ca,
            "xds_cert_file": certs / certgen.CPX_CERT_FILE,
            "xds_key_file": certs / certgen.CPX_KEY_FILE,
        }
    with EchoServer("tenant") as echo:
        write_manifest(manifests, "backend.yaml", backend(BACKEND, echo.port))
        cpx = CpxProcess(
            manifests, workdir=workdir, status_file=status_file, plugins=plugins, extra_args=extra_args, **tls
        )
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy", **bootstrap)
        if envoy_runtime:
            layer = envoy.config["layered_runtime"]["layers"][0]["static_layer"]
            layer.update(envoy_runtime)
        try:
            cpx.start()
            envoy.start()
            envoy.wait_ready()
            yield TenantStack(cpx, envoy, manifests, status_file, echo, valid_object)
        finally:
            envoy.stop()
            try:
                if cpx.running:
                    cpx.stop()
            finally:
                cpx.kill()
