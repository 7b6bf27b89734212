"""Tenant rows of type confusion (issue #8): objects the API server's schema would refuse.

Each bad object is refused by its kind's schema check, with a status naming the field; cpx keeps
serving, later changes still apply, Envoy rejects nothing.  ``cpx translate`` answers the same
inputs with the same problems, never a traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from cpx_httpproxy.testing import valid_httpproxy

from cpx.cli import cli
from cpx.testing.cpxproc import endpoint_slice, service, write_manifest
from cpx.testing.envoy import envoy_binary
from cpx.testing.tenant import BACKEND, TenantStack, rejected_updates, tenant_stack
from cpx_ingress.testing import simple_ingress as ingress

DEEP = "(990 levels)"  # stands for the nested value until written out: json cannot write it either


def _text(obj: dict[str, Any]) -> str:
    """The manifest as JSON text (PyYAML's emitter and json both recurse too deep for 990 levels)."""
    return json.dumps(obj).replace(json.dumps(DEEP), '{"a": ' * 990 + '"x"' + "}" * 990)


def _slice(**changes: Any) -> dict[str, Any]:
    # A slice of the very Service the control host is served by: refused, it must not touch it.
    obj = endpoint_slice(BACKEND, 9, name="bad-slice")
    obj.update(changes)
    return obj


def _slice_conditions() -> dict[str, Any]:
    obj = _slice()
    obj["endpoints"][0]["conditions"] = "7"
    return obj


def _service_port_name() -> dict[str, Any]:
    obj = service("bad-port-name")
    obj["spec"]["ports"][0]["name"] = {"a": 1}
    return obj


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["labels"] = "x"
    return obj


def _deep_annotation() -> dict[str, Any]:
    obj = ingress("deep-annotation", [("deep.tenant.test", "/", BACKEND)])
    obj["metadata"]["annotations"] = {"projectcontour.io/response-timeout": DEEP}
    return obj


# (object, kind, name, what its status must say)
ROWS = {
    "endpointslice-endpoints-7": (
        _slice(endpoints=7), "EndpointSlice", "bad-slice", "endpoints: Invalid value: 7: must be a list"
    ),
    "service-port-name-object": (
        _service_port_name(), "Service", "bad-port-name",
        'spec.ports[0].name: Invalid value: "object": must be a string',
    ),
    "service-labels-string": (
        _labels(service("bad-labels")), "Service", "bad-labels",
        'metadata.labels: Invalid value: "x": must be an object',
    ),
    "endpointslice-labels-string": (
        _labels(_slice()), "EndpointSlice", "bad-slice",
        'metadata.labels: Invalid value: "x": must be an object',
    ),
    "endpointslice-conditions-string": (
        _slice_conditions(), "EndpointSlice", "bad-slice",
        'endpoints[0].conditions: Invalid value: "7": must be an object',
    ),
    # Not a type confusion, but the same schema check: the API server refuses it, Envoy would NACK EDS.
    "endpointslice-address-999": (
        _slice(endpoints=[{"addresses": ["999.1.1.1"]}]), "EndpointSlice", "bad-slice",
        'endpoints[0].addresses[0]: Invalid value: "999.1.1.1": must be a valid IPv4 address',
    ),
    "ingress-annotation-nested-990": (
        _deep_annotation(), "Ingress", "deep-annotation",
        'metadata.annotations[projectcontour.io/response-timeout]: Invalid value: "object": must be a string',
    ),
}  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("row", list(ROWS))
def test_type_confused_object_is_refused_while_serving(tenant: TenantStack, row: str) -> None:
    obj, kind, name, problem = ROWS[row]
    field = problem.split(": ")[0]  # the status file's YAML may wrap the rest of the line
    shown = tenant.check_bad_input(f"{row}.json", _text(obj), kind=kind, name=name, problem=field)
    problems = yaml.safe_load(shown)["cpx"]["problems"]
    assert any(
        (p["type"], p["reason"], p["severity"]) == ("SchemaError", "Invalid", "error")
        and problem in p["message"]
        for p in problems
    ), problems


@pytest.fixture
def _keep_logging() -> Iterator[None]:
    # The cli group configures the root logger for the CliRunner's (soon closed) stderr.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("_keep_logging")
@pytest.mark.parametrize("row", list(ROWS))
def test_translate_reports_the_same_problem(tmp_path: Path, row: str) -> None:
    obj, kind, name, problem = ROWS[row]
    (tmp_path / "bad.json").write_text(_text(obj))
    result = CliRunner().invoke(
        cli, ["translate", "--plugins", "ingress,httpproxy", str(tmp_path), "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    (entry,) = [o for o in json.loads(result.stdout)["objects"] if o["kind"] == kind]
    assert entry["metadata"]["name"] == name
    assert any(problem in p["message"] for p in entry["status"]["cpx"]["problems"])


@pytest.mark.e2e
def test_cpx_starts_with_every_bad_file_present(tmp_path: Path) -> None:
    """Today's failure mode was worse at start-up: cpx exited, and again at every restart."""
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    for row, (obj, _kind, _name, _problem) in ROWS.items():
        renamed = {**obj, "metadata": {**obj["metadata"], "name": row}}  # one object per file
        write_manifest(tmp_path / "manifests", f"{row}.json", _text(renamed))
    with tenant_stack(tmp_path, valid_object=valid_httpproxy) as stack:
        stack.add_valid("first")
        for row, (_obj, kind, _name, problem) in ROWS.items():
            stack.wait_status(kind, "default", row, problem.split(": ")[0])
        assert stack.cpx.running
        assert rejected_updates(stack.envoy) == 0
