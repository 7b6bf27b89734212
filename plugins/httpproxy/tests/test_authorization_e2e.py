"""HTTPProxy external authorization end to end: `cpx serve` with the httpproxy and extsvc plugins,
a real Envoy, an echo backend and a real ext_authz gRPC server (authserver.py) on 127.0.0.1.

One manifest serves every case on its own host; the tests only send requests through Envoy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    Response,
    backend,
    cpx_with_envoy,
    envoy_binary,
    eventually,
    free_port,
    issue_cert,
    make_ca_secret,
    make_tls_secret,
    request,
    write_manifest,
)

from cpx_httpproxy.testing import prefix, root, route, service

from .authserver import AuthServer, auth_server

pytestmark = pytest.mark.e2e

HOSTS = (
    "auth.test",
    "timeout.test",
    "open.test",
    "closed.test",
    "missing.test",
    "plain.test",
    "tls.test",
    "badname.test",
)
AUTH_NAME = "authz.example.com"  # the TLS authorization server's certificate name


def extension(name: str, service_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"protocol": "h2c", "services": [{"name": service_name, "port": 80}], **spec},
    }


def authorized(host: str, authorization: dict[str, Any] | None, *routes: dict[str, Any]) -> dict[str, Any]:
    proxy = root(
        host.split(".", maxsplit=1)[0],
        host,
        *(routes or (route(services=[service("echo")]),)),
        tls={"secretName": f"tls-{host.split('.', maxsplit=1)[0]}"},
    )
    if authorization is not None:
        proxy["spec"]["virtualhost"]["authorization"] = authorization
    return proxy


def manifest(auth_port: int, tls_port: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [*backend("authsvc", auth_port), *backend("authdown", free_port())]
    objects += [extension("authz", "authsvc"), extension("down", "authdown")]
    # The default protocol, h2: TLS to the server, its certificate checked against the CA Secret.
    objects += [*backend("authtls", tls_port), make_ca_secret("default", "auth-ca")]
    for name, subject in (("tlsauthz", AUTH_NAME), ("badname", "other.example.com")):
        ext = extension(name, "authtls", validation={"caSecret": "auth-ca", "subjectName": subject})
        del ext["spec"]["protocol"]
        objects.append(ext)
    objects.append(authorized("tls.test", {"extensionRef": {"name": "tlsauthz"}}))
    objects.append(authorized("badname.test", {"extensionRef": {"name": "badname"}}))
    objects.append(
        authorized(
            "auth.test",
            {
                "extensionRef": {"name": "authz"},
                "authPolicy": {"context": {"tenant": "a", "scope": "vhost"}},
                "withRequestBody": {"maxRequestBytes": 1024, "allowPartialMessage": True},
            },
            route(prefix("/public"), services=[service("echo")], auth_policy={"disabled": True}),
            route(services=[service("echo")], auth_policy={"context": {"scope": "route"}}),
        )
    )
    objects.append(
        authorized("timeout.test", {"extensionRef": {"name": "authz"}, "responseTimeout": "200ms"})
    )
    objects.append(authorized("open.test", {"extensionRef": {"name": "down"}, "failOpen": True}))
    objects.append(authorized("closed.test", {"extensionRef": {"name": "down"}}))
    objects.append(authorized("missing.test", {"extensionRef": {"name": "nope"}}))
    objects.append(authorized("plain.test", None))
    return objects


@attrs.define
class Stack:
    cpx: CpxProcess
    envoy: EnvoyProcess
    auth: AuthServer
    tls_auth: AuthServer
    ca_pem: str

    def https(self, path: str, host: str, **kwargs: Any) -> Response:
        url = f"https://127.0.0.1:{self.cpx.https_port}{path}"
        return request(url, sni=host, ca_pem=self.ca_pem, **kwargs)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("authorization-e2e")
    secrets: list[dict[str, Any]] = []
    ca_pem = ""
    for host in HOSTS:
        secret, ca_pem = make_tls_secret("default", f"tls-{host.split('.')[0]}", [host])
        secrets.append(secret)
    echo = EchoServer("echo").start()
    manifests = workdir / "manifests"
    try:
        pair = issue_cert([AUTH_NAME])
        with (
            auth_server() as (auth, port),
            auth_server((pair.cert_pem, pair.key_pem)) as (tls_auth, tls_port),
        ):
            objects = [*backend("echo", echo.port), *secrets, *manifest(port, tls_port)]
            write_manifest(manifests, "all.yaml", objects)
            with cpx_with_envoy(manifests, workdir, plugins=["httpproxy", "extsvc"]) as (cpx, envoy):
                envoy.wait_ready()
                stack = Stack(cpx, envoy, auth, tls_auth, ca_pem)
                eventually(lambda: _served(stack, "plain.test"), timeout=20)
                eventually(lambda: _served(stack, "auth.test"), timeout=20)
                yield stack
    finally:
        echo.stop()


def _served(stack: Stack, host: str) -> None:
    assert stack.https("/", host).status == 200


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest, stack: Stack) -> Iterator[None]:
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        print(f"--- cpx log (tail) ---\n{stack.cpx.log_text()[-4000:]}")
        print(f"--- envoy log (tail) ---\n{stack.envoy.log_text()[-4000:]}")


def test_allowed_requests_reach_the_backend_with_the_servers_headers(stack: Stack) -> None:
    response = stack.https("/allowed", "auth.test")
    assert response.status == 200
    assert response.json()["headers"]["x-auth-user"] == "alice"


def test_denied_requests_get_the_servers_answer(stack: Stack) -> None:
    response = stack.https("/denied", "auth.test", headers={"x-deny": "1"})
    assert (response.status, response.text) == (403, "denied by test")


def test_the_server_sees_the_merged_context(stack: Stack) -> None:
    assert stack.https("/context", "auth.test").status == 200
    [check] = stack.auth.seen("/context")
    assert check.context == {"tenant": "a", "scope": "route"}  # the route's key wins


def test_the_server_sees_the_request_body(stack: Stack) -> None:
    assert stack.https("/body", "auth.test", method="POST", body=b"hello body").status == 200
    [check] = stack.auth.seen("/body")
    assert check.body == "hello body"


def test_a_disabled_route_is_not_checked(stack: Stack) -> None:
    response = stack.https("/public/x", "auth.test", headers={"x-deny": "1"})
    assert response.status == 200
    assert stack.auth.seen("/public/x") == []


def test_a_slow_server_times_out_into_a_denial(stack: Stack) -> None:
    response = stack.https("/slow", "timeout.test", headers={"x-slow": "1"})
    assert response.status == 403


def test_fail_open_when_the_server_is_down(stack: Stack) -> None:
    assert stack.https("/", "open.test").status == 200


def test_closed_when_the_server_is_down(stack: Stack) -> None:
    assert stack.https("/", "closed.test").status == 403


def test_a_missing_extension_service_leaves_the_host_out_and_the_rest_served(stack: Stack) -> None:
    stack.cpx.wait_log("ExtensionServiceNotFound")
    with pytest.raises(OSError):  # no SNI chain for the refused root: the handshake fails
        stack.https("/", "missing.test")
    assert stack.https("/", "plain.test").status == 200
    assert stack.https("/", "auth.test").status == 200


def test_an_h2_extension_service_is_reached_over_tls_with_its_name_checked(stack: Stack) -> None:
    response = stack.https("/over-tls", "tls.test")
    assert response.status == 200
    assert response.json()["headers"]["x-auth-user"] == "alice"
    assert len(stack.tls_auth.seen("/over-tls")) == 1
    # A server whose certificate does not carry the subject name is never asked.
    assert stack.https("/wrong-name", "badname.test").status == 403
    assert stack.tls_auth.seen("/wrong-name") == []
