"""Issue rows: objects the API server accepts whose translation Envoy would reject.

Each used to reach Envoy, be NACKed and block every later change of its type.  Now the offending
object is left out before anything is published, its status names Envoy's rule, and everything
else (including a valid change made afterwards) is served with no Envoy rejecting an update.
"""

from __future__ import annotations

from typing import Any

import pytest

from cpx.testing.tenant import BACKEND, TenantStack
from cpx.testing.tls import weak_tls_secret

pytestmark = pytest.mark.e2e


def proxy(name: str, *, route: dict[str, Any] | None = None, tls: str | None = None) -> dict[str, Any]:
    vhost: dict[str, Any] = {"fqdn": f"{name}.tenant.test"}
    if tls is not None:
        vhost["tls"] = {"secretName": tls}
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "virtualhost": vhost,
            "routes": [{"services": [{"name": BACKEND, "port": 80}], **(route or {})}],
        },
    }


def header(name: str, value: str) -> dict[str, Any]:
    return {"requestHeadersPolicy": {"set": [{"name": name, "value": value}]}}


# (case, route fields of the bad HTTPProxy, text its status must contain)
ROUTE_CASES = [
    ("header-crlf", header("x-evil", "a\r\nx-forged: 1"), "EnvoyConstraintViolated"),
    ("header-16k", header("x-big", "a" * 17_000), "EnvoyConstraintViolated"),
    (
        "direct-body",
        {"services": [], "directResponsePolicy": {"statusCode": 200, "body": "b" * 5000}},
        "EnvoyConstraintViolated",
    ),
    (
        "redirect-cr",
        {"services": [], "requestRedirectPolicy": {"path": "/a\rb"}},
        "EnvoyConstraintViolated",
    ),
    (
        "rewrite-cr",
        {
            "conditions": [{"prefix": "/p"}],
            "pathRewritePolicy": {"replacePrefix": [{"prefix": "/p", "replacement": "/a\rb"}]},
        },
        "EnvoyConstraintViolated",
    ),
    (
        "query-1k",
        {"conditions": [{"queryParameter": {"name": "q" * 1100, "exact": "1"}}]},
        "EnvoyConstraintViolated",
    ),
    (
        "ratelimit-host",
        {
            "rateLimitPolicy": {
                "local": {
                    "requests": 5,
                    "unit": "second",
                    "responseHeadersToAdd": [{"name": "Host", "value": "x"}],
                }
            }
        },
        "EnvoyConstraintViolated",
    ),
    (
        "healthcheck-crlf",
        {"healthCheckPolicy": {"path": "/a\r\nb", "host": "h\r\nx"}},
        "EnvoyConstraintViolated",
    ),
]


@pytest.mark.parametrize(("case", "route", "problem"), ROUTE_CASES, ids=[c[0] for c in ROUTE_CASES])
def test_an_httpproxy_envoy_would_reject_is_left_out(
    tenant: TenantStack, case: str, route: dict[str, Any], problem: str
) -> None:
    def left_out() -> None:
        assert tenant.get(f"{case}.tenant.test") == 404  # its part is left out

    shown = tenant.check_bad_input(
        f"{case}.yaml",
        [proxy(case, route=route)],
        kind="HTTPProxy",
        name=case,
        problem=problem,
        check=left_out,
    )
    assert "currentStatus: invalid" in shown


def test_an_ingress_prefix_path_with_a_query_is_left_out(tenant: TenantStack) -> None:
    bad = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "query-path", "namespace": "default"},
        "spec": {
            "rules": [
                {
                    "host": "query-path.tenant.test",
                    "http": {
                        "paths": [
                            {
                                "path": "/a?b",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": BACKEND, "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }
    tenant.check_bad_input("query-path.yaml", [bad], kind="Ingress", name="query-path", problem="query-path")


def test_a_tls_secret_with_a_1024_bit_rsa_key_is_left_out(tenant: TenantStack) -> None:
    secret = weak_tls_secret("default", "weak", "weak.tenant.test")
    tenant.check_bad_input(
        "weak.yaml",
        [secret, proxy("weak", tls="weak")],
        kind="Secret",
        name="weak",
        problem="2048",
    )


def test_an_endpointslice_with_an_invalid_address_is_left_out(tenant: TenantStack) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "badaddr", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "badaddr-1",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "badaddr"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["999.1.1.1"]}],
    }
    tenant.check_bad_input(
        "badaddr.yaml",
        [service, endpoints, proxy("badaddr", route={"services": [{"name": "badaddr", "port": 80}]})],
        kind="EndpointSlice",
        name="badaddr-1",
        problem="999.1.1.1",
    )


def test_a_huge_health_check_timeout_is_clamped_to_what_envoy_accepts(tenant: TenantStack) -> None:
    # Used to be clamped to protobuf's largest Duration, which Envoy refuses (it converts to int64
    # nanoseconds): now to Envoy's largest, so the proxy is valid and served.
    route = {"healthCheckPolicy": {"path": "/", "timeoutSeconds": 9223372036854775807}}
    tenant.check_bad_input(
        "hc-timeout.yaml",
        [proxy("hc-timeout", route=route)],
        kind="HTTPProxy",
        name="hc-timeout",
        problem="currentStatus: valid",
        check=lambda: tenant.wait_served("hc-timeout.tenant.test"),
    )
