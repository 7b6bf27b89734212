"""Gateway listeners in a real Envoy: each Gateway address and listener port is bound where
cpx says (127.0.0.N, port + 8000), beside the static listeners.

The routes are a stand-in: this module is also a tiny plugin ("gwprobe", given to ``cpx serve``
as an uninstalled plugin) whose processor answers on every Gateway listener, so that the test
checks the Gateway side alone, whatever HTTPRoutes do.
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cpx import Config, Phase, ProcessorSpec, SourceView, hookimpl
from cpx.dag import DAG, DirectResponse, PathKind, PathMatch, Route
from cpx.testing import eventually

pytestmark = pytest.mark.e2e

GATEWAYS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: contour}
spec: {controllerName: projectcontour.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: a, namespace: default}
spec:
  gatewayClassName: contour
  addresses: [{type: IPAddress, value: 127.0.0.2}]
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: b, namespace: default}
spec:
  gatewayClassName: contour
  addresses: [{type: IPAddress, value: 127.0.0.3}]
  listeners: [{name: http, port: 80, protocol: HTTP}, {name: other, port: 8080, protocol: HTTP}]
"""


class _AnswerOnGatewayListeners:
    def run(self, dag: DAG, source: SourceView) -> None:
        for name in list(dag.listeners):
            if name.startswith("http-"):
                dag.ensure_virtual_host(name, "*").add_route(
                    Route(
                        path=PathMatch(kind=PathKind.PREFIX, value="/"),
                        direct_response=DirectResponse(status_code=200, body=f"served by {name}"),
                    )
                )


def _answering(_config: Config) -> _AnswerOnGatewayListeners:
    return _AnswerOnGatewayListeners()


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(name="gwprobe", factory=_answering, phase=Phase.ROUTES, after=("gatewayapi",))


def _body(url: str) -> str:
    with urllib.request.urlopen(url, timeout=2) as response:
        return str(response.read().decode())


def test_each_gateway_listener_is_bound_on_its_address_and_mapped_port(cpx_envoy: Callable[..., Any]) -> None:
    served = cpx_envoy(GATEWAYS, ["gatewayapi", "gwprobe"], modules=[("gwprobe", sys.modules[__name__])])
    assert eventually(lambda: _body("http://127.0.0.2:8080/"), 10.0) == "served by http-80-127_0_0_2"
    assert eventually(lambda: _body("http://127.0.0.3:8080/"), 10.0) == "served by http-80-127_0_0_3"
    assert eventually(lambda: _body("http://127.0.0.3:16080/"), 10.0) == "served by http-8080-127_0_0_3"
    assert served.rejected_updates() == 0
