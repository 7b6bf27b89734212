"""A config served for real: ``cpx serve`` on YAML text, a real Envoy in front, one echo backend.

The engine of the ``cpx_envoy`` fixture.  The backend is the Service ``echo`` (namespace default,
port 80), so a test's objects can route to it; requests go through Envoy's HTTP listener.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
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


def uninstalled_plugins_env(workdir: Path, modules: Sequence[tuple[str, ModuleType]]) -> dict[str, str]:
    """Environment for a ``cpx`` subprocess that finds ``modules`` as installed plugins under their
    entry-point names, without installing them: a dist-info folder declaring the entry points in
    ``workdir``, and the folders holding the modules first on ``PYTHONPATH``."""
    if not modules:
        return {}
    info = workdir / "site" / "cpx_uninstalled_plugins-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cpx-uninstalled-plugins\nVersion: 0\n")
    points = "".join(f"{name} = {module.__name__}\n" for name, module in modules)
    (info / "entry_points.txt").write_text("[cpx.plugins]\n" + points)
    roots = [str(info.parent)]
    for _name, module in modules:
        source = Path(module.__file__ or "")
        top = source.parent if source.name != "__init__.py" else source.parent.parent
        for _ in range(module.__name__.count(".")):  # a submodule: up to its top-level package
            top = top.parent
        roots.append(str(top))
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([*dict.fromkeys(roots), *([inherited] if inherited else [])])}


@contextlib.contextmanager
def serve_with_envoy(
    workdir: Path,
    text: str | Sequence[Mapping[str, Any]] = "",
    plugins: Sequence[str] | None = None,
    modules: Sequence[tuple[str, ModuleType]] = (),
) -> Iterator[ServedConfig]:
    """Start the echo backend, ``cpx serve`` on ``text`` and a ready Envoy; stop them all after.
    ``modules`` are plugins not installed yet, by entry-point name (see :func:`uninstalled_plugins_env`)."""
    manifests = workdir / "manifests"
    env = uninstalled_plugins_env(workdir, modules)
    with EchoServer(ECHO_SERVICE) as echo:
        write_manifest(manifests, "echo-backend.yaml", backend(ECHO_SERVICE, echo.port))
        if text:
            write_manifest(manifests, "test.yaml", text)
        with cpx_with_envoy(manifests, workdir, plugins=plugins, env=env) as (cpx, envoy):
            envoy.wait_ready()
            yield ServedConfig(cpx, envoy, echo, manifests)
