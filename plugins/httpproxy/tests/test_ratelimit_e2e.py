"""Global rate limiting end to end: `cpx serve` + a real Envoy + a real rate limit service
(envoy.service.ratelimit.v3 over gRPC, counting descriptors) + an echo backend, all on 127.0.0.1.

The service allows LIMIT requests per descriptor and domain; each test uses its own host (and so
its own descriptors).  cpx reaches it as Contour documents: an ExtensionService
(projectcontour/ratelimit, h2c, from the extsvc plugin) named by --rate-limit-service-extension-service.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    Response,
    backend,
    envoy_binary,
    eventually,
    make_tls_secret,
    request,
    write_manifest,
)

from cpx_httpproxy.testing import prefix, root, route, service

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the server beside this file
from rls_server import RateLimitServer

pytestmark = pytest.mark.e2e

LIMIT = 2
DOMAIN = "e2e"
TLS_HOST = "tls.rl.test"
TLS_SECRET, TLS_CA = make_tls_secret("default", "tls", [TLS_HOST])


@attrs.define
class Stack:
    cpx: CpxProcess
    envoy: EnvoyProcess
    rls: RateLimitServer
    echo: EchoServer
    manifests: Path
    generation: int = 0

    def https(self, path: str, sni: str) -> Response:
        url = f"https://127.0.0.1:{self.cpx.https_port}{path}"
        return request(url, sni=sni, ca_pem=TLS_CA)

    def apply(self, *objects: dict[str, Any]) -> None:
        """Serve the echo backend, the rate limit service plus ``objects``; wait until Envoy routes
        this generation."""
        self.generation += 1
        marker = f"gen-{self.generation}.marker.test"
        objects += (root("marker", marker, route(services=[service("echo")])),)
        write_manifest(self.manifests, "all.yaml", [*_shared(self.echo.port, self.rls.port), *objects])
        eventually(lambda: _assert_status(self.http("/", marker), 200), timeout=15)
        self.rls.service.reset()

    def http(self, path: str, host: str, headers: dict[str, str] | None = None) -> Response:
        url = f"http://127.0.0.1:{self.cpx.http_port}{path}"
        return request(url, host_header=host, headers=headers)


def _assert_status(response: Response, status: int) -> None:
    assert response.status == status, (response.status, response.text)


def _shared(echo_port: int, rls_port: int) -> list[dict[str, Any]]:
    """The echo backend and its TLS Secret, and the rate limit service as Contour's documentation
    declares it."""
    extension = {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"namespace": "projectcontour", "name": "ratelimit"},
        "spec": {"protocol": "h2c", "services": [{"name": "ratelimit", "port": 80}]},
    }
    return [
        *backend("echo", echo_port),
        *backend("ratelimit", rls_port, namespace="projectcontour"),
        extension,
        TLS_SECRET,
    ]


def _start(workdir: Path, *flags: str) -> tuple[CpxProcess, EnvoyProcess]:
    args = [
        "--rate-limit-service-extension-service",
        "projectcontour/ratelimit",
        "--rate-limit-domain",
        DOMAIN,
    ]
    manifests = workdir / "manifests"
    cpx = CpxProcess(manifests, workdir=workdir, plugins=["httpproxy", "extsvc"], extra_args=[*args, *flags])
    envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy")
    return cpx, envoy


@contextlib.contextmanager
def _running(workdir: Path, *flags: str) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    rls = RateLimitServer(LIMIT).start()
    echo = EchoServer("echo").start()
    manifests = workdir / "manifests"
    write_manifest(manifests, "all.yaml", _shared(echo.port, rls.port))
    cpx, envoy = _start(workdir, *flags)
    stack = Stack(cpx, envoy, rls, echo, manifests)
    try:
        cpx.start()
        envoy.start()
        stack.apply()
        envoy.wait_ready()
        yield stack
    finally:
        envoy.stop()
        cpx.stop()
        echo.stop()
        stack.rls.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Contour's defaults (failOpen false) plus the X-RateLimit headers."""
    with _running(tmp_path_factory.mktemp("ratelimit-e2e"), "--rate-limit-enable-x-ratelimit-headers") as s:
        yield s


@pytest.fixture(scope="module")
def open_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """failOpen and enableResourceExhaustedCode."""
    flags = ("--rate-limit-fail-open", "--rate-limit-enable-resource-exhausted-code")
    with _running(tmp_path_factory.mktemp("ratelimit-open-e2e"), *flags) as s:
        yield s


@contextlib.contextmanager
def _service_down(stack: Stack) -> Iterator[None]:
    """The rate limit service stopped meanwhile (a new one on the same port after)."""
    port = stack.rls.port
    stack.rls.stop()
    try:
        yield
    finally:
        stack.rls = RateLimitServer(LIMIT, port=port).start()


def _global(*descriptors: list[dict[str, Any]]) -> dict[str, Any]:
    return {"global": {"descriptors": [{"entries": entries} for entries in descriptors]}}


def _statuses(stack: Stack, path: str, host: str, count: int, **kwargs: Any) -> list[int]:
    return [stack.http(path, host, **kwargs).status for _ in range(count)]


