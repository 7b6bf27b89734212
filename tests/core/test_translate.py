"""``cpx translate``: the output document and the exit codes, through the real command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from cpx.cli import cli
from cpx.offline import REDACTED
from cpx.testing import make_tls_secret
from cpx.testing.cpxproc import backend, write_manifest
from cpx_ingress.testing import simple_ingress as ingress

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
XDS_KEYS = {"listeners", "scoped-routes", "routes", "clusters", "endpoints", "secrets"}


pytestmark = pytest.mark.usefixtures("keep_logging")


def translate(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["translate", "--plugins", "ingress", *map(str, args)])


def translate_json(*args: str | Path) -> dict[str, Any]:
    result = translate(*args, "-o", "json")
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def by_kind(doc: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in doc["objects"] if o["kind"] == kind}


def problems(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj.get("status", {}).get("cpx", {}).get("problems", []))


def test_quickstart() -> None:
    doc = translate_json(QUICKSTART)
    assert set(doc) == {"objects", "errors", "xds"}
    assert doc["errors"] == []
    assert {(o["kind"], o["metadata"]["name"]) for o in doc["objects"]} == {
        ("Service", "echo"), ("EndpointSlice", "echo-1"), ("Ingress", "echo"),
        ("Service", "hello"), ("EndpointSlice", "hello-1"), ("Ingress", "hello"),
    }  # fmt: skip
    for obj in doc["objects"]:
        assert obj["metadata"]["namespace"] == "default"
        assert set(obj) <= {"apiVersion", "kind", "metadata", "status"}
    for ingress_obj in by_kind(doc, "Ingress").values():
        assert "status" in ingress_obj  # Ingresses get a status; their problems would be in it
        assert problems(ingress_obj) == []

    xds = doc["xds"]
    assert set(xds) == XDS_KEYS
    assert [listener["name"] for listener in xds["listeners"]] == ["ingress_http"]
    address = xds["listeners"][0]["address"]["socketAddress"]
    assert address == {"address": "0.0.0.0", "portValue": 8080}
    assert [r["name"] for r in xds["routes"]] == ["ingress_http"]
    routes = [route for vhost in xds["routes"][0]["virtualHosts"] for route in vhost["routes"]]
    assert len(routes) == 2
    assert len(xds["clusters"]) == 2
    assert len(xds["endpoints"]) == 2
    for cla in xds["endpoints"]:
        socket = cla["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"]
        assert socket == {"address": "127.0.0.1", "portValue": 18080}
    assert xds["secrets"] == []


def test_yaml_output_and_listener_options() -> None:
    result = translate(
        QUICKSTART, "--envoy-service-http-address", "127.0.0.1", "--envoy-service-http-port", "9080"
    )
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.stdout)
    assert set(doc) == {"objects", "errors", "xds"}
    address = doc["xds"]["listeners"][0]["address"]["socketAddress"]
    assert address == {"address": "127.0.0.1", "portValue": 9080}


def test_private_keys_are_redacted(tmp_path: Path) -> None:
    secret, _ca = make_tls_secret("default", "site", ["site.test"])
    key_b64 = secret["data"]["tls.key"]
    write_manifest(
        tmp_path,
        "site.yaml",
        [
            secret,
            *backend("web", 8081),
            ingress("site", [("site.test", "/", "web")], tls={"site": ["site.test"]}),
        ],
    )
    result = translate(tmp_path, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert problems(by_kind(doc, "Ingress")["site"]) == []
    assert {listener["name"] for listener in doc["xds"]["listeners"]} == {"ingress_http", "ingress_https"}
    [tls_secret] = doc["xds"]["secrets"]
    assert tls_secret["tlsCertificate"]["privateKey"] == {"inlineBytes": REDACTED}
    assert tls_secret["tlsCertificate"]["certificateChain"]["inlineBytes"]
    assert key_b64 not in result.stdout
    assert "PRIVATE KEY" not in result.stdout
    assert "data" not in by_kind(doc, "Secret")["site"]  # objects are identities, never contents


INVALID = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bad-path}
spec:
  rules:
    - host: bad.test
      http:
        paths:
          - path: /
            pathType: Sideways
            backend: {service: {name: web, port: {number: 80}}}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: gizmo}
---
kind: NoApiVersion
metadata: {name: orphan}
"""


