"""The end-to-end harness itself: a static Envoy in front of the loopback backends."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from websockets.sync.client import connect

from cpx.testing import (
    EchoServer,
    EnvoyError,
    EnvoyProcess,
    TCPEchoServer,
    default_ca,
    free_port,
    http_get,
    https_get,
    issue_cert,
    make_tls_secret,
    wait_for_port,
)
from cpx.xds.envoy.bootstrap import bootstrap_config

HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"


def _static_proxy(listen_port: int, backend_port: int) -> dict[str, Any]:
    """Bootstrap of an Envoy without xDS: one HTTP listener routing everything to one backend."""
    listener = {
        "name": "ingress_http",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": listen_port}},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": {
                            "@type": HCM,
                            "stat_prefix": "ingress_http",
                            "upgrade_configs": [{"upgrade_type": "websocket"}],
                            "route_config": {
                                "virtual_hosts": [
                                    {
                                        "name": "all",
                                        "domains": ["*"],
                                        "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "echo"}}],
                                    }
                                ]
                            },
                            "http_filters": [
                                {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER}}
                            ],
                        },
                    }
                ]
            }
        ],
    }
    cluster = {
        "name": "echo",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": "echo",
            "endpoints": [
                {
                    "lb_endpoints": [
                        {
                            "endpoint": {
                                "address": {
                                    "socket_address": {"address": "127.0.0.1", "port_value": backend_port}
                                }
                            }
                        }
                    ]
                }
            ],
        },
    }
    return bootstrap_config(admin_port=0, xds=False, static_listeners=[listener], static_clusters=[cluster])


@pytest.mark.e2e
def test_static_envoy_proxies_http_and_websocket(
    envoy_factory: Callable[..., EnvoyProcess], echo_server: EchoServer
) -> None:
    port = free_port()
    envoy = envoy_factory(_static_proxy(port, echo_server.port))
    envoy.wait_ready()
    wait_for_port("127.0.0.1", port)

    response = http_get(f"http://127.0.0.1:{port}/hello?x=1", host_header="example.com")
    assert response.status == 200
    assert response.headers["x-backend"] == "echo"
    echoed = response.json()
    assert echoed["server"] == "echo"
    assert (echoed["method"], echoed["path"], echoed["query"]) == ("GET", "/hello", {"x": "1"})
    assert echoed["headers"]["host"] == "example.com"
    assert "x-request-id" in echoed["headers"]  # added by Envoy: the request went through it
    assert envoy.wait_stat("cluster.echo.upstream_rq_200", lambda v: v >= 1) >= 1

    with connect(f"ws://127.0.0.1:{port}/ws") as ws:
        ws.send("through envoy")
        assert ws.recv(timeout=5) == "through envoy"

    listeners = envoy.config_dump("static_listeners")["configs"]
    assert [item["listener"]["name"] for item in listeners] == ["ingress_http"]
    assert envoy.stop() == 0
    assert not envoy.running


@pytest.mark.e2e
def test_envoy_start_failure_reports_the_log(
    envoy_factory: Callable[..., EnvoyProcess], echo_server: EchoServer
) -> None:
    # The listener port is taken by the echo server, so Envoy exits at start-up.
    with pytest.raises(EnvoyError, match="exited with status"):
        envoy_factory(_static_proxy(echo_server.port, echo_server.port))


def test_echo_endpoints(echo_server: EchoServer) -> None:
    started = time.monotonic()
    assert http_get(f"{echo_server.url}/slow?ms=300").status == 200
    assert time.monotonic() - started >= 0.3

    assert http_get(f"{echo_server.url}/status/418").status == 418
    assert http_get(f"{echo_server.url}/status/204").body == b""

    flaky = [http_get(f"{echo_server.url}/flaky?key=a&fail=2").status for _ in range(3)]
    assert flaky == [503, 503, 200]
    assert http_get(f"{echo_server.url}/flaky?key=b&fail=2").status == 503  # keys count separately

    response = http_get(f"{echo_server.url}/x?response_header=set-cookie:a%3D1", method="POST", body=b"hi")
    assert response.headers["set-cookie"] == "a=1"
    assert (response.json()["method"], response.json()["body"]) == ("POST", "hi")
    assert [r["path"] for r in echo_server.requests][-1] == "/x"


def test_websocket_echo_direct(echo_server: EchoServer) -> None:
    with connect(f"ws://127.0.0.1:{echo_server.port}/chat") as ws:
        assert ws.response is not None
        assert ws.response.headers["x-backend"] == "echo"
        ws.send("hello")
        assert ws.recv(timeout=5) == "hello"
        ws.send(b"\x00\x01")
        assert ws.recv(timeout=5) == b"\x00\x01"


def test_tls_echo_and_sni() -> None:
    pair = issue_cert(["backend.test"])
    ca_pem = default_ca().cert_pem
    with EchoServer("secure", tls=(pair.cert_pem, pair.key_pem)) as server:
        response = https_get(f"{server.url}/", sni="backend.test", ca_pem=ca_pem)
        assert response.status == 200
        assert response.json()["tls"]["sni"] == "backend.test"
        assert response.peer_dns_names() == ["backend.test"]
        # No SNI at all (a client of a fallback certificate), without verification.
        assert https_get(f"{server.url}/", sni=None, ca_pem=None).json()["tls"]["sni"] is None


def test_make_tls_secret() -> None:
    secret, ca_pem = make_tls_secret("default", "site", ["www.example.com"])
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"] == {
        "name": "site",
        "namespace": "default",
        "labels": {"app.kubernetes.io/managed-by": "cpx"},
    }
    assert set(secret["data"]) == {"tls.crt", "tls.key"}
    assert ca_pem == default_ca().cert_pem.decode()


def test_tcp_echo(tcp_echo_server: TCPEchoServer) -> None:
    with socket.create_connection(tcp_echo_server.address, timeout=5) as sock:
        sock.sendall(b"ping")
        assert sock.recv(16) == b"ping"
