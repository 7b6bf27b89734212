"""Issue row: an ExternalName Service pointing at Envoy's own host must not reach Envoy's admin.

Each bad input goes through the tenant contract (:meth:`TenantStack.check_bad_input`); besides,
the admin interface must not answer through the public listener, and a real Envoy started from
``cpx bootstrap`` output must not take ``POST /quitquitquit`` (or any admin write) on any TCP port.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.cpxproc import CpxProcess, backend, write_manifest
from cpx.testing.envoy import EnvoyProcess, envoy_binary, free_port, wait_for_port
from cpx.testing.tenant import BACKEND, TenantStack, tenant_stack
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

DISABLED = "default/{name} is an ExternalName service, these are not currently enabled"
LOCALHOST = "default/{name} is an ExternalName service that points to localhost, this is not allowed"
ADMIN_WRITES = ("/quitquitquit", "/logging?level=trace", "/healthcheck/fail", "/runtime_modify?x=1")


def external_service(name: str, target: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": target, "ports": [{"name": "admin", "port": port}]},
    }


def httpproxy(name: str, fqdn: str, service: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"virtualhost": {"fqdn": fqdn}, "routes": [{"services": [{"name": service, "port": port}]}]},
    }


def route_to(kind: str, name: str, host: str, service: str, port: int) -> dict[str, Any]:
    if kind == "Ingress":
        doc = ingress(name, [(host, "/", service)])
        # simple_ingress names port 80; point it at the Service's port.
        doc["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"] = {"number": port}
        return doc
    return httpproxy(name, host, service, port)


def loopback_hostname() -> str | None:
    """This machine's host name when it resolves to loopback (a name no name check catches)."""
    name = socket.gethostname()
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
    except OSError:
        return None
    return name if any(a.startswith("127.") or a == "::1" for a in addresses) else None


def check_admin_unreachable(stack: TenantStack, host: str) -> None:
    """Through the public listener, the host answers 503 (a route without a cluster), never an
    admin page."""
    for path in ("/server_info", "/config_dump", "/ready"):
        stack.wait_served(host, path, status=503)


# -- ExternalName off (the default): refused for every kind ------------------------------------


@pytest.mark.parametrize("kind", ["Ingress", "HTTPProxy"])
def test_external_name_is_refused_by_default(tenant: TenantStack, kind: str) -> None:
    port = free_port()  # any loopback port: refused before anything looks at it
    name = f"off-{kind.lower()}"
    docs = [external_service(name, "localhost", port), route_to(kind, name, f"{name}.test", name, port)]
    shown = tenant.check_bad_input(
        f"{name}.yaml", docs, kind=kind, name=name, problem=DISABLED.format(name=name)
    )
    assert "ServiceUnresolvedReference" in shown


# -- ExternalName on: loopback targets still refused -------------------------------------------


@pytest.fixture(scope="module")
def admin_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def enabled(tmp_path_factory: pytest.TempPathFactory, admin_port: int) -> Iterator[TenantStack]:
    """A tenant stack with --enable-external-name-service whose Envoy has the read-only admin
    listener on ``admin_port`` (the TCP port an attacker would aim at)."""
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir: Path = tmp_path_factory.mktemp("extname")
    with tenant_stack(
        workdir,
        valid_object=valid_httpproxy,
        extra_args=["--enable-external-name-service"],
        envoy_bootstrap={"admin_port": admin_port},
    ) as stack:
        yield stack


@pytest.mark.parametrize("kind", ["Ingress", "HTTPProxy"])
@pytest.mark.parametrize("target", ["localhost", "127.0.0.1", "hostname"])
def test_external_name_to_loopback_is_refused(
    enabled: TenantStack, admin_port: int, kind: str, target: str
) -> None:
    if target == "hostname":
        # Resolved, not parsed: the name is refused for what it resolves to.
        found = loopback_hostname()
        if found is None:
            pytest.skip("this machine's host name does not resolve to loopback")
        target = found
    assert enabled.envoy.admin_get("/ready")[0] == 200
    name = f"on-{kind.lower()}-{target.replace('.', '-')}"
    host = f"{name}.test"
    docs = [external_service(name, target, admin_port), route_to(kind, name, host, name, admin_port)]
    # check_bad_input removes the file at the end: look at traffic while it is there.
    enabled.apply(f"{name}-probe.yaml", docs)
    try:
        enabled.wait_status(kind, "default", name, "points to localhost")
        check_admin_unreachable(enabled, host)
    finally:
        enabled.remove(f"{name}-probe.yaml")
    shown = enabled.check_bad_input(
        f"{name}.yaml", docs, kind=kind, name=name, problem=LOCALHOST.format(name=name)
    )
    if target not in ("localhost", "127.0.0.1"):
        assert f'"{target}" resolves to 127.' in shown


# -- the admin interface is on no TCP port ------------------------------------------------------


def _bootstrap_from_cli(xds_port: int, admin_port: int, stats_port: int, socket_path: str) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "cpx", "bootstrap", "-",
        "--xds-port", str(xds_port),
        "--admin-address", socket_path,
        "--admin-port", str(admin_port),
        "--stats-address", "127.0.0.1",
        "--stats-port", str(stats_port),
    ]  # fmt: skip
    out = subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout
    config: dict[str, Any] = json.loads(out)
    return config


def _send(port: int, method: str, path: str) -> int:
    """The HTTP status, or 0 when the port does not speak plain HTTP (e.g. the TLS listener)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        conn.request(method, path)
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        conn.close()


def test_admin_writes_are_reachable_on_no_tcp_port(tmp_path: Path) -> None:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    admin_port, stats_port = free_port(), free_port()
    manifests = tmp_path / "manifests"
    # Something to serve, so that cpx gives Envoy its HTTP and HTTPS listeners.
    write_manifest(
        manifests,
        "backend.yaml",
        [*backend(BACKEND, free_port()), ingress("web", [("web.test", "/", BACKEND)])],
    )
    with CpxProcess(manifests, workdir=tmp_path) as cpx:
        config = _bootstrap_from_cli(cpx.xds_port, admin_port, stats_port, "/admin/admin.sock")
        assert config["admin"]["address"]["pipe"]["path"] == "/admin/admin.sock"
        # The harness moves the socket to a private directory and keeps full access through it.
        with EnvoyProcess(config, workdir=tmp_path / "envoy") as envoy:
            envoy.wait_ready()
            wait_for_port("127.0.0.1", cpx.http_port)  # cpx's listener (added once warm)
            assert _send(cpx.http_port, "GET", "/") == 404  # no such host
            ports = {port for _, port in envoy.listening_ports()}
            assert {cpx.http_port, admin_port, stats_port} <= ports
            levels = envoy.admin_post("/logging")[1]
            for port in sorted(ports):
                for path in ADMIN_WRITES:
                    assert _send(port, "POST", path) != 200, (port, path)
                assert _send(port, "GET", "/quitquitquit") != 200, port
            time.sleep(0.5)
            assert envoy.running, "an admin write reached Envoy"
            assert envoy.admin_post("/logging")[1] == levels
            assert envoy.admin_get("/ready") == (200, "LIVE\n")
            # The read-only listeners answer what they are for.
            assert _send(stats_port, "GET", "/ready") == 200
            assert _send(admin_port, "GET", "/server_info") == 200
