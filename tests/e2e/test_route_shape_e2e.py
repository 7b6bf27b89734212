"""The scoped route shape through a real Envoy: requests reach exactly the virtual host they reached
with Contour's single RouteConfiguration (design 0018).

Exact hosts each have a scope of their own; wildcard hosts and the default backend share the
listener's fallback scope; a Lua filter picks the scope per request.  Each case is asserted on the
scoped shape over SotW and delta, and on ``--route-shape single`` as the reference.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from cpx.testing import EchoServer, EnvoyProcess, Response, envoy_binary, eventually, http_get
from cpx.testing.cpxproc import CpxProcess, backend, write_manifest
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

BACKENDS = ("exact", "wild", "default", "other")
WEBSOCKETS = {"projectcontour.io/websocket-routes": "/ws"}


def manifests() -> list[dict[str, Any]]:
    default = ingress("default", [(None, "/", "default")])
    default["spec"] = {"defaultBackend": {"service": {"name": "default", "port": {"number": 80}}}}
    return [
        ingress(
            "exact", [("exact.test", "/app", "exact"), ("exact.test", "/ws", "exact")], annotations=WEBSOCKETS
        ),
        ingress(
            "wild", [("*.wild.test", "/", "wild"), ("*.wild.test", "/ws", "wild")], annotations=WEBSOCKETS
        ),
        ingress("other", [("other.wild.test", "/", "other")]),
        default,
    ]


@attrs.frozen
class Served:
    cpx: CpxProcess
    envoy: EnvoyProcess
    shape: str

    def get(self, host: str, path: str = "/", **kwargs: Any) -> Response:
        return http_get(f"http://127.0.0.1:{self.cpx.http_port}{path}", host_header=host, **kwargs)

    def backend(self, host: str, path: str = "/", **kwargs: Any) -> str | int:
        response = self.get(host, path, **kwargs)
        return response.headers.get("x-backend") or response.status

    def websocket(self, host: str, path: str) -> str:
        sock = socket.create_connection(("127.0.0.1", self.cpx.http_port), timeout=5)
        with connect(f"ws://{host}{path}", sock=sock, open_timeout=5, close_timeout=0.1) as ws:
            ws.send("hello")
            return str(ws.recv(timeout=5))


@pytest.fixture(scope="module", params=["scoped-sotw", "scoped-delta", "single-sotw"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    shape, xds_api = str(request.param).split("-")
    workdir = tmp_path_factory.mktemp(f"shape-{shape}-{xds_api}")
    folder = workdir / "manifests"
    servers = [EchoServer(name) for name in BACKENDS]
    for server in servers:
        server.start()
    try:
        services = [obj for server in servers for obj in backend(server.name, server.port)]
        write_manifest(folder, "all.yaml", [*services, *manifests()])
        cpx = CpxProcess(folder, workdir, extra_args=["--route-shape", shape])
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=Path(workdir) / "envoy", xds_api=xds_api)
        try:
            cpx.start()
            envoy.start()
            envoy.wait_ready()
            stack = Served(cpx, envoy, shape)
            eventually(lambda: _is(stack.backend("exact.test", "/app"), "exact"), timeout=15)
            yield stack
        finally:
            envoy.stop()
            cpx.stop()
    finally:
        for server in servers:
            server.stop()


def _is(found: object, expected: object) -> None:
    assert found == expected


def test_each_host_reaches_its_virtual_host(served: Served) -> None:
    assert served.backend("exact.test", "/app") == "exact"
    assert served.backend("foo.wild.test") == "wild"
    assert served.backend("other.wild.test") == "other"  # exact beats the wildcard
    assert served.backend("nowhere.test") == "default"
    assert served.backend("") == "default"


def test_host_case_and_port_do_not_matter(served: Served) -> None:
    assert served.backend("EXACT.Test:8080", "/app") == "exact"
    assert served.backend("Foo.WILD.test:1234") == "wild"


def test_a_path_an_exact_host_lacks_does_not_fall_back(served: Served) -> None:
    # exact.test has no "/" route; the default backend must not answer for it (Envoy: 404).
    assert served.backend("exact.test", "/elsewhere") == 404


def test_a_client_cannot_choose_the_scope_and_never_sees_the_header(served: Served) -> None:
    spoofed = {"x-cpx-scope": "ingress_http/exact.test"}
    assert served.backend("nowhere.test", "/app", headers=spoofed) == "default"
    echoed = json.loads(served.get("exact.test", "/app", headers=spoofed).body)
    if served.shape == "scoped":  # the single shape has no such header: the client's passes through
        assert "x-cpx-scope" not in echoed["headers"]


@pytest.mark.parametrize("host", ["exact.test", "foo.wild.test"])
def test_websocket_upgrades_only_where_the_route_allows(served: Served, host: str) -> None:
    assert served.websocket(host, "/ws") == "hello"
    refused_path = "/app" if host == "exact.test" else "/"
    with pytest.raises(InvalidStatus) as refused:
        served.websocket(host, refused_path)
    assert refused.value.response.status_code == 403
