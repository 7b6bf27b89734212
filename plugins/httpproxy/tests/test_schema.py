"""The API server's checks in standalone mode: exact messages for bad input, silence for good."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from cpx_httpproxy import crd
from cpx_httpproxy.schema import validate

Proxy = Callable[..., dict[str, Any]]


def _root(**virtualhost: Any) -> dict[str, Any]:
    return {"virtualhost": {"fqdn": "example.com", **virtualhost}}


def _route(**route: Any) -> dict[str, Any]:
    return {"virtualhost": {"fqdn": "example.com"}, "routes": [route]}


def _service(**service: Any) -> dict[str, Any]:
    return _route(services=[{"name": "web", "port": 80, **service}])


def test_full_featured_proxy_is_valid(full_proxy: dict[str, Any]) -> None:
    assert validate(full_proxy) == []


@pytest.mark.parametrize(
    "spec",
    [
        {},  # a child with nothing in it is the processor's business (NothingDefined), not the schema's
        {"routes": [{"services": [{"name": "web", "port": 80}]}]},
        _root(),
        _root(tls={"secretName": "ns/tls"}),
        _service(weight=0),
        _service(mirror=True, weight=100),
        _service(mirror=True),
        _route(conditions=[{"prefix": "/"}], requestRedirectPolicy={"statusCode": 308}),
        {"virtualhost": {"fqdn": "*.example.com"}, "tcpproxy": {"include": {"name": "tcp"}}},
    ],
)
def test_valid(proxy: Proxy, spec: dict[str, Any]) -> None:
    assert validate(proxy(spec)) == []


P = "spec.routes[0].services[0]"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        # required
        ({"virtualhost": {}}, "spec.virtualhost.fqdn: Required value"),
        ({"virtualhost": {"fqdn": None}}, "spec.virtualhost.fqdn: Required value"),
        (_route(services=[{"name": "web"}]), f"{P}.port: Required value"),
        ({"includes": [{}]}, "spec.includes[0].name: Required value"),
        (
            _root(corsPolicy={"allowOrigin": ["*"]}),
            "spec.virtualhost.corsPolicy.allowMethods: Required value",
        ),
        (
            _root(rateLimitPolicy={"local": {"requests": 1}}),
            "spec.virtualhost.rateLimitPolicy.local.unit: Required value",
        ),
        (_route(directResponsePolicy={}), "spec.routes[0].directResponsePolicy.statusCode: Required value"),
        # bounds
        (
            _service(port=70000),
            f"{P}.port: Invalid value: 70000: {P}.port in body should be less than or equal to 65535",
        ),
        (
            _service(port=0),
            f"{P}.port: Invalid value: 0: {P}.port in body should be greater than or equal to 1",
        ),
        (
            _service(weight=-1),
            f"{P}.weight: Invalid value: -1: {P}.weight in body should be greater than or equal to 0",
        ),
        (
            _route(directResponsePolicy={"statusCode": 100}),
            "spec.routes[0].directResponsePolicy.statusCode: Invalid value: 100: "
            "spec.routes[0].directResponsePolicy.statusCode in body should be greater than or equal to 200",
        ),
        (
            _root(rateLimitPolicy={"local": {"requests": 1, "unit": "second", "responseStatusCode": 600}}),
            "spec.virtualhost.rateLimitPolicy.local.responseStatusCode: Invalid value: 600: "
            "spec.virtualhost.rateLimitPolicy.local.responseStatusCode in body "
            "should be less than or equal to 599",
        ),
        (
            _route(retryPolicy={"count": -2}),
            "spec.routes[0].retryPolicy.count: Invalid value: -2: "
            "spec.routes[0].retryPolicy.count in body should be greater than or equal to -1",
        ),
        (
            _route(healthCheckPolicy={"path": "/", "expectedStatuses": [{"start": 99, "end": 200}]}),
            "spec.routes[0].healthCheckPolicy.expectedStatuses[0].start: Invalid value: 99: "
            "spec.routes[0].healthCheckPolicy.expectedStatuses[0].start in body "
            "should be greater than or equal to 100",
        ),
        # enums
        (
            _service(protocol="h3"),
            f'{P}.protocol: Unsupported value: "h3": supported values: "h2", "h2c", "tls"',
        ),
        (
            _route(requestRedirectPolicy={"statusCode": 304}),
            "spec.routes[0].requestRedirectPolicy.statusCode: Unsupported value: 304: "
            'supported values: "301", "302", "303", "307", "308"',
        ),
        (
            _route(retryPolicy={"retryOn": ["5xx", "sometimes"]}),
            'spec.routes[0].retryPolicy.retryOn[1]: Unsupported value: "sometimes": supported values: '
            + ", ".join(f'"{v}"' for v in crd.RETRY_ON),
        ),
        (
            _root(ipAllowPolicy=[{"source": "Client", "cidr": "10.0.0.0/8"}]),
            'spec.virtualhost.ipAllowPolicy[0].source: Unsupported value: "Client": supported values: '
            '"Peer", "Remote"',
        ),
        # patterns
        (
            {"virtualhost": {"fqdn": "Example.COM"}},
            'spec.virtualhost.fqdn: Invalid value: "Example.COM": spec.virtualhost.fqdn in body should match '
            f"'{crd.FQDN}'",
        ),
        (
            _route(timeoutPolicy={"response": "10"}),
            'spec.routes[0].timeoutPolicy.response: Invalid value: "10": '
            "spec.routes[0].timeoutPolicy.response "
            f"in body should match '{crd.DURATION_OR_INFINITY}'",
        ),
        (
            _root(corsPolicy={"allowOrigin": ["*"], "allowMethods": ["GET POST"]}),
            'spec.virtualhost.corsPolicy.allowMethods[0]: Invalid value: "GET POST": '
            f"spec.virtualhost.corsPolicy.allowMethods[0] in body should match '{crd.CORS_HEADER_VALUE}'",
        ),
        (
            _route(requestRedirectPolicy={"path": "new"}),
            'spec.routes[0].requestRedirectPolicy.path: Invalid value: "new": '
            f"spec.routes[0].requestRedirectPolicy.path in body should match '{crd.ABSOLUTE_PATH}'",
        ),
        # lengths and counts
        (
            {"includes": [{"name": ""}]},
            'spec.includes[0].name: Invalid value: "": '
            "spec.includes[0].name in body should be at least 1 chars long",
        ),
        (
            _service(validation={"caSecret": "x" * 318, "subjectName": "a"}),
            f"{P}.validation.caSecret: Too long: may not be more than 317 bytes",
        ),
        (
            _root(corsPolicy={"allowOrigin": [], "allowMethods": ["GET"]}),
            "spec.virtualhost.corsPolicy.allowOrigin: Invalid value: 0: "
            "spec.virtualhost.corsPolicy.allowOrigin in body should have at least 1 items",
        ),
        (
            _service(validation={"caSecret": "ca", "subjectName": "a", "subjectNames": ["a"] * 9}),
            f"{P}.validation.subjectNames: Too many: 9: must have at most 8 items",
        ),
        # types
        (
            _service(port="http"),
            f'{P}.port: Invalid value: "string": {P}.port in body must be of type integer: "string"',
        ),
        (
            _service(port=True),
            f'{P}.port: Invalid value: "boolean": {P}.port in body must be of type integer: "boolean"',
        ),
        (
            {"virtualhost": "example.com"},
            'spec.virtualhost: Invalid value: "string": '
            'spec.virtualhost in body must be of type object: "string"',
        ),
        (
            {"routes": {"services": []}},
            'spec.routes: Invalid value: "object": spec.routes in body must be of type array: "object"',
        ),
        (
            _route(enableWebsockets="yes"),
            'spec.routes[0].enableWebsockets: Invalid value: "string": '
            'spec.routes[0].enableWebsockets in body must be of type boolean: "string"',
        ),
        (
            {"routes": [None]},
            'spec.routes[0]: Invalid value: "null": spec.routes[0] in body must be of type object: "null"',
        ),
        (
            _route(authPolicy={"context": {"a": 1}}),
            'spec.routes[0].authPolicy.context[a]: Invalid value: "integer": '
            'spec.routes[0].authPolicy.context[a] in body must be of type string: "integer"',
        ),
        # unknown fields
        ({"foo": 1}, "spec.foo: unknown field"),
        (_service(wieght=1), f"{P}.wieght: unknown field"),
        (_root(tls={"secret": "tls"}), "spec.virtualhost.tls.secret: unknown field"),
        (
            _root(rateLimitPolicy={"global": {"descriptors": [{"entries": [{"remoteAddress": {"x": 1}}]}]}}),
            "spec.virtualhost.rateLimitPolicy.global.descriptors[0].entries[0]"
            ".remoteAddress.x: unknown field",
        ),
        # CEL rules
        (
            _root(authorization={"extensionRef": {"name": "a"}, "httpSettings": {"pathPrefix": "/"}}),
            'spec.virtualhost.authorization: Invalid value: "object": '
            "httpSettings can only be set when serviceType is 'http'",
        ),
        (
            _root(
                authorization={"serviceType": "grpc", "httpSettings": {}},
            ),
            'spec.virtualhost.authorization: Invalid value: "object": '
            "httpSettings can only be set when serviceType is 'http'",
        ),
        (
            _root(jwtProviders=[{"name": "p"}]),
            'spec.virtualhost.jwtProviders[0]: Invalid value: "object": '
            "exactly one of remoteJWKS or localJWKS must be set",
        ),
        (
            _root(
                jwtProviders=[
                    {
                        "name": "p",
                        "remoteJWKS": {"uri": "https://x"},
                        "localJWKS": {"secretName": "s", "key": "k"},
                    }
                ]
            ),
            'spec.virtualhost.jwtProviders[0]: Invalid value: "object": '
            "exactly one of remoteJWKS or localJWKS must be set",
        ),
        (
            _service(validation={"caSecret": "ca", "subjectName": "a", "subjectNames": ["b", "a"]}),
            f'{P}.validation: Invalid value: "object": subjectNames[0] must equal subjectName if set',
        ),
        (
            _service(mirror=True, weight=101),
            f'{P}: Invalid value: "object": '
            "the weight of a mirror service is a percentage and must be at most 100",
        ),
    ],
)
def test_invalid(proxy: Proxy, spec: dict[str, Any], problem: str) -> None:
    assert validate(proxy(spec)) == [problem]


def test_top_level(proxy: Proxy) -> None:
    assert validate(
        {"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": {"name": "a"}}
    ) == ["spec: Required value"]
    assert validate({"spec": {}}) == ["metadata: Required value"]
    obj = proxy()
    obj["metadata"] = {"namespace": "default"}
    assert validate(obj) == ["metadata.name: Required value: name or generateName is required"]
    obj = proxy()
    obj["extra"] = True
    assert validate(obj) == ["extra: unknown field"]


def test_status_and_metadata_are_not_checked(proxy: Proxy) -> None:
    obj = proxy()
    obj["metadata"]["labels"] = {"app": "web"}
    obj["status"] = {"currentStatus": "valid", "anything": ["goes"]}
    assert validate(obj) == []


def test_every_problem_is_reported(proxy: Proxy) -> None:
    spec = {
        "virtualhost": {"fqdn": "example.com", "tls": {"passthrough": "yes"}},
        "routes": [{"services": [{"name": "a", "port": 0}, {"port": 1}]}],
        "bogus": {},
    }
    assert validate(proxy(spec)) == [
        'spec.virtualhost.tls.passthrough: Invalid value: "string": '
        'spec.virtualhost.tls.passthrough in body must be of type boolean: "string"',
        "spec.routes[0].services[0].port: Invalid value: 0: "
        "spec.routes[0].services[0].port in body should be greater than or equal to 1",
        "spec.routes[0].services[1].name: Required value",
        "spec.bogus: unknown field",
    ]


def test_does_not_mutate_or_crash_on_odd_input(proxy: Proxy, full_proxy: dict[str, Any]) -> None:
    before = copy.deepcopy(full_proxy)
    validate(full_proxy)
    assert full_proxy == before
    for odd in ({"spec": None, "metadata": None}, {"spec": [], "metadata": {"name": "x"}}, {}):
        assert isinstance(validate(odd), list)
    assert validate({"metadata": "x", "spec": {}}) == [
        'metadata: Invalid value: "string": metadata in body must be of type object: "string"'
    ]
    assert validate([]) == [  # type: ignore[arg-type]
        '<object>: Invalid value: "array": <object> in body must be of type object: "array"'
    ]


def test_integral_floats_are_integers(proxy: Proxy) -> None:
    # JSON decoders may hand out 80.0 for 80; the API server accepts it as an integer.
    assert validate(proxy(_service(port=80.0))) == []
    assert validate(proxy(_service(port=80.5))) == [
        f'{P}.port: Invalid value: "number": {P}.port in body must be of type integer: "number"'
    ]
