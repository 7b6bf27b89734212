"""Ingress end to end: `cpx serve` + a real Envoy + loopback echo backends.

One cpx and one Envoy serve the whole module; each test rewrites the manifest file with the
Ingresses it needs (on top of the shared Services) and waits until Envoy routes a marker host
that only this generation of the manifests has, then asserts through Envoy.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    Response,
    backend,
    cpx_with_envoy,
    envoy_binary,
    eventually,
    http_get,
    https_get,
    make_tls_secret,
    write_manifest,
)
from cpx_ingress.testing import ingress, ingress_backend, ingress_path, ingress_rule

pytestmark = pytest.mark.e2e

BACKENDS = (
    "root", "exact", "prefix", "foo", "foobar", "str", "regex", "wild", "default", "app",
    "secure-a", "secure-b", "echo",
)  # fmt: skip
SECURE_HOSTS = ("a.secure.test", "b.secure.test", "redirect.secure.test", "nohttp.secure.test")


@attrs.define
class Stack:
    cpx: CpxProcess
    envoy: EnvoyProcess
    backends: dict[str, EchoServer]
    manifests: Path
    secrets: dict[str, dict[str, Any]]  # host -> Secret named tls-<first label>
    ca_pem: str
    generation: int = 0

    def apply(self, *objects: Mapping[str, Any]) -> None:
        """Serve exactly the shared Services and Secrets plus ``objects``; wait until Envoy has them."""
        self.generation += 1
        marker_host = f"gen-{self.generation}.marker.test"
        marker = ingress("marker", rules=[ingress_rule(marker_host, ingress_path("/", "Prefix", "root"))])
        shared = [obj for name, echo in self.backends.items() for obj in backend(name, echo.port)]
        write_manifest(self.manifests, "all.yaml", [*shared, *self.secrets.values(), marker, *objects])

        def marker_routed() -> None:
            assert self.http("/", marker_host).headers.get("x-backend") == "root"

        eventually(marker_routed, timeout=15)

    def http(self, path: str, host: str, **kwargs: Any) -> Response:
        return http_get(f"http://127.0.0.1:{self.cpx.http_port}{path}", host_header=host, **kwargs)

    def https(self, path: str, sni: str, host: str | None = None, **kwargs: Any) -> Response:
        url = f"https://127.0.0.1:{self.cpx.https_port}{path}"
        return https_get(url, sni=sni, ca_pem=self.ca_pem, host_header=host, **kwargs)

    def backend_of(self, path: str, host: str) -> str | int:
        """Which backend answered ``path`` on ``host`` over HTTP (its status when none did)."""
        response = self.http(path, host)
        return response.headers.get("x-backend") or response.status


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("ingress-e2e")
    backends = {name: EchoServer(name).start() for name in BACKENDS}
    secrets: dict[str, dict[str, Any]] = {}
    ca_pem = ""
    for host in SECURE_HOSTS:
        secrets[host], ca_pem = make_tls_secret("default", f"tls-{host.split('.')[0]}", [host])
    manifests = workdir / "manifests"
    write_manifest(manifests, "all.yaml", [])
    try:
        with cpx_with_envoy(manifests, workdir, plugins=["ingress"]) as (cpx, envoy):
            stack = Stack(cpx, envoy, backends, manifests, secrets, ca_pem)
            stack.apply()
            envoy.wait_ready()
            yield stack
    finally:
        for echo in backends.values():
            echo.stop()


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest, stack: Stack) -> Iterator[None]:
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        print(f"--- cpx log (tail) ---\n{stack.cpx.log_text()[-4000:]}")
        print(f"--- envoy log (tail) ---\n{stack.envoy.log_text()[-4000:]}")


def test_path_types_and_precedence(stack: Stack) -> None:
    host = "route.example.com"
    stack.apply(
        ingress(
            "routes",
            rules=[
                ingress_rule(
                    host,
                    ingress_path("/", "Prefix", "root"),
                    ingress_path("/pt", "Prefix", "prefix"),
                    ingress_path("/pt", "Exact", "exact"),
                    ingress_path("/foo", "Prefix", "foo"),
                    ingress_path("/foo/bar/", "Prefix", "foobar"),
                    ingress_path("/re/[0-9]+", "ImplementationSpecific", "regex"),
                ),
                ingress_rule("legacy.example.com", ingress_path("/foo", "ImplementationSpecific", "str")),
            ],
        )
    )
    expected: dict[str, str | int] = {
        "/pt": "exact",  # Exact beats a Prefix of the same path
        "/pt/x": "prefix",
        "/ptx": "root",  # Prefix matches whole segments
        "/foo": "foo",
        "/foo/": "foo",
        "/foo/x": "foo",
        "/foo/bar": "foobar",  # the longer prefix first; its trailing "/" is irrelevant
        "/foo/bar/baz": "foobar",
        "/foo/barn": "foo",
        "/foobar": "root",
        "/re/123": "regex",  # the regex matches the whole path
        "/re/12a": "root",
        "/anything": "root",
    }
    assert {path: stack.backend_of(path, host) for path in expected} == expected
    # ImplementationSpecific without regex characters: a plain string prefix.
    legacy = {p: stack.backend_of(p, "legacy.example.com") for p in ("/foo", "/foobar", "/fo")}
    assert legacy == {"/foo": "str", "/foobar": "str", "/fo": 404}
    # Host matching ignores the port and the case.
    assert stack.backend_of("/pt", "ROUTE.example.com:8080") == "exact"
    echoed = stack.http("/foo/bar/baz?q=1", host).json()
    assert (echoed["path"], echoed["query"]) == ("/foo/bar/baz", {"q": "1"})  # no rewriting


def test_wildcard_host_matches_one_label(stack: Stack) -> None:
    stack.apply(
        ingress("wild", rules=[ingress_rule("*.wild.test", ingress_path("/", "Prefix", "wild"))]),
        ingress("exact-host", rules=[ingress_rule("x.wild.test", ingress_path("/", "Prefix", "foo"))]),
    )
    assert stack.backend_of("/", "a.wild.test") == "wild"
    assert stack.backend_of("/", "a.wild.test:80") == "wild"
    assert stack.backend_of("/", "A.Wild.TEST") == "wild"  # Host names are case-insensitive
    assert stack.backend_of("/", "x.wild.test") == "foo"  # an exact host wins over the wildcard
    assert stack.backend_of("/", "a.b.wild.test") == 404
    assert stack.backend_of("/", "wild.test") == 404


def test_default_backend(stack: Stack) -> None:
    stack.apply(
        ingress(
            "with-default",
            default_backend=ingress_backend("default"),
            rules=[ingress_rule(None, ingress_path("/app", "Prefix", "app"))],
        ),
        ingress("hosted", rules=[ingress_rule("hosted.test", ingress_path("/", "Prefix", "foo"))]),
    )
    assert stack.backend_of("/app/x", "any.test") == "app"
    assert stack.backend_of("/other", "any.test") == "default"
    assert stack.backend_of("/", "unknown.example.org") == "default"
    assert stack.backend_of("/", "hosted.test") == "foo"


def _tls(host: str, stack: Stack) -> dict[str, Any]:
    return {"hosts": [host], "secretName": stack.secrets[host]["metadata"]["name"]}


def test_https_sni_certificates_and_421(stack: Stack) -> None:
    a, b = "a.secure.test", "b.secure.test"
    stack.apply(
        ingress(
            "secure",
            tls=[_tls(a, stack), _tls(b, stack)],
            rules=[
                ingress_rule(a, ingress_path("/", "Prefix", "secure-a")),
                ingress_rule(b, ingress_path("/", "Prefix", "secure-b")),
            ],
        )
    )
    # The certificate is verified against the test CA and the SNI (https_get checks the hostname).
    first = eventually(lambda: stack.https("/x", sni=a))
    assert (first.status, first.headers["x-backend"], first.peer_dns_names()) == (200, "secure-a", [a])
    second = stack.https("/x", sni=b)
    assert (second.status, second.headers["x-backend"], second.peer_dns_names()) == (200, "secure-b", [b])
    assert first.json()["headers"]["x-forwarded-proto"] == "https"
    # Host must agree with the SNI that chose the certificate.
    misdirected = stack.https("/x", sni=a, host=b)
    assert misdirected.status == 421
    assert misdirected.peer_dns_names() == [a]
    assert stack.https("/x", sni=a, host=f"{a}:443").status == 200  # ports are ignored
    # Without force-ssl-redirect or allow-http the hosts stay reachable over HTTP.
    assert stack.backend_of("/", a) == "secure-a"


def test_force_ssl_redirect_and_allow_http_false(stack: Stack) -> None:
    redirect, nohttp = "redirect.secure.test", "nohttp.secure.test"
    stack.apply(
        ingress(
            "redirect",
            annotations={"ingress.kubernetes.io/force-ssl-redirect": "true"},
            tls=[_tls(redirect, stack)],
            rules=[ingress_rule(redirect, ingress_path("/", "Prefix", "secure-a"))],
        ),
        ingress(
            "https-only",
            annotations={"kubernetes.io/ingress.allow-http": "false"},
            tls=[_tls(nohttp, stack)],
            rules=[ingress_rule(nohttp, ingress_path("/", "Prefix", "secure-b"))],
        ),
    )
    moved = stack.http("/path?q=1", redirect)
    assert moved.status == 301
    assert moved.headers["location"] == f"https://{redirect}/path?q=1"
    assert "x-backend" not in moved.headers
    over_tls = eventually(lambda: stack.https("/path", sni=redirect))
    assert (over_tls.status, over_tls.headers["x-backend"]) == (200, "secure-a")

    assert stack.http("/", nohttp).status == 404
    served = eventually(lambda: stack.https("/", sni=nohttp))
    assert (served.status, served.headers["x-backend"]) == (200, "secure-b")
    assert served.peer_dns_names() == [nohttp]


def test_response_timeout_and_retry_on(stack: Stack) -> None:
    stack.apply(
        ingress(
            "timeout",
            annotations={"projectcontour.io/response-timeout": "200ms"},
            rules=[ingress_rule("timeout.test", ingress_path("/", "Prefix", "echo"))],
        ),
        ingress(
            "retry",
            annotations={"projectcontour.io/retry-on": "5xx", "projectcontour.io/num-retries": "3"},
            rules=[ingress_rule("retry.test", ingress_path("/", "Prefix", "echo"))],
        ),
        ingress("plain", rules=[ingress_rule("plain.test", ingress_path("/", "Prefix", "echo"))]),
    )
    assert stack.http("/slow?ms=1000", "timeout.test").status == 504
    assert stack.http("/slow?ms=10", "timeout.test").status == 200

    key = uuid.uuid4().hex
    assert stack.http(f"/flaky?key={key}&fail=2", "retry.test").status == 200
    assert stack.http(f"/flaky?key={key}-plain&fail=1", "plain.test").status == 503  # no retries there
    tries = [r for r in stack.backends["echo"].requests if r.get("query", {}).get("key") == key]
    assert len(tries) == 3


def test_websocket_route(stack: Stack) -> None:
    stack.apply(
        ingress(
            "ws",
            annotations={"projectcontour.io/websocket-routes": "/ws"},
            rules=[
                ingress_rule(
                    "ws.test",
                    ingress_path("/ws", "Prefix", "echo"),
                    ingress_path("/plain", "Prefix", "echo"),
                )
            ],
        )
    )

    def dial() -> socket.socket:
        return socket.create_connection(("127.0.0.1", stack.cpx.http_port), timeout=5)

    # After the close handshake Envoy waits for the client to hang up (delayed_close_timeout, 1 s)
    # while the client waits for the server to: don't wait for the TCP close.
    with connect("ws://ws.test/ws/chat", sock=dial(), open_timeout=5, close_timeout=0.1) as ws:
        assert ws.response is not None
        assert ws.response.headers["x-backend"] == "echo"
        ws.send("through envoy")
        assert ws.recv(timeout=5) == "through envoy"
        ws.send(b"\x00\x01")
        assert ws.recv(timeout=5) == b"\x00\x01"
    # A route not listed in the annotation refuses the upgrade.
    with pytest.raises(InvalidStatus) as refused:
        connect("ws://ws.test/plain", sock=dial(), open_timeout=5)
    assert refused.value.response.status_code == 403


def test_missing_service_answers_503_alone(stack: Stack) -> None:
    missing = ingress(
        "missing",
        rules=[
            ingress_rule(
                "missing.test",
                ingress_path("/gone", "Prefix", "nope"),
                ingress_path("/", "Prefix", "root"),
            )
        ],
    )
    neighbour = ingress("neighbour", rules=[ingress_rule("ok.test", ingress_path("/", "Prefix", "app"))])
    stack.apply(missing, neighbour)
    assert stack.http("/gone", "missing.test").status == 503
    assert stack.backend_of("/elsewhere", "missing.test") == "root"
    assert stack.backend_of("/gone", "ok.test") == "app"

    # The Service appears: the same route starts answering, without restarting anything.
    stack.apply(missing, neighbour, *backend("nope", stack.backends["echo"].port))

    def recovered() -> None:
        assert stack.backend_of("/gone", "missing.test") == "echo"

    eventually(recovered)
    assert stack.backend_of("/elsewhere", "missing.test") == "root"
