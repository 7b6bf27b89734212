"""Fixtures for the httpproxy plugin's tests: HTTPProxy objects."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

# Every field of the API set to a non-zero value (the model's to_dict leaves zero values out),
# with the CRD-defaulted fields set explicitly; valid against the schema, CEL rules included.
_HEADER_MATCH = {
    "name": "x-env",
    "present": True,
    "notpresent": True,
    "contains": "a",
    "notcontains": "b",
    "exact": "c",
    "notexact": "d",
    "regex": "e.*",
    "ignoreCase": True,
    "treatMissingAsEmpty": True,
}
_QUERY_MATCH = {
    "name": "q",
    "exact": "1",
    "prefix": "2",
    "suffix": "3",
    "regex": "4.*",
    "contains": "5",
    "present": True,
    "ignoreCase": True,
}
_VALIDATION = {
    "caSecret": "ns/ca",
    "subjectName": "backend.example.com",
    "subjectNames": ["backend.example.com", "b2"],
}
_HEADERS = {"set": [{"name": "X-Foo", "value": "bar"}], "remove": ["X-Baz"]}
_COOKIE = {
    "name": "session",
    "pathRewrite": {"value": "/app"},
    "domainRewrite": {"value": "example.com"},
    "secure": False,
    "sameSite": "Strict",
}
_LB = {
    "strategy": "RequestHash",
    "requestHashPolicies": [
        {"terminal": True, "headerHashOptions": {"headerName": "x-user"}},
        {"queryParameterHashOptions": {"parameterName": "id"}},
        {"hashSourceIP": True},
    ],
}
_SERVICE = {
    "name": "web",
    "port": 8080,
    "healthPort": 8081,
    "protocol": "h2c",
    "weight": 90,
    "validation": _VALIDATION,
    "requestHeadersPolicy": _HEADERS,
    "responseHeadersPolicy": _HEADERS,
    "cookieRewritePolicies": [_COOKIE],
    "slowStartPolicy": {"window": "10s", "aggression": "1.5", "minWeightPercent": 20},
}
_RATE_LIMIT = {
    "local": {
        "requests": 100,
        "unit": "minute",
        "burst": 10,
        "responseStatusCode": 503,
        "responseHeadersToAdd": [{"name": "x-limited", "value": "yes"}],
    },
    "global": {
        "disabled": True,
        "descriptors": [
            {
                "entries": [
                    {"genericKey": {"key": "k", "value": "v"}},
                    {"requestHeader": {"headerName": "x-a", "descriptorKey": "a"}},
                    {
                        "requestHeaderValueMatch": {
                            "headers": [_HEADER_MATCH],
                            "expectMatch": False,
                            "value": "m",
                        }
                    },
                    {"remoteAddress": {}},
                ]
            }
        ],
    },
}
_IP_RULES = [{"source": "Peer", "cidr": "10.0.0.0/8"}, {"source": "Remote", "cidr": "2001:db8::1"}]

FULL_PROXY: dict[str, Any] = {
    "apiVersion": "projectcontour.io/v1",
    "kind": "HTTPProxy",
    "metadata": {"name": "full", "namespace": "default", "generation": 7},
    "spec": {
        "ingressClassName": "contour",
        "virtualhost": {
            "fqdn": "*.example.com",
            "tls": {
                "secretName": "tls",
                "minimumProtocolVersion": "1.3",
                "maximumProtocolVersion": "1.3",
                "passthrough": True,
                "clientValidation": {
                    "caSecret": "ca",
                    "skipClientCertValidation": True,
                    "optionalClientCertificate": True,
                    "crlSecret": "crl",
                    "crlOnlyVerifyLeafCert": True,
                    "forwardClientCertificate": {
                        "subject": True,
                        "cert": True,
                        "chain": True,
                        "dns": True,
                        "uri": True,
                    },
                },
                "enableFallbackCertificate": True,
            },
            "authorization": {
                "extensionRef": {
                    "apiVersion": "projectcontour.io/v1alpha1",
                    "namespace": "auth",
                    "name": "authz",
                },
                "serviceType": "http",
                "httpSettings": {
                    "pathPrefix": "/check",
                    "allowedAuthorizationHeaders": [{"exact": "cookie", "ignoreCase": True}],
                    "allowedUpstreamHeaders": [
                        {"prefix": "x-auth-"},
                        {"suffix": "-id"},
                        {"contains": "user"},
                    ],
                },
                "authPolicy": {"disabled": True, "context": {"a": "1", "b": "2"}},
                "responseTimeout": "1s",
                "failOpen": True,
                "withRequestBody": {
                    "maxRequestBytes": 2048,
                    "allowPartialMessage": True,
                    "packAsBytes": True,
                },
            },
            "corsPolicy": {
                "allowCredentials": True,
                "allowOrigin": ["*", "https://example.com"],
                "allowMethods": ["GET", "POST"],
                "allowHeaders": ["authorization"],
                "exposeHeaders": ["x-request-id"],
                "maxAge": "10m",
                "allowPrivateNetwork": True,
            },
            "rateLimitPolicy": _RATE_LIMIT,
            "jwtProviders": [
                {
                    "name": "remote",
                    "default": True,
                    "issuer": "https://issuer.example.com",
                    "audiences": ["a", "b"],
                    "remoteJWKS": {
                        "uri": "https://issuer.example.com/jwks.json",
                        "validation": _VALIDATION,
                        "timeout": "2s",
                        "cacheDuration": "5m",
                        "dnsLookupFamily": "v4",
                    },
                    "forwardJWT": True,
                },
                {"name": "local", "localJWKS": {"secretName": "jwks", "key": "jwks.json"}},
            ],
            "ipAllowPolicy": _IP_RULES,
            "ipDenyPolicy": _IP_RULES,
        },
        "routes": [
            {
                "conditions": [
                    {"prefix": "/api"},
                    {"header": _HEADER_MATCH},
                    {"queryParameter": _QUERY_MATCH},
                ],
                "services": [_SERVICE, {"name": "shadow", "port": 80, "mirror": True, "weight": 10}],
                "enableWebsockets": True,
                "permitInsecure": True,
                "authPolicy": {"disabled": True, "context": {"route": "yes"}},
                "timeoutPolicy": {"response": "15s", "idle": "infinity", "idleConnection": "1h"},
                "retryPolicy": {
                    "count": 3,
                    "perTryTimeout": "500ms",
                    "retryOn": ["5xx", "reset-before-request"],
                    "retriableStatusCodes": [502, 503],
                },
                "healthCheckPolicy": {
                    "path": "/healthz",
                    "host": "health.example.com",
                    "intervalSeconds": 5,
                    "timeoutSeconds": 1,
                    "unhealthyThresholdCount": 3,
                    "healthyThresholdCount": 2,
                    "expectedStatuses": [{"start": 200, "end": 300}],
                },
                "loadBalancerPolicy": _LB,
                "pathRewritePolicy": {"replacePrefix": [{"prefix": "/api", "replacement": "/"}]},
                "requestHeadersPolicy": _HEADERS,
                "responseHeadersPolicy": _HEADERS,
                "cookieRewritePolicies": [_COOKIE],
                "rateLimitPolicy": _RATE_LIMIT,
                "internalRedirectPolicy": {
                    "maxInternalRedirects": 2,
                    "redirectResponseCodes": [301, 307],
                    "allowCrossSchemeRedirect": "SafeOnly",
                    "denyRepeatedRouteRedirect": True,
                },
                "jwtVerificationPolicy": {"require": "remote", "disabled": True},
                "ipAllowPolicy": _IP_RULES,
                "ipDenyPolicy": _IP_RULES,
            },
            {
                "conditions": [{"exact": "/old"}],
                "requestRedirectPolicy": {
                    "scheme": "https",
                    "hostname": "new.example.com",
                    "port": 8443,
                    "statusCode": 301,
                    "path": "/new",
                    "prefix": "/new",
                },
            },
            {
                "conditions": [{"regex": "/gone/.*"}],
                "directResponsePolicy": {"statusCode": 410, "body": "gone"},
            },
        ],
        "includes": [
            {
                "name": "child",
                "namespace": "team",
                "conditions": [{"prefix": "/team"}, {"header": {"name": "x-team", "exact": "a"}}],
            }
        ],
        "tcpproxy": {
            "loadBalancerPolicy": {"strategy": "WeightedLeastRequest"},
            "services": [_SERVICE],
            "include": {"name": "tcp", "namespace": "team"},
            "includes": {"name": "legacy", "namespace": "team"},
            "healthCheckPolicy": {
                "intervalSeconds": 10,
                "timeoutSeconds": 2,
                "unhealthyThresholdCount": 3,
                "healthyThresholdCount": 1,
            },
        },
    },
}


def _proxy(
    spec: dict[str, Any] | None = None, name: str = "web", namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec if spec is not None else {"virtualhost": {"fqdn": "example.com"}},
    }


@pytest.fixture
def full_proxy() -> dict[str, Any]:
    """A fresh copy of an HTTPProxy using every field."""
    return copy.deepcopy(FULL_PROXY)


@pytest.fixture
def proxy() -> Callable[..., dict[str, Any]]:
    """proxy(spec=None, name="web", namespace="default") -> an HTTPProxy object."""
    return _proxy
