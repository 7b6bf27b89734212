"""The example plugin, tested only through cpx's public testing API (as its own repository would):
the ``cpx_translate`` and ``cpx_envoy`` fixtures and :mod:`cpx.testing`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cpx_example_header
import pytest

from cpx.testing import private_imports, uninstalled_plugins_env

FILTER = "envoy.filters.http.header_mutation"
PLUGIN = [("response-headers", cpx_example_header)]
INGRESS = """
kind: Ingress
apiVersion: networking.k8s.io/v1
metadata: {namespace: default, name: web}
spec:
  rules:
  - host: web.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
  - host: other.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
"""
SERVICE = """
---
kind: Service
apiVersion: v1
metadata: {namespace: default, name: echo}
spec: {ports: [{port: 80}]}
"""
HEADERS = """
---
kind: ResponseHeaders
apiVersion: examples.cpx.dev/v1alpha1
metadata: {namespace: default, name: served-by}
spec: {host: web.example.com, set: {x-served-by: cpx, x-team: edge}}
---
kind: ResponseHeaders
apiVersion: examples.cpx.dev/v1alpha1
metadata: {namespace: default, name: nowhere}
spec: {host: missing.example.com, set: {x-lost: "yes"}}
"""


def _vhost(result: Any, name: str) -> dict[str, Any]:
    return dict(result.virtual_hosts()[name])


def test_the_named_host_gets_the_headers_through_the_filter(cpx_translate: Any) -> None:
    result = cpx_translate(INGRESS + SERVICE + HEADERS, ["ingress"], modules=PLUGIN)
    envoy = result.envoy_json()
    [route] = _vhost(result, "web.example.com")["routes"]
    mutations = route["typedPerFilterConfig"][FILTER]["mutations"]["responseMutations"]
    assert [m["append"]["header"] for m in mutations] == [
        {"key": "x-served-by", "value": "cpx"},
        {"key": "x-team", "value": "edge"},
    ]
    [other] = _vhost(result, "other.example.com")["routes"]
    assert FILTER not in other.get("typedPerFilterConfig", {})
    # The filter sits in the connection manager, before the router.
    [listener] = [ls for ls in envoy["listeners"] if ls["name"] == "ingress_http"]
    manager = listener["filterChains"][0]["filters"][0]["typedConfig"]
    names = [f["name"] for f in manager["httpFilters"]]
    assert names.index(FILTER) < names.index("router") == len(names) - 1


def test_its_kind_gets_a_status(cpx_translate: Any) -> None:
    result = cpx_translate(INGRESS + SERVICE + HEADERS, ["ingress"], modules=PLUGIN)
    [ok] = result.status("ResponseHeaders", "served-by")["conditions"]
    assert (ok["type"], ok["status"], ok["reason"]) == ("Accepted", "True", "Attached")
    [missing] = result.status("ResponseHeaders", "nowhere")["conditions"]
    assert (missing["status"], missing["reason"]) == ("False", "NoVirtualHost")


@pytest.mark.e2e
def test_envoy_adds_the_headers(cpx_envoy: Any) -> None:
    served = cpx_envoy(INGRESS + HEADERS, ["ingress", "response-headers"], modules=PLUGIN)
    response = served.wait_served("web.example.com")
    assert (response.headers["x-served-by"], response.headers["x-team"]) == ("cpx", "edge")
    assert "x-served-by" not in served.wait_served("other.example.com").headers
    assert served.rejected_updates() == 0


def test_cpx_plugins_list_shows_what_it_contributes(tmp_path: Path) -> None:
    env = {**os.environ, **uninstalled_plugins_env(tmp_path, PLUGIN)}
    command = [sys.executable, "-m", "cpx", "plugins", "list", "-o", "json"]
    listing = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=60)
    [plugin] = [p for p in json.loads(listing.stdout) if p["name"] == "response-headers"]
    text = json.dumps(plugin)
    for contribution in ("ResponseHeaders", "response-headers", FILTER):
        assert contribution in text


def test_it_imports_only_the_public_api() -> None:
    assert private_imports(Path(cpx_example_header.__file__).parent) == []


def test_a_plugin_importing_a_private_module_fails_the_contract(tmp_path: Path) -> None:
    package = tmp_path / "cpx_sneaky"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from cpx import hookimpl\nfrom cpx.sources.cache import SourceCache\n"
    )
    assert private_imports(package) == ["cpx_sneaky/__init__.py: cpx.sources.cache"]


def test_headers_envoy_would_refuse_leave_out_their_object_not_the_route(cpx_translate: Any) -> None:
    bad = """
---
kind: ResponseHeaders
apiVersion: examples.cpx.dev/v1alpha1
metadata: {namespace: default, name: bad}
spec: {host: web.example.com, set: {":status": "200"}}
"""
    result = cpx_translate(INGRESS + SERVICE + bad, ["ingress"], modules=PLUGIN)
    [route] = _vhost(result, "web.example.com")["routes"]  # the Ingress is still served
    assert FILTER not in route.get("typedPerFilterConfig", {})
    [problem] = result.status("ResponseHeaders", "bad")["cpx"]["problems"]
    assert problem["reason"] == "EnvoyConstraintViolated" and ":-prefixed" in problem["message"]
    assert "problems" not in result.status("Ingress", "web").get("cpx", {})