def test_virtual_host_limit_answers_429_after_the_limit_with_x_ratelimit_headers(stack: Stack) -> None:
    host = "vhost.rl.test"
    policy = _global([{"genericKey": {"key": "vhost", "value": host}}])
    stack.apply(root("vhost", host, route(services=[service("echo")]), rate_limit_policy=policy))
    assert _statuses(stack, "/", host, LIMIT + 2) == [200] * LIMIT + [429, 429]
    assert {seen for seen in stack.rls.service.seen} == {(DOMAIN, ((("vhost", host),),))}
    limited = stack.http("/", host)
    assert limited.headers.get("x-ratelimit-limit", "").startswith(str(LIMIT))
    assert limited.headers.get("x-ratelimit-remaining") == "0"


def test_the_filter_is_on_sni_chains_too(stack: Stack) -> None:
    policy = _global([{"genericKey": {"value": TLS_HOST}}])
    proxy = root(
        "tls",
        TLS_HOST,
        route(services=[service("echo")]),
        tls={"secretName": "tls"},
        rate_limit_policy=policy,
    )
    stack.apply(proxy)
    first = eventually(functools.partial(stack.https, "/", TLS_HOST))  # the HTTPS listener is new
    assert [first.status] + [stack.https("/", TLS_HOST).status for _ in range(LIMIT)] == [200] * LIMIT + [429]
    assert stack.rls.service.seen[0] == (DOMAIN, ((("generic_key", TLS_HOST),),))


def test_the_descriptors_of_each_entry_kind(stack: Stack) -> None:
    host = "kinds.rl.test"
    match = {"headers": [{"name": "x-tier", "exact": "gold"}], "value": "gold-tier"}
    policy = _global(
        [{"genericKey": {"value": "everyone"}}],
        [{"remoteAddress": {}}],
        [{"requestHeader": {"headerName": "x-user", "descriptorKey": "user"}}],
        [{"requestHeaderValueMatch": match}],
        [{"requestHeaderValueMatch": {**match, "expectMatch": False, "value": "not-gold"}}],
    )
    stack.apply(root("kinds", host, route(services=[service("echo")], rate_limit_policy=policy)))
    stack.http("/", host, headers={"x-user": "alice", "x-tier": "gold"})
    stack.http("/", host)
    (_, first), (_, second) = stack.rls.service.seen
    assert first == (
        (("generic_key", "everyone"),),
        (("remote_address", "127.0.0.1"),),
        (("user", "alice"),),
        (("header_match", "gold-tier"),),
    )
    # Without the headers: no `user` descriptor, and the not-matching one instead.
    assert second == (
        (("generic_key", "everyone"),),
        (("remote_address", "127.0.0.1"),),
        (("header_match", "not-gold"),),
    )


def test_a_disabled_route_ignores_the_virtual_hosts_limits(stack: Stack) -> None:
    host = "disabled.rl.test"
    free = route(
        prefix("/free"), services=[service("echo")], rate_limit_policy={"global": {"disabled": True}}
    )
    policy = _global([{"genericKey": {"value": host}}])
    stack.apply(root("disabled", host, free, route(services=[service("echo")]), rate_limit_policy=policy))
    assert _statuses(stack, "/free", host, LIMIT + 2) == [200] * (LIMIT + 2)
    assert stack.rls.service.seen == []
    assert _statuses(stack, "/", host, LIMIT + 1) == [200] * LIMIT + [429]


def test_a_route_limit_counts_that_route_only(stack: Stack) -> None:
    host = "route.rl.test"
    limited = route(
        prefix("/s1"),
        services=[service("echo")],
        rate_limit_policy=_global([{"remoteAddress": {}}, {"genericKey": {"key": "prefix", "value": "/s1"}}]),
    )
    stack.apply(root("route", host, limited, route(prefix("/s2"), services=[service("echo")])))
    assert _statuses(stack, "/s1", host, LIMIT + 1) == [200] * LIMIT + [429]
    assert _statuses(stack, "/s2", host, LIMIT + 1) == [200] * (LIMIT + 1)


GRPC = {"content-type": "application/grpc", "te": "trailers"}


def _limited_host(stack: Stack, host: str) -> None:
    policy = _global([{"genericKey": {"value": host}}])
    stack.apply(
        root(
            host.split(".", maxsplit=1)[0], host, route(services=[service("echo")]), rate_limit_policy=policy
        )
    )


def test_grpc_requests_get_unavailable_or_resource_exhausted(stack: Stack, open_stack: Stack) -> None:
    for served, code in ((stack, "14"), (open_stack, "8")):  # UNAVAILABLE by default, as Envoy
        _limited_host(served, "grpc.rl.test")
        for _ in range(LIMIT):
            served.http("/", "grpc.rl.test", headers=GRPC)
        limited = served.http("/", "grpc.rl.test", headers=GRPC)
        assert limited.headers.get("grpc-status") == code, (limited.status, limited.headers)


def test_without_the_service_requests_fail_closed_by_default_and_pass_with_fail_open(
    stack: Stack, open_stack: Stack
) -> None:
    for served, expected in ((stack, 500), (open_stack, 200)):
        _limited_host(served, "down.rl.test")
        with _service_down(served):
            assert _statuses(served, "/", "down.rl.test", LIMIT + 1) == [expected] * (LIMIT + 1)
        eventually(functools.partial(_served_again, served, "down.rl.test"))


def _served_again(stack: Stack, host: str) -> None:
    _assert_status(stack.http("/", host), 200)
