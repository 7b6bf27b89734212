"""The CustomResourceDefinition manifest: generated from crd.py, current, and well-formed."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
import yaml

from cpx_httpproxy import crd, schema
from cpx_httpproxy.kinds import HTTPPROXY

MANIFEST = Path(__file__).resolve().parent.parent / "crd" / "httpproxy.yaml"


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    return loaded


def _schemas(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (sub)schema of an OpenAPI schema, with its field path."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _schemas(sub, f"{path}.{name}")
    if "items" in node:
        yield from _schemas(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _schemas(node["additionalProperties"], f"{path}[*]")


def test_manifest_is_current() -> None:
    assert MANIFEST.read_text(encoding="utf-8") == crd.render(), (
        "crd/httpproxy.yaml is stale: "
        "run `python -m cpx_httpproxy.crd > plugins/httpproxy/crd/httpproxy.yaml`"
    )


def test_module_renders_the_manifest() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cpx_httpproxy.crd"],
        check=True,
        capture_output=True,
        text=True,
        encoding="utf-8",
    ).stdout
    assert out == crd.render()


def test_names_and_scope(manifest: dict[str, Any]) -> None:
    assert manifest["apiVersion"] == "apiextensions.k8s.io/v1"
    assert manifest["kind"] == "CustomResourceDefinition"
    assert manifest["metadata"]["name"] == "httpproxies.projectcontour.io"
    spec = manifest["spec"]
    assert spec["group"] == HTTPPROXY.group and spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "HTTPProxy",
        "listKind": "HTTPProxyList",
        "plural": "httpproxies",
        "singular": "httpproxy",
        "shortNames": ["proxy", "proxies"],
    }


def test_version_columns_and_subresource(manifest: dict[str, Any]) -> None:
    [version] = manifest["spec"]["versions"]
    assert version["name"] == "v1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"], c["jsonPath"], c["type"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("FQDN", ".spec.virtualhost.fqdn", "string"),
        ("TLS Secret", ".spec.virtualhost.tls.secretName", "string"),
        ("Status", ".status.currentStatus", "string"),
        ("Status Description", ".status.description", "string"),
    ]


def test_schema_is_the_python_one(manifest: dict[str, Any]) -> None:
    [version] = manifest["spec"]["versions"]
    assert version["schema"]["openAPIV3Schema"] == crd.OPENAPI_SCHEMA


def test_schema_is_structural() -> None:
    # Every node has a type (metadata and additionalProperties maps included), so the API server
    # accepts it as a structural schema and can prune and default.
    for path, node in _schemas(crd.OPENAPI_SCHEMA):
        assert "type" in node, path
        for name in node.get("required", ()):
            assert name in node["properties"], f"{path}: required {name} is not a property"


def test_key_facts() -> None:
    nodes = dict(_schemas(crd.OPENAPI_SCHEMA))
    assert crd.OPENAPI_SCHEMA["required"] == ["metadata", "spec"]
    assert nodes[".spec.virtualhost"]["required"] == ["fqdn"]
    assert nodes[".spec.routes[].services[].port"]["minimum"] == 1
    assert nodes[".spec.routes[].services[].port"]["maximum"] == 65535
    assert nodes[".spec.routes[].services[].weight"]["minimum"] == 0
    assert nodes[".spec.routes[].directResponsePolicy.statusCode"]["minimum"] == 200
    assert nodes[".spec.routes[].requestRedirectPolicy.statusCode"]["enum"] == [301, 302, 303, 307, 308]
    assert nodes[".spec.routes[].requestRedirectPolicy.statusCode"]["default"] == 302
    assert nodes[".spec.virtualhost.rateLimitPolicy.local.responseStatusCode"]["maximum"] == 599
    assert nodes[".spec.tcpproxy.services[].protocol"]["enum"] == ["h2", "h2c", "tls"]
    assert nodes[".spec.virtualhost.authorization.serviceType"]["default"] == "grpc"
    assert nodes[".status"]["default"] == {
        "currentStatus": "NotReconciled",
        "description": "Waiting for controller",
    }
    conditions = nodes[".status.conditions"]
    assert conditions["x-kubernetes-list-type"] == "map" and conditions["x-kubernetes-list-map-keys"] == [
        "type"
    ]


def test_cel_rules_where_contour_has_them() -> None:
    rules = {
        path: [r["message"] for r in node["x-kubernetes-validations"]]
        for path, node in _schemas(crd.OPENAPI_SCHEMA)
        if "x-kubernetes-validations" in node
    }
    assert rules[".spec.virtualhost.authorization"] == [
        "httpSettings can only be set when serviceType is 'http'"
    ]
    assert rules[".spec.virtualhost.jwtProviders[]"] == ["exactly one of remoteJWKS or localJWKS must be set"]
    assert rules[".spec.routes[].services[].validation"] == ["subjectNames[0] must equal subjectName if set"]
    assert (
        rules[".spec.virtualhost.jwtProviders[].remoteJWKS.validation"]
        == rules[".spec.routes[].services[].validation"]
    )


def test_every_cel_rule_is_implemented_in_python() -> None:
    for path, node in _schemas(crd.OPENAPI_SCHEMA):
        for rule in node.get("x-kubernetes-validations", ()):
            assert rule["rule"] in schema.CEL_RULES, f"{path}: no Python implementation of {rule['rule']!r}"


def test_patterns_compile_as_re2_and_ecma() -> None:
    patterns = {node["pattern"] for _, node in _schemas(crd.OPENAPI_SCHEMA) if "pattern" in node}
    assert len(patterns) >= 8
    for pattern in patterns:
        re2.compile(pattern)
        re.compile(pattern)  # no RE2-only syntax sneaked in either


@pytest.mark.parametrize(
    ("fqdn", "ok"),
    [
        ("example.com", True),
        ("*.example.com", True),
        ("a-b.c0.example", True),
        ("Example.com", False),
        ("foo.*.com", False),
        ("*example.com", False),
        ("-bad.example.com", False),
        ("example.com.", False),
    ],
)
def test_fqdn_pattern(fqdn: str, ok: bool) -> None:
    assert (re2.search(crd.FQDN, fqdn) is not None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("1s", True),
        ("1.5h", True),
        ("300ms", True),
        ("2µs", True),
        ("1h30m", True),
        ("infinity", True),
        ("infinite", True),
        ("10", False),
        ("1d", False),
        ("-1s", False),
    ],
)
def test_duration_pattern(value: str, ok: bool) -> None:
    assert (re2.search(crd.DURATION_OR_INFINITY, value) is not None) is ok


def test_manifest_has_no_yaml_aliases() -> None:
    text = MANIFEST.read_text(encoding="utf-8")
    assert "&id" not in text and "*id" not in text
    assert text.startswith("# Generated by `python -m cpx_httpproxy.crd`")
