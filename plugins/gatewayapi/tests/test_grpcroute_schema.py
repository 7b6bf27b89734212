"""GRPCRoutes the API server would refuse (CRD schema and CEL rules), in its wording."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from cpx_gatewayapi.grpcschema import validate_grpcroute


def grpcroute(spec: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": yaml.safe_load(spec),
    }


VALID = """
parentRefs: [{name: gw, sectionName: http}]
hostnames: [grpc.example.com, "*.example.com"]
rules:
- name: echo
  matches:
  - method: {service: grpc.examples.echo.Echo, method: Echo}
    headers: [{name: x-a, value: b, type: RegularExpression}]
  - method: {type: RegularExpression, service: "echo\\\\..*"}
  filters:
  - type: RequestHeaderModifier
    requestHeaderModifier: {set: [{name: x, value: y}]}
  - type: RequestMirror
    requestMirror: {backendRef: {name: m, port: 80}}
  backendRefs:
  - name: svc
    port: 8080
    weight: 10
    filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {remove: [x]}}]
"""


def test_valid_grpcroute() -> None:
    assert validate_grpcroute(grpcroute(VALID)) == []


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            "rules: [{matches: [{method: {type: Exact}}]}]",
            'spec.rules[0].matches[0].method: Invalid value: "object": '
            "One or both of 'service' or 'method' must be specified",
        ),
        (
            "rules: [{matches: [{method: {service: a/b}}]}]",
            'spec.rules[0].matches[0].method: Invalid value: "object": service must only contain valid '
            "characters (matching ^(?i)\\.?[a-z_][a-z_0-9]*(\\.[a-z_][a-z_0-9]*)*$)",
        ),
        (
            "rules: [{matches: [{method: {method: 9x}}]}]",
            'spec.rules[0].matches[0].method: Invalid value: "object": method must only contain valid '
            "characters (matching ^[A-Za-z_][A-Za-z_0-9]*$)",
        ),
        (
            "rules: [{matches: [{method: {type: Prefix, method: M}}]}]",
            'spec.rules[0].matches[0].method.type: Unsupported value: "Prefix": supported values: '
            '"Exact", "RegularExpression"',
        ),
        (
            "rules: [{filters: [{type: URLRewrite, urlRewrite: {hostname: x}}]}]",
            'spec.rules[0].filters[0].type: Unsupported value: "URLRewrite": supported values: '
            '"ResponseHeaderModifier", "RequestHeaderModifier", "RequestMirror", "ExtensionRef"',
        ),
        (
            "rules: [{filters: [{type: RequestHeaderModifier, requestHeaderModifier: {}}, "
            "{type: RequestHeaderModifier, requestHeaderModifier: {}}]}]",
            'spec.rules[0].filters: Invalid value: "object": RequestHeaderModifier filter cannot be repeated',
        ),
        (
            "rules: [{backendRefs: [{name: s}]}]",
            'spec.rules[0].backendRefs[0]: Invalid value: "object": Must have port for Service reference',
        ),
        ("hostnames: [Bad_Host]", 'spec.hostnames[0]: Invalid value: "Bad_Host": must be a valid hostname'),
        ("parentRefs: [{}]", "spec.parentRefs[0].name: Required value"),
    ],
)
def test_refused(spec: str, problem: str) -> None:
    assert problem in validate_grpcroute(grpcroute(spec))


def test_regex_names_are_not_checked_as_names() -> None:
    spec = "rules: [{matches: [{method: {type: RegularExpression, service: 'a/(b', method: '.*'}}]}]"
    assert validate_grpcroute(grpcroute(spec)) == []


def test_no_spec() -> None:
    assert "spec: Required value" in validate_grpcroute({"metadata": {"name": "g", "namespace": "default"}})
