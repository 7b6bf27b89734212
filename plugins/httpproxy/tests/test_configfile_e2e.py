"""Contour's configuration file end to end: `cpx serve -c contour.yaml` with ``rateLimitService``
and ``globalExtAuth`` (no --rate-limit-* or --global-ext-auth-* flag) against a real Envoy, the
test's ext_authz server and rate limit service, and an echo backend, all on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from cpx.testing import (
    CpxProcess,
    EchoServer,
    Response,
    backend,
    cpx_with_envoy,
    envoy_binary,
    eventually,
    request,
    write_manifest,
)

from cpx_httpproxy.testing import root, route, service

from .authserver import AuthServer, auth_server
from .rls_server import RateLimitServer

pytestmark = pytest.mark.e2e

LIMIT = 2
CONTOUR_YAML = {
    "rateLimitService": {
        "extensionService": "projectcontour/ratelimit",
        "domain": "from-file",
        "enableXRateLimitHeaders": True,
        "defaultGlobalRateLimitPolicy": {
            "descriptors": [{"entries": [{"genericKey": {"value": "default"}}]}]
        },
    },
    "globalExtAuth": {
        "extensionService": "auth/global",
        "authPolicy": {"context": {"realm": "file", "scopes": "read,write"}},
        "withRequestBody": {"maxRequestBytes": 4, "allowPartialMessage": True},
    },
}


def _extension(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"protocol": "h2c", "services": [{"name": name, "port": 80}]},
    }


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[CpxProcess, AuthServer, RateLimitServer]]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("configfile-e2e")
    (workdir / "contour.yaml").write_text(yaml.safe_dump(CONTOUR_YAML))
    echo = EchoServer("echo").start()
    rls = RateLimitServer(LIMIT).start()
    try:
        with auth_server() as (auth, auth_port):
            found = [
                *backend("echo", echo.port),
                *backend("ratelimit", rls.port, namespace="projectcontour"),
                *backend("global", auth_port, namespace="auth"),
                _extension("projectcontour", "ratelimit"),
                _extension("auth", "global"),
                root("plain", "plain.test", route(services=[service("echo")])),
            ]
            write_manifest(workdir / "manifests", "all.yaml", found)
            args = ["-c", str(workdir / "contour.yaml")]
            plugins = ["httpproxy", "extsvc"]
            with cpx_with_envoy(workdir / "manifests", workdir, plugins=plugins, extra_args=args) as (
                cpx,
                envoy,
            ):
                envoy.wait_ready()
                eventually(lambda: _get(cpx, "/ready").status == 200, timeout=20)
                rls.service.reset()
                yield cpx, auth, rls
    finally:
        rls.stop()
        echo.stop()


def _get(cpx: CpxProcess, path: str, **kwargs: Any) -> Response:
    return request(f"http://127.0.0.1:{cpx.http_port}{path}", host_header="plain.test", **kwargs)


Served = tuple[CpxProcess, AuthServer, RateLimitServer]


def test_the_global_authorization_server_of_the_file_checks_every_request(served: Served) -> None:
    cpx, auth, _rls = served
    response = _get(cpx, "/authorized", method="POST", body=b"0123456789")
    assert response.status == 200 and response.json()["headers"]["x-auth-user"] == "alice"
    [check] = auth.seen("/authorized")
    assert check.context == {"realm": "file", "scopes": "read,write"}
    assert check.body == "0123"  # withRequestBody: the first maxRequestBytes
    denied = _get(cpx, "/denied", headers={"x-deny": "1"})
    assert denied.status == 403 and denied.text == "denied by test"


def test_the_default_global_rate_limit_policy_of_the_file_limits_every_virtual_host(served: Served) -> None:
    cpx, _auth, rls = served
    rls.service.reset()  # every request of the module counts against the one default descriptor
    statuses = [_get(cpx, f"/limited/{n}").status for n in range(LIMIT + 1)]
    assert statuses == [200] * LIMIT + [429]
    assert set(rls.service.seen) == {("from-file", ((("generic_key", "default"),),))}
    allowed = _get(cpx, "/limited/again")
    assert allowed.status == 429 and allowed.headers["x-ratelimit-limit"].startswith(str(LIMIT))
