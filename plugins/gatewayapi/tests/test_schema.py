"""What the CRD schema and CEL rules refuse, in the API server's words; refused objects stay out."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from cpx.testing.translation import Translation

from cpx_gatewayapi.schema import (
    HOSTNAME_FORBIDDEN,
    HTTPS_TERMINATE,
    TERMINATE_NEEDS_CERTIFICATES,
    TLS_FORBIDDEN,
    TLS_MODE_REQUIRED,
    UNIQUE_COMBINATION,
    UNIQUE_NAMES,
    validate_gateway,
    validate_gateway_class,
    validate_reference_grant,
)

GROUP = "gateway.networking.k8s.io"


def gateway(*listeners: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "infra"},
        "spec": {"gatewayClassName": "contour", "listeners": list(listeners), **spec},
    }


HTTP = {"name": "http", "port": 80, "protocol": "HTTP"}
HTTPS = {
    "name": "https",
    "port": 443,
    "protocol": "HTTPS",
    "hostname": "*.example.com",
    "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "group": "", "name": "cert"}]},
    "allowedRoutes": {
        "namespaces": {"from": "Selector", "selector": {"matchLabels": {"a": "b"}}},
        "kinds": [{"group": GROUP, "kind": "HTTPRoute"}],
    },
}
TLS = {
    "name": "tls",
    "port": 8443,
    "protocol": "TLS",
    "hostname": "a.example.com",
    "tls": {"mode": "Passthrough"},
}
TCP = {"name": "tcp", "port": 9000, "protocol": "TCP"}


def test_valid_gateways_pass() -> None:
    assert validate_gateway(gateway(HTTP, HTTPS, TLS, TCP)) == []
    addresses = [
        {"type": "IPAddress", "value": "127.0.0.2"},
        {"value": "::1"},
        {"type": "Hostname", "value": "a.b"},
    ]
    assert validate_gateway(gateway(HTTP, addresses=addresses)) == []
    assert validate_gateway(gateway({**HTTP, "protocol": "example.com/custom"})) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda g: g["spec"].pop("gatewayClassName"), "spec.gatewayClassName: Required value"),
        (lambda g: g["spec"].pop("listeners"), "spec.listeners: Required value"),
        (
            lambda g: g["spec"].update(listeners=[]),
            "spec.listeners: Invalid value: 0: spec.listeners in body should have at least 1 items",
        ),
        (
            lambda g: g["spec"].update(
                listeners=[{**HTTP, "name": f"l{i}", "port": i + 1} for i in range(65)]
            ),
            "spec.listeners: Too many: 65: must have at most 64 items",
        ),
        (
            lambda g: g["spec"]["listeners"][0].update(port=0),
            "spec.listeners[0].port: Invalid value: 0: spec.listeners[0].port in body should be greater "
            "than or equal to 1",
        ),
        (
            lambda g: g["spec"]["listeners"][0].update(port=65536),
            "spec.listeners[0].port: Invalid value: 65536: spec.listeners[0].port in body should be less "
            "than or equal to 65535",
        ),
        (
            lambda g: g["spec"]["listeners"][0].update(port="80"),
            'spec.listeners[0].port: Invalid value: "80": must be an integer',
        ),
        (lambda g: g["spec"]["listeners"][0].pop("protocol"), "spec.listeners[0].protocol: Required value"),
        (
            lambda g: g["spec"]["listeners"][0].update(name="Bad_Name"),
            'spec.listeners[0].name: Invalid value: "Bad_Name": spec.listeners[0].name in body should match',
        ),
        (
            lambda g: g["spec"]["listeners"][0].update(hostname="*"),
            'spec.listeners[0].hostname: Invalid value: "*": spec.listeners[0].hostname in body should match',
        ),
        (
            lambda g: g["spec"]["listeners"][0].update(allowedRoutes={"namespaces": {"from": "Mine"}}),
            'spec.listeners[0].allowedRoutes.namespaces.from: Unsupported value: "Mine": supported values: '
            '"All", "Selector", "Same"',
        ),
        (
            lambda g: g["spec"]["listeners"][0].update(allowedRoutes={"kinds": [{"group": GROUP}]}),
            "spec.listeners[0].allowedRoutes.kinds[0].kind: Required value",
        ),
        (
            lambda g: g["spec"]["listeners"][1]["tls"].update(mode="Passthru"),
            'spec.listeners[1].tls.mode: Unsupported value: "Passthru": supported values: "Terminate", '
            '"Passthrough"',
        ),
        (
            lambda g: g["spec"]["listeners"][1]["tls"]["certificateRefs"][0].pop("name"),
            "spec.listeners[1].tls.certificateRefs[0].name: Required value",
        ),
        (
            lambda g: g["spec"].update(addresses=[{"type": "bad type", "value": "x"}]),
            'spec.addresses[0].type: Invalid value: "bad type": spec.addresses[0].type in body should match',
        ),
        (
            lambda g: g["spec"].update(addresses=[{"type": "Hostname", "value": "Not_A_Host"}]),
            'spec.addresses[0]: Invalid value: "object": Hostname value must be empty or contain only valid',
        ),
        (
            lambda g: g["spec"].update(
                addresses=[{"value": "10.0.0.1"}, {"type": "IPAddress", "value": "10.0.0.1"}]
            ),
            'spec.addresses: Invalid value: "array": IPAddress values must be unique',
        ),
        (
            lambda g: g["spec"].update(listeners="http"),
            'spec.listeners: Invalid value: "http": must be a list',
        ),
        (lambda g: g.pop("spec"), "spec: Required value"),
    ],
)
def test_gateway_schema(change: Callable[[dict[str, Any]], Any], problem: str) -> None:
    obj = copy.deepcopy(gateway(HTTP, HTTPS))
    change(obj)
    problems = validate_gateway(obj)
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(
    ("listeners", "message"),
    [
        ([{**HTTP, "tls": {"mode": "Terminate", "certificateRefs": [{"name": "c"}]}}], TLS_FORBIDDEN),
        ([{**TCP, "tls": {"mode": "Passthrough"}}], TLS_FORBIDDEN),
        ([{**HTTPS, "tls": {"mode": "Passthrough"}}], HTTPS_TERMINATE),
        ([{**TLS, "tls": {"certificateRefs": [{"name": "c"}]}}], TLS_MODE_REQUIRED),
        ([{k: v for k, v in TLS.items() if k != "tls"}], TLS_MODE_REQUIRED),
        ([{**TCP, "hostname": "a.example.com"}], HOSTNAME_FORBIDDEN),
        ([HTTP, {**HTTP, "port": 81}], UNIQUE_NAMES),
        ([HTTP, {**HTTP, "name": "other"}], UNIQUE_COMBINATION),
        ([{**HTTP, "hostname": "a.b"}, {**HTTP, "name": "other", "hostname": "a.b"}], UNIQUE_COMBINATION),
        ([{**HTTPS, "tls": {"mode": "Terminate"}}], TERMINATE_NEEDS_CERTIFICATES),
    ],
)
def test_listener_cel_rules(listeners: list[dict[str, Any]], message: str) -> None:
    problems = validate_gateway(gateway(*listeners))
    assert any(message in p for p in problems), problems


def test_listeners_differing_in_hostname_or_protocol_are_distinct() -> None:
    assert validate_gateway(gateway(HTTP, {**HTTP, "name": "a", "hostname": "a.b"})) == []
    assert (
        validate_gateway(gateway(HTTP, {**HTTP, "name": "b", "protocol": "HTTPS", "tls": HTTPS["tls"]})) == []
    )


def test_https_without_tls_passes_the_schema() -> None:
    # The v1.6.0-rc.2 rule was reverted: the controller refuses it (Programmed=False).
    assert validate_gateway(gateway({"name": "https", "port": 443, "protocol": "HTTPS"})) == []


def test_any_json_gets_an_answer() -> None:
    specs: list[Any] = [None, [], "x", {"listeners": [None, 1, "x", {"port": True}]}, {"addresses": [[]]}]
    for spec in specs:
        obj = {"apiVersion": f"{GROUP}/v1", "kind": "Gateway", "metadata": {"name": "gw"}, "spec": spec}
        assert validate_gateway(obj)
        assert validate_gateway_class({**obj, "kind": "GatewayClass"})
        assert validate_reference_grant({**obj, "kind": "ReferenceGrant"})


def test_gateway_class_schema() -> None:
    obj: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "contour"},
        "spec": {"controllerName": "projectcontour.io/gateway-controller"},
    }
    assert validate_gateway_class(obj) == []
    assert validate_gateway_class({**obj, "spec": {}}) == ["spec.controllerName: Required value"]
    [problem] = validate_gateway_class({**obj, "spec": {"controllerName": "no-slash"}})
    assert problem.startswith(
        'spec.controllerName: Invalid value: "no-slash": spec.controllerName in body should match'
    )
    ref = {"group": "example.com", "kind": "Params", "name": "p", "namespace": "infra"}
    assert validate_gateway_class({**obj, "spec": {**obj["spec"], "parametersRef": ref}}) == []
    assert validate_gateway_class({**obj, "spec": {**obj["spec"], "parametersRef": {"name": "p"}}}) == [
        "spec.parametersRef.group: Required value",
        "spec.parametersRef.kind: Required value",
    ]
    [problem] = validate_gateway_class({**obj, "spec": {**obj["spec"], "description": "x" * 65}})
    assert problem == "spec.description: Too long: may not be more than 64 bytes"


def grant(api_version: str = "v1beta1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{api_version}",
        "kind": "ReferenceGrant",
        "metadata": {"name": "g", "namespace": "certs"},
        "spec": {
            "from": [{"group": GROUP, "kind": "Gateway", "namespace": "infra"}],
            "to": [{"group": "", "kind": "Secret"}],
            **spec,
        },
    }


def test_reference_grant_schema() -> None:
    assert validate_reference_grant(grant()) == []
    assert validate_reference_grant(grant(to=[{"group": "", "kind": "Secret", "name": "cert"}])) == []
    assert validate_reference_grant(grant(to=[])) == [
        "spec.to: Invalid value: 0: spec.to in body should have at least 1 items"
    ]
    sources: Any = [{"group": "", "kind": "Gateway"}]
    assert validate_reference_grant(grant(**{"from": sources})) == ["spec.from[0].namespace: Required value"]
    [problem] = validate_reference_grant(grant(to=[{"group": "", "kind": "Secret", "name": ""}]))
    assert problem.startswith(
        'spec.to[0].name: Invalid value: "": spec.to[0].name in body should be at least 1'
    )


@pytest.mark.parametrize("api_version", ["v1", "v1beta1"])
def test_reference_grants_of_both_versions_are_read(
    cpx_translate: Callable[..., Translation], api_version: str
) -> None:
    result = cpx_translate(yaml.safe_dump(grant(api_version)), ["gatewayapi"])
    assert result.unknown == {}
    assert not any(key.kind == "ReferenceGrant" for key in result.statuses)  # no status, no problem


def test_a_refused_gateway_is_left_out_with_its_problems(cpx_translate: Callable[..., Translation]) -> None:
    objects = [
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "contour"},
            "spec": {"controllerName": "projectcontour.io/gateway-controller"},
        },
        gateway(HTTP, {**HTTP, "port": 81}),
    ]
    result = cpx_translate(yaml.safe_dump_all(objects), ["gatewayapi"])
    status = result.status("Gateway", "gw", "infra")
    assert "conditions" not in status
    [problem] = status["cpx"]["problems"]
    assert problem["type"] == "SchemaError" and UNIQUE_NAMES in problem["message"]
