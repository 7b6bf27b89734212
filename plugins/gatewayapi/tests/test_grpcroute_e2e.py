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
from cpx.testing import backend, eventually

from .grpcecho import call, grpc_echo

pytestmark = pytest.mark.e2e

ADDRESS = "127.0.0.78"
TARGET = f"{ADDRESS}:8080"
AUTHORITY = "grpc.example.com"

OBJECTS = f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: contour}}
spec: {{controllerName: projectcontour.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress, value: "{ADDRESS}"}}]
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: g, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{AUTHORITY}]
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


def code_of(method: str, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    try:
        call(TARGET, method, AUTHORITY, metadata)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_grpcroute_routes_calls_by_method(cpx_envoy: Callable[..., Any]) -> None:
    with ExitStack() as stack:
        ports = {name: stack.enter_context(grpc_echo(name)) for name in ("grpc-v1", "grpc-v2")}
        services = [obj for name, port in ports.items() for obj in backend(name, port)]
        served = cpx_envoy(OBJECTS + "---\n" + yaml.safe_dump_all(services), plugins=["gatewayapi"])

        first = eventually(lambda: call(TARGET, "/echo.Echo/Echo", AUTHORITY), 20.0)
        assert first["pod"] == "grpc-v1"
        assert first["metadata"]["x-added"] == ["yes"]
        assert call(TARGET, "/echo.Echo/EchoTwo", AUTHORITY)["pod"] == "grpc-v2"
        # A header match: any method with the header set.
        answer = call(TARGET, "/echo.Echo/EchoThree", AUTHORITY, (("version", "two"),))
        assert (answer["pod"], answer["method"]) == ("grpc-v2", "/echo.Echo/EchoThree")
        # No route: Envoy's 404, which gRPC clients read as UNIMPLEMENTED (the backend has the method).
        assert code_of("/echo.Echo/EchoThree") == grpc.StatusCode.UNIMPLEMENTED
        # A rule without a usable backend: 503, UNAVAILABLE as the spec asks.
        assert code_of("/echo.Echo/Broken") == grpc.StatusCode.UNAVAILABLE
        assert served.rejected_updates() == 0
