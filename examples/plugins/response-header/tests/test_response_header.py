"""The example plugin, tested only through cpx's pytest fixtures (as its own repository would)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cpx_example_header
import pytest

from cpx.testing import private_imports

OBJECTS = """
kind: Ingress
apiVersion: networking.k8s.io/v1
metadata: {namespace: default, name: web}
spec:
  rules:
  - host: web.example.com
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]
---
kind: Service
apiVersion: v1
metadata: {namespace: default, name: echo}
spec: {ports: [{port: 80}]}
"""


@pytest.mark.parametrize(
    ("options", "header"),
    [
        (None, {"key": "x-served-by", "value": "cpx"}),
        ({"response_header_value": "edge"}, {"key": "x-served-by", "value": "edge"}),
    ],
)
def test_every_route_gets_the_header(cpx_translate: Any, options: Any, header: dict[str, str]) -> None:
    modules = [("response-header", cpx_example_header)]
    result = cpx_translate(OBJECTS, ["ingress"], modules=modules, options=options)
    [route] = result.routes("ingress_http")
    assert route.response_headers.set[-1].value == header["value"]
    [config] = [r for r in result.envoy_json()["routes"] if r["name"] == "ingress_http"]
    [vhost] = config["virtualHosts"]
    assert header in [h["header"] for h in vhost["routes"][0]["responseHeadersToAdd"]]


def test_it_imports_only_the_public_api() -> None:
    assert private_imports(Path(cpx_example_header.__file__).parent) == []
