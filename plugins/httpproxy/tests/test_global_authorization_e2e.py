"""Global external authorization end to end (``--global-ext-auth-*``, Contour's globalExtAuth):
plain HTTP and TLS roots are authorized by the global ExtensionService; a root opts out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    backend,
    envoy_binary,
    eventually,
    make_tls_secret,
    request,
    write_manifest,
)

from cpx_httpproxy.testing import root, route, service

from .authserver import AuthServer, auth_server

pytestmark = pytest.mark.e2e


def objects(auth_port: int, echo_port: int) -> tuple[list[dict[str, Any]], str]:
    secret, ca_pem = make_tls_secret("default", "tls-optout", ["optout.test"])
    extension = {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"name": "global", "namespace": "auth"},
        "spec": {"protocol": "h2c", "services": [{"name": "authsvc", "port": 80}]},
    }
    optout = root(
        "optout", "optout.test", route(services=[service("echo")]), tls={"secretName": "tls-optout"}
    )
    optout["spec"]["virtualhost"]["authorization"] = {"authPolicy": {"disabled": True}}
    found = [
        *backend("echo", echo_port),
        *backend("authsvc", auth_port, namespace="auth"),
        extension,
        secret,
        root("plain", "plain.test", route(services=[service("echo")])),
        optout,
    ]
    return found, ca_pem


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CpxProcess, AuthServer, str]]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("global-authorization-e2e")
    echo = EchoServer("echo").start()
    try:
        with auth_server() as (auth, port):
            found, ca_pem = objects(port, echo.port)
            write_manifest(workdir / "manifests", "all.yaml", found)
            args = [
                "--global-ext-auth-extension-service",
                "auth/global",
                "--global-ext-auth-context",
                "realm=all",
            ]
            cpx = CpxProcess(workdir / "manifests", workdir, plugins=["httpproxy", "extsvc"], extra_args=args)
            envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy")
            try:
                cpx.start()
                envoy.start()
                envoy.wait_ready()
                eventually(lambda: _plain(cpx, "/ready").status == 200, timeout=20)
                yield cpx, auth, ca_pem
            finally:
                envoy.stop()
                cpx.kill()
    finally:
        echo.stop()


def _plain(cpx: CpxProcess, path: str, **kwargs: Any) -> Any:
    return request(f"http://127.0.0.1:{cpx.http_port}{path}", host_header="plain.test", **kwargs)


def test_plain_http_is_authorized_by_the_global_server(served: tuple[CpxProcess, AuthServer, str]) -> None:
    cpx, auth, _ca = served
    response = _plain(cpx, "/plain")
    assert response.status == 200 and response.json()["headers"]["x-auth-user"] == "alice"
    assert [check.context for check in auth.seen("/plain")] == [{"realm": "all"}]
    assert _plain(cpx, "/plain-denied", headers={"x-deny": "1"}).status == 403


def test_a_root_opts_out(served: tuple[CpxProcess, AuthServer, str]) -> None:
    cpx, auth, ca_pem = served
    url = f"https://127.0.0.1:{cpx.https_port}/opted-out"
    response = request(url, sni="optout.test", ca_pem=ca_pem, headers={"x-deny": "1"})
    assert response.status == 200
    assert auth.seen("/opted-out") == []
