"""An HTTPRoute on a Gateway at its own loopback address, through the real ``cpx serve`` and a
real Envoy: the harness contract (Gateway address 127.0.0.N, Envoy on listener port + 8000)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cpx.testing import eventually, http_get

from cpx_gatewayapi.testing.objects import gateway_yaml

pytestmark = pytest.mark.e2e

ADDRESS = "127.0.0.77"

OBJECTS = (
    gateway_yaml(ADDRESS)
    + """
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /v2}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {add: [{name: x-added, value: yes}]}
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: Exact, value: /missing}}]
    backendRefs: [{name: nowhere, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /half}}]
    backendRefs: [{name: echo, port: 80}, {name: nowhere, port: 80}]
"""
)
REQUESTS = 200


def test_httproute_served_on_the_gateway_address(cpx_envoy: Callable[..., Any]) -> None:
    served = cpx_envoy(OBJECTS, plugins=["gatewayapi"])
    url = f"http://{ADDRESS}:8080"

    def answered(path: str, status: int) -> Any:
        response = http_get(url + path, host_header="example.com", timeout=2.0)
        assert response.status == status, f"{path}: {response.status}"
        return response

    response = eventually(lambda: answered("/v2/x", 200), 20.0)
    assert b"x-added" in response.body.lower()
    answered("/v2example", 404)  # PathPrefix compares whole segments
    answered("/missing", 500)  # a rule whose only backend is missing answers 500
    # Equal weights, one backend missing: Envoy answers its half 500 itself, the echo the rest.
    statuses = [
        http_get(url + "/half", host_header="example.com", timeout=2.0).status for _ in range(REQUESTS)
    ]
    assert set(statuses) == {200, 500}
    assert REQUESTS * 0.3 < statuses.count(500) < REQUESTS * 0.7, statuses.count(500)
    assert served.rejected_updates() == 0
