"""A plugin's own listener and cluster kinds, end to end: ``cpx serve`` with the test plugin
``tests/plugins/cpx_test_tcpecho`` (installed for these tests only, through PYTHONPATH) in front of
a real Envoy and a loopback TCP echo backend.

Bytes sent to the plugin's listener port reach the backend through the plugin's cluster kind,
STATIC and EDS; a TCPEcho object whose nodes cannot be served is left out with a status saying why,
while the rest keeps being served and Envoy rejects nothing.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.backends import TCPEchoServer
from cpx.testing.cpxproc import endpoint_slice, service
from cpx.testing.envoy import envoy_binary, free_port
from cpx.testing.tenant import TenantStack, rejected_updates, tenant_stack, wait_until

pytestmark = pytest.mark.e2e

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"
sys.path.insert(0, str(PLUGINS))
from cpx_test_tcpecho import manifest as tcpecho  # noqa: E402


def echoed(port: int, payload: bytes) -> bytes:
    """What comes back for ``payload`` sent to 127.0.0.1:port (b"" when nothing does)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as conn:
            conn.sendall(payload)
            received = b""
            while len(received) < len(payload):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                received += chunk
            return received
    except OSError:
        return b""


def wait_echoed(port: int, payload: bytes = b"ping through a plugin's listener\n") -> None:
    wait_until(lambda: echoed(port, payload) == payload, 10.0, f"an echo through 127.0.0.1:{port}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TenantStack, TCPEchoServer]]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("kinds")
    # An entry point for the test plugin, without installing it: a dist-info folder on the path.
    info = workdir / "site" / "cpx_test_tcpecho-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cpx-test-tcpecho\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cpx.plugins]\ntcpecho = cpx_test_tcpecho\n")
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(info.parent), str(PLUGINS), saved) if p)
    try:
        with TCPEchoServer() as backend, tenant_stack(workdir, valid_object=valid_httpproxy) as tenant:
            yield tenant, backend
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def test_bytes_reach_the_backend_through_a_static_cluster_kind(
    stack: tuple[TenantStack, TCPEchoServer],
) -> None:
    tenant, backend = stack
    port = free_port()
    tenant.apply("static.yaml", [tcpecho("static", port, {"address": "127.0.0.1", "port": backend.port})])
    try:
        wait_echoed(port)
    finally:
        tenant.remove("static.yaml")
    wait_until(lambda: echoed(port, b"x") == b"", 10.0, "the listener to go with its object")


def test_bytes_reach_the_backend_through_an_eds_cluster_kind(
    stack: tuple[TenantStack, TCPEchoServer],
) -> None:
    tenant, backend = stack
    port = free_port()
    docs = [
        service("tcp-backend", port=9000, target_port=backend.port, port_name="tcp"),
        endpoint_slice("tcp-backend", backend.port, port_name="tcp"),
        tcpecho("eds", port, {"service": "tcp-backend", "port": 9000, "portName": "tcp"}),
    ]
    tenant.apply("eds.yaml", docs)
    try:
        wait_echoed(port)
    finally:
        tenant.remove("eds.yaml")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"port": 0}, "InvalidListener"),
        ({"break": "unclaimed"}, "UnknownKind"),
        ({"break": "crash"}, "the backend table is on fire"),
        ({"backend": {"address": "not an address", "port": 1}}, "EnvoyConstraintViolated"),
        ({"taken": True}, "AddressConflict"),
    ],
    ids=["port-0", "unknown-node-type", "build-raises", "envoy-invalid", "address-taken"],
)
def test_a_bad_tcpecho_is_left_out_and_the_rest_served(
    stack: tuple[TenantStack, TCPEchoServer], spec: dict[str, Any], problem: str
) -> None:
    tenant, backend = stack
    served = free_port()
    tenant.apply("served.yaml", [tcpecho("served", served, {"address": "127.0.0.1", "port": backend.port})])
    try:
        wait_echoed(served)
        before = rejected_updates(tenant.envoy)
        bad = tcpecho("bad", free_port(), {"address": "127.0.0.1", "port": backend.port})
        if spec.pop("taken", False):
            bad["spec"]["port"] = served
        bad["spec"].update(spec)
        tenant.check_bad_input(
            "bad.yaml",
            [bad],
            kind="TCPEcho",
            name="bad",
            problem=problem,
            check=lambda: wait_echoed(served),
        )
        # A valid change to the plugin's own kind after the bad input is served too.
        later = free_port()
        tenant.apply("later.yaml", [tcpecho("later", later, {"address": "127.0.0.1", "port": backend.port})])
        wait_echoed(later)
        wait_echoed(served)
        assert rejected_updates(tenant.envoy) == before
    finally:
        tenant.remove("served.yaml")
        tenant.remove("later.yaml")
