"""Upstream GatewayHTTPListenerIsolation (conformance/tests/gateway-http-listener-isolation.go).

Listeners without hostname, ``*.example.com``, ``*.foo.example.com`` and ``abc.foo.example.com``
on one port: a request is served only by the routes of the most specific listener matching its
Host, else 404 (even when a broader listener's route matches the path); the same with route
hostnames intersecting the listeners'.
"""

from __future__ import annotations

import pytest

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, Conformance, Expect

MANIFEST = (
    "gateway-http-listener-isolation.yaml",
    "gateway-http-listener-isolation-with-hostname-intersection.yaml",
)
PATHS = ("/empty-hostname", "/wildcard-example-com", "/wildcard-foo-example-com", "/abc-foo-example-com")
# Host -> the one path (listener) that serves it.
OWNER = {
    "bar.com": "/empty-hostname",
    "bar.example.com": "/wildcard-example-com",
    "bar.foo.example.com": "/wildcard-foo-example-com",
    "abc.foo.example.com": "/abc-foo-example-com",
}


@pytest.mark.parametrize("suffix", ["", "-with-hostname-intersection"])
def test_gateway_http_listener_isolation(upstream: Conformance, suffix: str) -> None:
    gateway = (INFRA_NS, f"http-listener-isolation{suffix}")
    routes = [(INFRA_NS, f"attaches-to{path.replace('/', '-')}{suffix}") for path in PATHS]
    upstream.wait_routes_accepted(gateway, *routes)
    upstream.expect_all(
        gateway,
        [
            Expect(host=host, path=path, backend=INFRA_V1, namespace=INFRA_NS)
            if OWNER[host] == path
            else Expect(host=host, path=path, status=(404,))
            for host in OWNER
            for path in PATHS
        ],
    )
