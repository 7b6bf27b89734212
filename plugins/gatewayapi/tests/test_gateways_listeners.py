"""The listener rules that need no build: Envoy ports, names, route kinds, allowedRoutes.namespaces."""

from __future__ import annotations

from typing import Any

import pytest

from cpx_gatewayapi import listeners as ls


@pytest.mark.parametrize(
    ("port", "envoy"),
    [
        (80, 8080),
        (443, 8443),
        (8080, 16080),
        (58000, 1488),
        (65535, 8000),
        (57536, 1024),
        (58559, 1024),
        (1, 8001),
    ],
)
def test_envoy_port_is_contours_mapping(port: int, envoy: int) -> None:
    assert ls.envoy_port(port) == envoy


def test_listener_names_are_contours_on_the_default_address_and_carry_others() -> None:
    assert ls.listener_name("http", 80, "0.0.0.0", "0.0.0.0") == "http-80"
    assert ls.listener_name("https", 443, "0.0.0.0", "0.0.0.0") == "https-443"
    assert ls.listener_name("http", 80, "127.0.0.2", "0.0.0.0") == "http-80-127_0_0_2"
    assert ls.listener_name("https", 443, "::1", "0.0.0.0") == "https-443-__1"


def test_route_kinds_default_to_the_protocols() -> None:
    assert ls.route_kinds("HTTP", None) == (("HTTPRoute", "GRPCRoute"), [])
    assert ls.route_kinds("HTTPS", []) == (("HTTPRoute", "GRPCRoute"), [])
    assert ls.route_kinds("TLS", None) == (("TLSRoute",), [])
    assert ls.route_kinds("TCP", None) == (("TCPRoute",), [])
    assert ls.route_kinds("UDP", None) == ((), [])


def test_route_kinds_keep_the_valid_subset_and_name_the_others() -> None:
    kinds = [
        {"kind": "GRPCRoute"},
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"},
        {"kind": "TCPRoute"},
        {"group": "example.com", "kind": "HTTPRoute"},
        {"group": "", "kind": "Service"},
    ]
    assert ls.route_kinds("HTTP", kinds) == (
        ("HTTPRoute", "GRPCRoute"),
        ["gateway.networking.k8s.io/TCPRoute", "example.com/HTTPRoute", "Service"],
    )
    # TCPRoute on a TLS listener: refused, as the conformance suite expects.
    assert ls.route_kinds("TLS", [{"kind": "TCPRoute"}, {"kind": "TLSRoute"}]) == (
        ("TLSRoute",),
        ["gateway.networking.k8s.io/TCPRoute"],
    )
    assert ls.route_kinds("HTTP", [{"kind": "Bogus"}]) == ((), ["gateway.networking.k8s.io/Bogus"])


def test_namespaces_same_is_the_default() -> None:
    choices: list[Any] = [None, {}, {"namespaces": {}}, {"namespaces": {"from": "Same"}}]
    for allowed in choices:
        admits = ls.namespace_admission("infra", allowed)
        assert admits("infra", {})
        assert not admits("other", {})


def test_namespaces_all() -> None:
    admits = ls.namespace_admission("infra", {"namespaces": {"from": "All"}})
    assert admits("infra", {}) and admits("anything", {"a": "b"})


def test_namespaces_selector_match_labels_and_expressions() -> None:
    selector: dict[str, Any] = {
        "matchLabels": {"gateway-conformance": "backend"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "api"]},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    }
    admits = ls.namespace_admission("infra", {"namespaces": {"from": "Selector", "selector": selector}})
    assert admits("web-backend", {"gateway-conformance": "backend", "tier": "web"})
    assert not admits("web-backend", {"gateway-conformance": "backend", "tier": "db"})
    assert not admits("web-backend", {"gateway-conformance": "backend", "tier": "web", "legacy": "1"})
    assert not admits("infra", {"gateway-conformance": "infra", "tier": "web"})


def test_namespaces_selector_sees_the_namespace_name_label() -> None:
    selector = {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}
    admits = ls.namespace_admission("infra", {"namespaces": {"from": "Selector", "selector": selector}})
    assert admits("apps", {}) and not admits("infra", {})


@pytest.mark.parametrize(
    ("expression", "labels", "holds"),
    [
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "y"}, True),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, False),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),
        ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
        ({"key": "a", "operator": "Exists"}, {}, False),
        ({"key": "a", "operator": "In", "values": []}, {"a": "x"}, False),  # invalid: no values
        ({"key": "a", "operator": "Exists", "values": ["x"]}, {"a": "x"}, False),  # invalid: values
        ({"key": "a", "operator": "Matches", "values": ["x"]}, {"a": "x"}, False),  # unknown operator
    ],
)
def test_selector_expressions(expression: dict[str, Any], labels: dict[str, str], holds: bool) -> None:
    assert ls.selector_matches({"matchExpressions": [expression]}, labels) is holds


def test_a_selector_that_is_no_selector_matches_nothing() -> None:
    assert not ls.selector_matches(None, {})
    assert ls.selector_matches({}, {"a": "b"})  # empty selector: everything
    admits = ls.namespace_admission("infra", {"namespaces": {"from": "Selector"}})
    assert not admits("infra", {})
    assert not ls.namespace_admission("infra", {"namespaces": {"from": "Elsewhere"}})("infra", {})
