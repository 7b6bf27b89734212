"""A config served for real: ``cpx serve`` on YAML text, a real Envoy in front, one echo backend.

The engine of the ``cpx_envoy`` fixture.  The backend is the Service ``echo`` (namespace default,
port 80), so a test's objects can route to it; requests go through Envoy's HTTP listener.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cpx.ops.echoserver import EchoServer
from cpx.ops.envoyproc import EnvoyProcess
from cpx.testing.cpxproc import CpxProcess, backend, cpx_with_envoy, eventually, write_manifest
from cpx.testing.tls import Response, http_get

ECHO_SERVICE = "echo"


@attrs.define(eq=False)
class ServedConfig:
    cpx: CpxProcess
    envoy: EnvoyProcess
    echo: EchoServer
    manifests: Path
    _serial: Iterator[int] = attrs.field(factory=itertools.count)

    def apply(self, text: str | Sequence[Mapping[str, Any]], name: str | None = None) -> Path:
        """Add (or with the same ``name``, replace) a manifest file that cpx watches."""
        return write_manifest(self.manifests, name or f"test-{next(self._serial)}.yaml", text)

    def get(self, host: str, path: str = "/", **kwargs: Any) -> Response:
        """A request through Envoy's HTTP listener with that ``Host`` header."""
        return http_get(f"http://127.0.0.1:{self.cpx.http_port}{path}", host_header=host, **kwargs)

    def wait_served(self, host: str, path: str = "/", status: int = 200, timeout: float = 10.0) -> Response:
        """Poll until a request for ``host``/``path`` answers ``status``; returns that response."""

        def served() -> Response:
            response = self.get(host, path, timeout=2.0)
            assert response.status == status, f"{host}{path}: {response.status}, expected {status}"
            return response

        return eventually(served, timeout)

    def rejected_updates(self) -> int:
        """Every Envoy ``*.update_rejected`` counter, summed: 0 unless Envoy refused a config."""
        return sum(
            v for k, v in self.envoy.stats(r"update_rejected$").items() if k.endswith(".update_rejected")
        )


@contextlib.contextmanager
def serve_with_envoy(
    workdir: Path, text: str | Sequence[Mapping[str, Any]] = "", plugins: Sequence[str] | None = None
) -> Iterator[ServedConfig]:
    """Start the echo backend, ``cpx serve`` on ``text`` and a ready Envoy; stop them all after."""
    manifests = workdir / "manifests"
    with EchoServer(ECHO_SERVICE) as echo:
        write_manifest(manifests, "echo-backend.yaml", backend(ECHO_SERVICE, echo.port))
        if text:
            write_manifest(manifests, "test.yaml", text)
        with cpx_with_envoy(manifests, workdir, plugins=plugins) as (cpx, envoy):
            envoy.wait_ready()
            yield ServedConfig(cpx, envoy, echo, manifests)