def test_invalid_objects_are_reported_with_exit_code_0(tmp_path: Path) -> None:
    write_manifest(tmp_path, "web.yaml", backend("web", 8081))
    write_manifest(tmp_path, "invalid.yaml", INVALID)
    doc = translate_json(tmp_path)

    [bad_path] = problems(by_kind(doc, "Ingress")["bad-path"])
    assert bad_path["severity"] == "error"
    assert "pathType" in bad_path["message"] and "Sideways" in bad_path["message"]
    [unknown] = problems(by_kind(doc, "Gadget")["gizmo"])
    assert unknown["type"] == "UnknownKind"
    assert "example.com/v1/Gadget" in unknown["message"]
    # Every problem also in the errors, named by file and document, as `cpx serve` logs them.
    refused, unknown_kind, error = doc["errors"]
    assert "invalid.yaml (document 1): Ingress default/bad-path: " in refused
    assert refused.endswith("(refused; not served)")
    assert "invalid.yaml" in error and "document 3" in error and "apiVersion" in error
    assert "invalid.yaml (document 2): Gadget gizmo: unknown kind" in unknown_kind
    # The invalid Ingress produced nothing: no route for bad.test.
    domains = [d for rc in doc["xds"]["routes"] for vh in rc.get("virtualHosts", []) for d in vh["domains"]]
    assert not any("bad.test" in d for d in domains)


def test_malformed_yaml_fails_naming_the_file(tmp_path: Path) -> None:
    write_manifest(tmp_path, "web.yaml", backend("web", 8081))
    write_manifest(tmp_path, "broken.yaml", "kind: [Service\nmetadata: {name: x\n")
    result = translate(tmp_path)
    assert result.exit_code != 0
    assert result.stdout == ""
    assert str(tmp_path / "broken.yaml") in result.stderr
    assert "malformed YAML" in result.stderr


def test_missing_path_fails(tmp_path: Path) -> None:
    result = translate(tmp_path / "nowhere")
    assert result.exit_code != 0
    assert "nowhere" in result.stderr


def test_paths_are_required() -> None:
    result = CliRunner().invoke(cli, ["translate"])
    assert result.exit_code == 2  # click usage error


def test_refusals_and_objects_defined_twice_are_reported_as_serve_does(tmp_path: Path) -> None:
    write_manifest(tmp_path, "web.yaml", backend("web", 8081))
    write_manifest(tmp_path, "b.yaml", [ingress("site", [("b.test", "/", "web")])])
    write_manifest(tmp_path, "a.yaml", [ingress("site", [("a.test", "/", "web")])])
    bad_name = ingress("Bad_Name", [("bad.test", "/", "web")])
    write_manifest(tmp_path, "c.yaml", [bad_name])
    doc = translate_json(tmp_path)
    [first, second] = [o for o in doc["objects"] if o["metadata"]["name"] == "site"]
    assert problems(first) == problems(second)  # one object, reported wherever it is defined
    [conflict] = problems(first)
    assert conflict["reason"] == "DuplicateObject"
    assert f"defined in 2 files ({tmp_path / 'a.yaml'}, {tmp_path / 'b.yaml'})" in conflict["message"]
    [refused] = problems(by_kind(doc, "Ingress")["Bad_Name"])
    assert (
        refused["type"] == "SchemaError" and 'metadata.name: Invalid value: "Bad_Name"' in refused["message"]
    )
    assert len(doc["errors"]) == 2 and "(refused; not served)" in doc["errors"][0]
    assert doc["errors"][1] == conflict["message"]
    domains = [d for rc in doc["xds"]["routes"] for vh in rc.get("virtualHosts", []) for d in vh["domains"]]
    assert "a.test" in domains and "b.test" not in domains and "bad.test" not in domains
