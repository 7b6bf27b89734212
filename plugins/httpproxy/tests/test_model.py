"""The typed model: structuring from the wire dict, defaults, odd input, and back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from cpx_httpproxy import crd, model
from cpx_httpproxy.model import (
    HTTPProxy,
    HTTPProxySpec,
    MatchCondition,
    RateLimitDescriptorEntry,
    RemoteAddressDescriptor,
    Route,
    Service,
)

Proxy = Callable[..., dict[str, Any]]


def test_round_trip_of_a_full_featured_proxy(full_proxy: dict[str, Any]) -> None:
    proxy = HTTPProxy.from_dict(full_proxy)
    assert proxy.to_dict() == full_proxy
    assert HTTPProxy.from_dict(proxy.to_dict()) == proxy


def test_structure(full_proxy: dict[str, Any]) -> None:
    proxy = HTTPProxy.from_dict(full_proxy)
    assert (proxy.namespace, proxy.name, proxy.generation) == ("default", "full", 7)
    spec = proxy.spec
    assert spec.is_root and spec.ingress_class_name == "contour"
    vhost = spec.virtualhost
    assert vhost is not None and vhost.fqdn == "*.example.com"
    assert vhost.tls is not None and vhost.tls.client_validation is not None
    assert vhost.tls.client_validation.forward_client_certificate == model.ClientCertificateDetails(
        subject=True, cert=True, chain=True, dns=True, uri=True
    )
    assert vhost.authorization is not None and vhost.authorization.auth_policy is not None
    assert dict(vhost.authorization.auth_policy.context) == {"a": "1", "b": "2"}
    assert [p.name for p in vhost.jwt_providers] == ["remote", "local"]
    assert vhost.jwt_providers[0].remote_jwks is not None and vhost.jwt_providers[0].forward_jwt
    assert vhost.jwt_providers[1].local_jwks == model.LocalJWKS(secret_name="jwks", key="jwks.json")
    route = spec.routes[0]
    assert route.conditions[0] == MatchCondition(prefix="/api")
    header = route.conditions[1].header
    assert header is not None and header.not_present and header.not_exact == "d"
    assert route.services[1] == Service(name="shadow", port=80, mirror=True, weight=10)
    assert route.load_balancer_policy is not None
    assert route.load_balancer_policy.request_hash_policies[2].hash_source_ip
    assert route.rate_limit_policy is not None and route.rate_limit_policy.global_ is not None
    entries = route.rate_limit_policy.global_.descriptors[0].entries
    assert entries[3] == RateLimitDescriptorEntry(remote_address=RemoteAddressDescriptor())
    assert entries[2].request_header_value_match is not None
    assert entries[2].request_header_value_match.expect_match is False
    assert route.services[0].cookie_rewrite_policies[0].secure is False
    assert spec.routes[1].request_redirect_policy is not None
    assert spec.routes[1].request_redirect_policy.status_code == 301
    assert spec.tcpproxy is not None and spec.tcpproxy.delegate == model.TCPProxyInclude(
        name="tcp", namespace="team"
    )
    assert spec.includes[0].conditions[1].header is not None


def test_models_are_frozen_and_hashable(full_proxy: dict[str, Any]) -> None:
    proxy = HTTPProxy.from_dict(full_proxy)
    assert hash(proxy) == hash(HTTPProxy.from_dict(full_proxy))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        proxy.spec.routes[0].services[0].port = 1  # type: ignore[misc]


def test_crd_defaults_fill_present_objects() -> None:
    spec = HTTPProxySpec.from_dict(
        {
            "virtualhost": {"fqdn": "a.com", "authorization": {"withRequestBody": {}}},
            "routes": [
                {
                    "retryPolicy": {},
                    "requestRedirectPolicy": {},
                    "internalRedirectPolicy": {},
                    "services": [{"name": "s", "port": 80, "slowStartPolicy": {"window": "5s"}}],
                    "rateLimitPolicy": {
                        "global": {
                            "descriptors": [{"entries": [{"requestHeaderValueMatch": {"value": "v"}}]}]
                        }
                    },
                }
            ],
        }
    )
    assert spec.virtualhost is not None and spec.virtualhost.authorization is not None
    auth = spec.virtualhost.authorization
    assert auth.service_type == "grpc"
    assert auth.with_request_body is not None and auth.with_request_body.max_request_bytes == 1024
    route = spec.routes[0]
    assert route.retry_policy is not None and route.retry_policy.count == 1
    assert route.request_redirect_policy is not None and route.request_redirect_policy.status_code == 302
    assert route.internal_redirect_policy is not None
    assert route.internal_redirect_policy.allow_cross_scheme_redirect == "Never"
    slow = route.services[0].slow_start_policy
    assert slow is not None and (slow.aggression, slow.min_weight_percent) == ("1.0", 10)
    assert route.rate_limit_policy is not None and route.rate_limit_policy.global_ is not None
    match = route.rate_limit_policy.global_.descriptors[0].entries[0].request_header_value_match
    assert match is not None and match.expect_match is True


def _defaults(node: dict[str, Any], path: str = "") -> dict[str, Any]:
    out = {path: node["default"]} if "default" in node else {}
    for name, sub in node.get("properties", {}).items():
        out.update(_defaults(sub, f"{path}.{name}"))
    if "items" in node:
        out.update(_defaults(node["items"], f"{path}[]"))
    return out


def test_model_defaults_are_the_crd_defaults() -> None:
    match = "rateLimitPolicy.global.descriptors[].entries[].requestHeaderValueMatch.expectMatch"
    defaults = _defaults(crd.SPEC)
    assert defaults == {
        ".routes[].services[].slowStartPolicy.aggression": "1.0",
        ".routes[].services[].slowStartPolicy.minWeightPercent": 10,
        f".routes[].{match}": True,
        ".routes[].retryPolicy.count": 1,
        ".routes[].requestRedirectPolicy.statusCode": 302,
        ".routes[].internalRedirectPolicy.allowCrossSchemeRedirect": "Never",
        ".virtualhost.authorization.serviceType": "grpc",
        ".virtualhost.authorization.withRequestBody.maxRequestBytes": 1024,
        f".virtualhost.{match}": True,
        ".tcpproxy.services[].slowStartPolicy.aggression": "1.0",
        ".tcpproxy.services[].slowStartPolicy.minWeightPercent": 10,
    }
    assert model.SlowStartPolicy() == model.SlowStartPolicy(aggression="1.0", min_weight_percent=10)
    assert model.RequestHeaderValueMatchDescriptor().expect_match is True
    assert model.RetryPolicy().count == 1
    assert model.HTTPRequestRedirectPolicy().status_code == 302
    assert model.HTTPInternalRedirectPolicy().allow_cross_scheme_redirect == "Never"
    assert model.AuthorizationServer().service_type == "grpc"
    assert model.AuthorizationServerBufferSettings().max_request_bytes == 1024


def test_to_dict_leaves_out_zero_values_and_writes_crd_defaults() -> None:
    route = Route.from_dict(
        {"services": [{"name": "s", "port": 80, "weight": 0, "mirror": False}], "retryPolicy": {}}
    )
    assert route.to_dict() == {"services": [{"name": "s", "port": 80}], "retryPolicy": {"count": 1}}
    # A non-zero default is always written, so an explicit zero or false survives the round trip.
    assert Route.from_dict({"retryPolicy": {"count": 0}}).to_dict() == {"retryPolicy": {"count": 0}}


@pytest.mark.parametrize(
    "spec",
    [None, "nonsense", [], {"virtualhost": "a.com"}, {"routes": "all"}, {"routes": [{"services": 3}]}],
)
def test_odd_input_gives_defaults(spec: Any) -> None:
    parsed = HTTPProxySpec.from_dict(spec)
    assert parsed.virtualhost is None
    assert all(r.services == () for r in parsed.routes)


def test_odd_fields_are_defaulted_not_raised() -> None:
    route = Route.from_dict(
        {
            "services": [{"name": 5, "port": "80", "weight": True, "mirror": "yes"}, "not a service", None],
            "enableWebsockets": 1,
            "retryPolicy": {"count": 2.0, "retryOn": ["5xx", 7, None]},
            "authPolicy": {"context": {"a": "1", "b": 2}},
            "conditions": [{"header": "x"}],
        }
    )
    # A wrongly-typed object item becomes an empty item, so indices still match the manifest's.
    assert route.services == (Service(), Service(), Service())
    assert route.enable_websockets is False
    assert route.retry_policy == model.RetryPolicy(count=2, retry_on=("5xx",))
    assert route.auth_policy is not None and route.auth_policy.context == (("a", "1"),)
    assert route.conditions == (MatchCondition(),)


def test_http_proxy_metadata(proxy: Proxy) -> None:
    obj = proxy({"includes": [{"name": "child"}]}, name="root", namespace="team")
    parsed = HTTPProxy.from_dict(obj)
    assert (parsed.namespace, parsed.name, parsed.generation) == ("team", "root", 0)
    assert not parsed.spec.is_root
    assert parsed.spec.includes[0] == model.Include(name="child")
    assert HTTPProxy.from_dict({}).name == ""


def test_tcpproxy_legacy_include() -> None:
    tcp = model.TCPProxy.from_dict({"includes": {"name": "old"}})
    assert tcp.delegate == model.TCPProxyInclude(name="old")
    assert tcp.to_dict() == {"includes": {"name": "old"}}
