"""GRPCRoutes through the real ``cpx serve`` and a real Envoy to real gRPC servers on loopback:
method matches pick the backend, metadata is modified, an unmatched method is UNIMPLEMENTED and
one whose backend is missing UNAVAILABLE."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import grpc
import pytest
import yaml
from cpx.testing import backend, eventually, make_tls_secret

from cpx_gatewayapi.testing.objects import gateway_yaml

from .grpcecho import call, free_loopback, grpc_echo, unary

pytestmark = pytest.mark.e2e

AUTHORITY = "grpc.example.com"

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: g, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{authority}]
  rules:
  - matches: [{{method: {{service: echo.Echo, method: Echo}}}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {{set: [{{name: x-added, value: "yes"}}]}}
    backendRefs: [{{name: grpc-v1, port: 80}}]
  - matches:
    - method: {{service: echo.Echo, method: EchoTwo}}
    - headers: [{{name: version, value: two}}]
    backendRefs: [{{name: grpc-v2, port: 80}}]
  - matches: [{{method: {{service: echo.Echo, method: Broken}}}}]
    backendRefs: [{{name: nowhere, port: 80}}]
"""


def code_of(target: str, method: str) -> grpc.StatusCode:
    try:
        call(target, method, AUTHORITY)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_grpcroute_routes_calls_by_method(cpx_envoy: Callable[..., Any]) -> None:
    with ExitStack() as stack:
        ports = {name: stack.enter_context(grpc_echo(name)) for name in ("grpc-v1", "grpc-v2")}
        services = [obj for name, port in ports.items() for obj in backend(name, port)]
        address = free_loopback(8080)
        objects = gateway_yaml(address) + "---\n" + ROUTE.format(authority=AUTHORITY)
        served = cpx_envoy(objects + "---\n" + yaml.safe_dump_all(services), plugins=["gatewayapi"])
        target = f"{address}:8080"

        first = eventually(lambda: call(target, "/echo.Echo/Echo", AUTHORITY), 20.0)
        assert first["pod"] == "grpc-v1"
        assert first["metadata"]["x-added"] == ["yes"]
        assert call(target, "/echo.Echo/EchoTwo", AUTHORITY)["pod"] == "grpc-v2"
        # A header match: any method with the header set.
        answer = call(target, "/echo.Echo/EchoThree", AUTHORITY, (("version", "two"),))
        assert (answer["pod"], answer["method"]) == ("grpc-v2", "/echo.Echo/EchoThree")
        # No route: Envoy's 404, which gRPC clients read as UNIMPLEMENTED (the backend has the method).
        assert code_of(target, "/echo.Echo/EchoThree") == grpc.StatusCode.UNIMPLEMENTED
        # A rule without a usable backend: 503, UNAVAILABLE as the spec asks.
        assert code_of(target, "/echo.Echo/Broken") == grpc.StatusCode.UNAVAILABLE
        assert served.rejected_updates() == 0


TLS_OBJECTS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: contour}}
spec: {{controllerName: projectcontour.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: tls, namespace: default}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress, value: "{address}"}}]
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    hostname: {authority}
    tls: {{certificateRefs: [{{name: cert}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: g, namespace: default}}
spec:
  parentRefs: [{{name: tls}}]
  rules:
  - backendRefs: [{{name: grpc-v1, port: 80}}]
"""


def test_grpcroute_on_an_https_listener(cpx_envoy: Callable[..., Any]) -> None:
    """gRPC over TLS: the listener must offer h2 through ALPN, as the spec requires."""
    secret, ca_pem = make_tls_secret("default", "cert", [AUTHORITY])
    with grpc_echo("grpc-v1") as port:
        objects = [secret, *backend("grpc-v1", port)]
        address = free_loopback(8443)
        text = TLS_OBJECTS.format(address=address, authority=AUTHORITY)
        served = cpx_envoy(text + "---\n" + yaml.safe_dump_all(objects), plugins=["gatewayapi"])
        credentials = grpc.ssl_channel_credentials(root_certificates=ca_pem.encode())
        options = [("grpc.ssl_target_name_override", AUTHORITY), ("grpc.default_authority", AUTHORITY)]

        def secure_call() -> dict[str, Any]:
            with grpc.secure_channel(f"{address}:8443", credentials, options=options) as channel:
                return unary(channel, "/echo.Echo/Echo")

        assert eventually(secure_call, 20.0)["pod"] == "grpc-v1"
        assert served.rejected_updates() == 0
