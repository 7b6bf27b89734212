"""Session persistence through the real ``cpx serve`` and a real Envoy: a Service with two
endpoints; without the session cookie (or header) requests spread over both, with it every request
goes to the endpoint that set it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cpx.testing import EchoServer, endpoint_slice, eventually, http_get, service

from cpx_gatewayapi.testing.objects import gateway_yaml

pytestmark = pytest.mark.e2e

ADDRESS = "127.0.0.81"
URL = f"http://{ADDRESS}:8080"
REQUESTS = 20

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /cookie}}]
    sessionPersistence: {sessionName: sticky}
    backendRefs: [{name: pair, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /header}}]
    sessionPersistence: {type: Header, sessionName: x-session}
    backendRefs: [{name: pair, port: 80}]
"""


@pytest.fixture
def pair() -> Iterator[tuple[EchoServer, EchoServer]]:
    with EchoServer("one") as one, EchoServer("two") as two:
        yield one, two


def _objects(one: EchoServer, two: EchoServer) -> list[dict[str, Any]]:
    slices = [endpoint_slice("pair", s.port, name=f"pair-{s.name}") for s in (one, two)]
    return [service("pair"), *slices]


def test_a_session_sticks_to_one_endpoint(
    cpx_envoy: Callable[..., Any], pair: tuple[EchoServer, EchoServer]
) -> None:
    one, two = pair
    served = cpx_envoy(gateway_yaml(ADDRESS) + "---\n" + ROUTE, plugins=["gatewayapi"])
    served.apply(_objects(one, two))

    def get(path: str, headers: dict[str, str] | None = None) -> Any:
        return http_get(URL + path, host_header="example.com", headers=headers, timeout=2.0)

    def both_serve() -> None:
        # Round robin over two endpoints: the first requests already reach both.
        for _ in range(4):
            assert get("/cookie").status == 200
        assert one.requests and two.requests

    eventually(both_serve, 20.0)
    first = get("/cookie")
    cookie = first.headers["set-cookie"].split(";")[0]
    assert cookie.startswith("sticky=")
    # The header session: Envoy returns its value in the response header, the client sends it back.
    session = {"x-session": get("/header").headers["x-session"]}
    for path, headers in (("/cookie", {"cookie": cookie}), ("/header", session)):
        before = len(one.requests), len(two.requests)
        for _ in range(REQUESTS):
            assert get(path, headers).status == 200
        grew = sorted((len(one.requests) - before[0], len(two.requests) - before[1]))
        assert grew == [0, REQUESTS], (path, grew)
    assert served.rejected_updates() == 0
