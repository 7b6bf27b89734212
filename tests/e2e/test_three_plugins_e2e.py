"""Ingress, HTTPProxy and Gateway API side by side on one Envoy listener, as Contour serves them.

A Gateway on the static listener's address and port (its listener port + 8000) shares
``ingress_http``: an Ingress host, an HTTPProxy host and an HTTPRoute host answer on one port.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cpx_gatewayapi.testing.objects import gateway_yaml

pytestmark = pytest.mark.e2e

KUBE_OBJECTS = """
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing, namespace: default}
spec:
  rules:
  - host: ingress.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: proxy, namespace: default}
spec:
  virtualhost: {fqdn: proxy.example.com}
  routes:
  - services: [{name: echo, port: 80}]
"""


def gateway_objects(gateway_port: int) -> str:
    listener = {"name": "http", "port": gateway_port, "protocol": "HTTP"}
    return (
        gateway_yaml("127.0.0.1", [listener])
        + """---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [route.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: echo, port: 80}]
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: x-served-by, value: httproute}]}
"""
    )


def test_ingress_httpproxy_and_httproute_share_one_listener(cpx_envoy: Callable[..., Any]) -> None:
    served = cpx_envoy(KUBE_OBJECTS, ["ingress", "httpproxy", "gatewayapi"])
    http_port = served.cpx.http_port
    assert http_port - 8000 >= 1024, "the static listener's port must be a Gateway port + 8000"
    served.apply(gateway_objects(http_port - 8000), name="gateway.yaml")
    route = served.wait_served("route.example.com")
    assert route.headers["x-served-by"] == "httproute"
    for host in ("ingress.example.com", "proxy.example.com"):
        answer = served.wait_served(host)
        assert "x-served-by" not in answer.headers
    assert served.rejected_updates() == 0
    # One Envoy listener serves them all: the Gateway's joined the static one.
    listeners = served.envoy.admin_get("/listeners")[1].split()
    http = [name for name in listeners if name.startswith(("ingress_http", "http-"))]
    assert http == [f"ingress_http::127.0.0.1:{http_port}"]
