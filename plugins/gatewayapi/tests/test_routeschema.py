"""HTTPRoutes the API server would refuse (CRD schema and CEL rules), in its wording."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from cpx_gatewayapi.routeschema import validate_httproute


def httproute(spec: str) -> dict[str, Any]:
    parsed = yaml.safe_load(spec)
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": parsed,
    }


VALID = """
parentRefs: [{name: gw, sectionName: http, port: 80}]
hostnames: [example.com, "*.example.com"]
rules:
- matches:
  - path: {type: PathPrefix, value: /v1}
    headers: [{name: x-a, value: b, type: RegularExpression}]
    queryParams: [{name: q, value: "1"}]
    method: GET
  filters:
  - type: URLRewrite
    urlRewrite: {hostname: b.example.com, path: {type: ReplacePrefixMatch, replacePrefixMatch: /v2}}
  - type: RequestMirror
    requestMirror: {backendRef: {name: m, port: 80}, percent: 10}
  backendRefs: [{name: svc, port: 8080, weight: 10}]
  timeouts: {request: 10s, backendRequest: 1s}
- matches: [{path: {type: RegularExpression, value: "/(unclosed"}}]
  filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]
"""


def test_a_valid_route_has_no_problems() -> None:
    assert validate_httproute(httproute(VALID)) == []


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("parentRefs: [{sectionName: x}]", "spec.parentRefs[0].name: Required value"),
        (
            "parentRefs: [{name: gw, port: 70000}]",
            "spec.parentRefs[0].port: Invalid value: 70000: spec.parentRefs[0].port in body should be "
            "less than or equal to 65535",
        ),
        ("hostnames: [Bad_Host]", 'spec.hostnames[0]: Invalid value: "Bad_Host": must be a valid hostname'),
        (
            "rules: [{matches: [{path: {type: Prefix, value: /}}]}]",
            'spec.rules[0].matches[0].path.type: Unsupported value: "Prefix": supported values: "Exact", '
            '"PathPrefix", "RegularExpression"',
        ),
        (
            "rules: [{matches: [{path: {type: Exact, value: relative}}]}]",
            'spec.rules[0].matches[0].path: Invalid value: "object": value must be an absolute path and '
            "start with '/' when type one of ['Exact', 'PathPrefix']",
        ),
        (
            "rules: [{matches: [{method: FETCH}]}]",
            'spec.rules[0].matches[0].method: Unsupported value: "FETCH": supported values: "GET", "HEAD", '
            '"POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"',
        ),
        (
            "rules: [{matches: [{headers: [{name: x}]}]}]",
            "spec.rules[0].matches[0].headers[0].value: Required value",
        ),
        (
            "rules: [{backendRefs: [{name: svc}]}]",
            'spec.rules[0].backendRefs[0]: Invalid value: "object": Must have port for Service reference',
        ),
        (
            "rules: [{backendRefs: [{name: s, port: 80}], "
            "filters: [{type: RequestRedirect, requestRedirect: {}}]}]",
            'spec.rules[0]: Invalid value: "object": '
            "RequestRedirect filter must not be used together with backendRefs",
        ),
        (
            "rules: [{filters: [{type: RequestHeaderModifier}]}]",
            'spec.rules[0].filters[0]: Invalid value: "object": '
            "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type",
        ),
        (
            "rules: [{filters: [{type: RequestRedirect, requestRedirect: {statusCode: 304}}]}]",
            "spec.rules[0].filters[0].requestRedirect.statusCode: Unsupported value: 304: supported values: "
            "301, 302, 303, 307, 308",
        ),
        (
            "rules: [{matches: [{path: {type: Exact, value: /a}}], filters: [{type: URLRewrite, urlRewrite: "
            "{path: {type: ReplacePrefixMatch, replacePrefixMatch: /b}}}]}]",
            'spec.rules[0]: Invalid value: "object": '
            "When using URLRewrite filter with path.replacePrefixMatch, "
            "exactly one PathPrefix match must be specified",
        ),
        (
            "rules: [{timeouts: {request: 1s, backendRequest: 2s}}]",
            'spec.rules[0].timeouts: Invalid value: "object": backendRequest timeout cannot be longer than '
            "request timeout",
        ),
        (
            "rules: [{timeouts: {request: 1 second}}]",
            'spec.rules[0].timeouts.request: Invalid value: "1 second": '
            "spec.rules[0].timeouts.request in body should match '^([0-9]{1,5}(h|m|s|ms)){1,4}$'",
        ),
        (
            "rules: [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}]",
            "spec.rules: Too many: 17: must have at most 16 items",
        ),
        ("rules: {a: 1}", 'spec.rules: Invalid value: "object": must be a list'),
    ],
)
def test_refused(spec: str, problem: str) -> None:
    assert problem in validate_httproute(httproute(spec))


def test_missing_spec() -> None:
    obj = httproute("{}")
    del obj["spec"]
    assert validate_httproute(obj) == ["spec: Required value"]
