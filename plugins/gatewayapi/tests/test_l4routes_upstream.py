"""The upstream TLSRoute* and TCPRoute* conformance manifests (vendored in ``manifests/``) through one
build (``cpx_translate``): the statuses each upstream test waits for, and the Envoy filter chains
its traffic checks would go through.  The base set and each test's YAML are built as the suite
applies them (``{GATEWAY_CLASS_NAME}`` = contour, each Gateway its own loopback address, the
suite's TLS Secrets).  Traffic itself is checked in ``test_l4routes_e2e.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from cpx.testing import Translation, make_tls_secret

Translate = Callable[..., Translation]
MANIFESTS = Path(__file__).parent / "manifests"
INFRA = "gateway-conformance-infra"
CONTROLLER = "projectcontour.io/gateway-controller"
CLASS: dict[str, Any] = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "GatewayClass",
    "metadata": {"name": "contour"},
    "spec": {"controllerName": CONTROLLER},
}


class Built:
    def __init__(self, result: Translation, addresses: Mapping[str, str]) -> None:
        self.result, self.addresses = result, addresses

    def conditions(self, kind: str, name: str, gateway: str) -> dict[str, tuple[str, str]]:
        [parent] = [
            p for p in self.result.status(kind, name, INFRA)["parents"] if p["parentRef"]["name"] == gateway
        ]
        assert parent["controllerName"] == CONTROLLER
        return {c["type"]: (c["status"], c["reason"]) for c in parent["conditions"]}

    def listener(self, gateway: str, name: str) -> tuple[int, list[str], dict[str, tuple[str, str]]]:
        """attachedRoutes, supportedKinds and conditions of a Gateway listener."""
        [entry] = [e for e in self.result.status("Gateway", gateway, INFRA)["listeners"] if e["name"] == name]
        kinds = [k["kind"] for k in entry["supportedKinds"]]
        return (
            entry["attachedRoutes"],
            kinds,
            {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]},
        )

    def chains(self, gateway: str, port: int) -> dict[str, str]:
        """What Envoy proxies on a Gateway port: server name ("" for any connection) -> the backend
        Services (the DAG's TCP proxies, each of which Envoy has as a filter chain)."""
        address, envoy_port = self.addresses[gateway], _envoy_port(port)
        found: dict[str, str] = {}
        for listener in self.result.dag.listeners.values():
            if (listener.address, listener.port) != (address, envoy_port):
                continue
            proxies = {"": listener.tcp_proxy} if listener.tcp_proxy is not None else {}
            proxies.update(
                (v.name, v.tcp_proxy) for v in listener.secure_virtual_hosts.values() if v.tcp_proxy
            )
            found = {name: ",".join(c.upstream.name for c in p.clusters) for name, p in proxies.items() if p}
            [envoy] = [li for li in self.result.envoy_json()["listeners"] if li["name"] == listener.name]
            served = {
                ",".join(c.get("filterChainMatch", {}).get("serverNames", [])) for c in envoy["filterChains"]
            }
            assert served == set(found)
        return found


def _envoy_port(port: int) -> int:
    mapped = port + 8000
    mapped = mapped - 65535 if mapped > 65535 else mapped
    return mapped + 1023 if mapped <= 1023 else mapped


def _load(name: str) -> list[dict[str, Any]]:
    text = (MANIFESTS / name).read_text().replace("{GATEWAY_CLASS_NAME}", "contour")
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.fixture
def upstream(cpx_translate: Translate) -> Callable[..., Built]:
    def build(manifest: str, *extra: dict[str, Any]) -> Built:
        secrets = [
            make_tls_secret(INFRA, "tls-passthrough-checks-certificate", ["abc.example.com"])[0],
            make_tls_secret(INFRA, "tls-terminate-checks-certificate", ["tls.example.com"])[0],
        ]
        docs = [CLASS, *_load("base.yaml"), *secrets, *_load(manifest), *extra]
        addresses: dict[str, str] = {}
        for doc in docs:
            if doc["kind"] == "Gateway":
                address = f"127.0.0.{len(addresses) + 10}"
                doc["spec"]["addresses"] = [{"type": "IPAddress", "value": address}]
                addresses[doc["metadata"]["name"]] = address
        return Built(cpx_translate(yaml.safe_dump_all(docs), ["gatewayapi"]), addresses)

    return build


ACCEPTED = {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}


def test_tlsroute_simple_same_namespace(upstream: Callable[..., Built]) -> None:
    built = upstream("tlsroute-simple-same-namespace.yaml")
    assert built.conditions("TLSRoute", "gateway-conformance-infra-test", "gateway-tlsroute") == ACCEPTED
    assert built.chains("gateway-tlsroute", 443) == {"abc.example.com": "tcp-backend"}


def test_tlsroute_hostname_intersection(upstream: Callable[..., Built]) -> None:
    built = upstream("tlsroute-hostname-intersection.yaml")
    expected = {
        "gw-tlsroute-exact-hostname-x-1": {"abc.example.com": "tls-backend"},
        "gw-tlsroute-more-specific-wc-hostname-x-2": {
            "abc.example.com": "tls-backend",
            "*.example.com": "tls-backend-2",
        },
        "gw-tlsroute-less-specific-wc-hostname-x-3": {
            "abc.example.com": "tls-backend",
            "*.example.com": "tls-backend-2",
        },
        "gw-tlsroute-empty-hostname-x-4": {"abc.example.com": "tls-backend", "*.com": "tls-backend-2"},
    }
    for gateway, chains in expected.items():
        assert built.chains(gateway, 443) == chains, gateway  # other SNIs: no chain, rejected
        for route in built.result.statuses:
            if route.kind == "TLSRoute" and route.name.endswith(gateway[-3:]):
                assert built.conditions("TLSRoute", route.name, gateway) == ACCEPTED


@pytest.mark.parametrize(
    ("manifest", "route", "gateway", "reason"),
    [
        (
            "tlsroute-invalid-backendref-nonexistent.yaml",
            "invalid-backend-ref-nonexistent",
            "gateway-tlsroute-invalid-backend-ref-nonexistent",
            "BackendNotFound",
        ),
        (
            "tlsroute-invalid-backendref-unknown-kind.yaml",
            "invalid-backend-ref-unknown-kind",
            "gateway-tlsroute-invalid-backend-ref-unknown-kind",
            "InvalidKind",
        ),
        (
            "tlsroute-invalid-reference-grant.yaml",
            "gateway-conformance-infra-test",
            "gateway-tlsroute-referencegrant",
            "RefNotPermitted",
        ),
    ],
)
def test_tlsroute_invalid_backends(
    upstream: Callable[..., Built], manifest: str, route: str, gateway: str, reason: str
) -> None:
    built = upstream(manifest)
    assert built.conditions("TLSRoute", route, gateway) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", reason),
    }
    assert built.chains(gateway, 443) == {}  # connections rejected


def test_tlsroute_invalid_no_matching_listener_hostname(upstream: Callable[..., Built]) -> None:
    built = upstream("tlsroute-invalid-no-matching-listener-hostname.yaml")
    for route, gateway in (
        ("tlsroute-hostname-mismatch-1", "gateway-tls-exact-hostname"),
        ("tlsroute-hostname-mismatch-2", "gateway-tls-wildcard-hostname"),
    ):
        assert built.conditions("TLSRoute", route, gateway)["Accepted"] == (
            "False",
            "NoMatchingListenerHostname",
        )
        assert built.listener(gateway, "tls")[0] == 0


def test_tlsroute_invalid_no_matching_listener(upstream: Callable[..., Built]) -> None:
    built = upstream("tlsroute-invalid-no-matching-listener.yaml")
    for route, gateway, reason in (
        ("tlsroute-not-allowed-protocol-http", "gateway-tlsroute-http-only", "NotAllowedByListeners"),
        ("tlsroute-not-allowed-protocol-https", "gateway-tlsroute-https-only", "NotAllowedByListeners"),
        ("tlsroute-no-matching-section-name", "gateway-tlsroute-tls-passthrough-only", "NoMatchingParent"),
    ):
        assert built.conditions("TLSRoute", route, gateway)["Accepted"] == ("False", reason)
    assert built.listener("gateway-tlsroute-http-only", "http")[0] == 0
    assert built.listener("gateway-tlsroute-https-only", "https")[0] == 0


def test_tlsroute_listener_supported_kinds(upstream: Callable[..., Built]) -> None:
    built = upstream("tlsroute-listener-passthrough-supported-kinds.yaml")
    attached, kinds, conditions = built.listener(
        "gateway-tlsroute-passthrough-supported-kind", "tls-passthrough"
    )
    assert (attached, kinds, conditions["ResolvedRefs"]) == (0, ["TLSRoute"], ("False", "InvalidRouteKinds"))
    built = upstream("tlsroute-listener-terminate-supported-kinds.yaml")
    attached, kinds, conditions = built.listener("gateway-tlsroute-terminate-supported", "tls-terminate")
    assert (attached, kinds, conditions["Accepted"]) == (0, ["TLSRoute"], ("True", "Accepted"))


def test_tlsroute_terminate_simple_same_namespace(upstream: Callable[..., Built]) -> None:
    built = upstream("tlsroute-terminate-simple-same-namespace.yaml")
    assert built.conditions("TLSRoute", "tlsroute-terminated-test", "gateway-tlsroute-terminate") == ACCEPTED
    assert built.listener("gateway-tlsroute-terminate", "tlsterminate")[2]["Programmed"] == (
        "True",
        "Programmed",
    )
    assert built.chains("gateway-tlsroute-terminate", 8443) == {"tls.example.com": "tcp-backend"}


def test_tlsroute_mixed_termination_same_namespace(upstream: Callable[..., Built]) -> None:
    built = upstream("tlsroute-mixed-termination-same-namespace.yaml")
    gateway = "gateway-tlsroute-mixed-termination"
    for route in ("gateway-conformance-mixed-passthroughroute", "gateway-conformance-mixed-terminateroute"):
        assert built.conditions("TLSRoute", route, gateway) == ACCEPTED
    for name in ("tls-terminate", "tls-passthrough"):
        assert built.listener(gateway, name)[2]["Programmed"] == ("True", "Programmed")
    assert built.chains(gateway, 8883) == {"abc.example.com": "tcp-backend", "tls.example.com": "tcp-backend"}


@pytest.mark.parametrize(
    ("manifest", "route", "gateway", "reason"),
    [
        (
            "tcproute-invalid-backendref-nonexistent.yaml",
            "tcp-route-invalid-backend-ref-nonexistent",
            "tcp-gateway-invalid-backend",
            "BackendNotFound",
        ),
        (
            "tcproute-invalid-cross-namespace-backend-ref.yaml",
            "tcp-invalid-cross-namespace-backend-ref",
            "tcp-invalid-cross-namespace-backend-ref-gateway",
            "RefNotPermitted",
        ),
    ],
)
def test_tcproute_invalid_backends(
    upstream: Callable[..., Built], manifest: str, route: str, gateway: str, reason: str
) -> None:
    built = upstream(manifest)
    assert built.conditions("TCPRoute", route, gateway) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", reason),
    }
    assert not any(li["name"].startswith("tcp-") for li in built.result.envoy_json()["listeners"])


def test_tcproute_invalid_non_tcp_listener(upstream: Callable[..., Built]) -> None:
    built = upstream("tcproute-invalid-non-tcp-listener.yaml")
    gateway = "tcp-mixed-protocol-gateway"
    assert built.conditions("TCPRoute", "tcp-route", gateway)["Accepted"] == (
        "False",
        "NotAllowedByListeners",
    )
    assert built.listener(gateway, "only-allow-http-routes")[0] == 0


def test_tcproute_multiple_routes_attachment(upstream: Callable[..., Built]) -> None:
    gateway = "tcp-multi-route-attach-gateway"
    # The upstream test adds the newer route once the older one is Accepted.
    newer = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "TCPRoute",
        "metadata": {
            "name": "tcproute-attach-newer",
            "namespace": INFRA,
            "creationTimestamp": "2999-01-01T00:00:00Z",
        },
        "spec": {
            "parentRefs": [{"name": gateway, "sectionName": "tcp"}],
            "rules": [{"backendRefs": [{"name": "tcp-attach-backend-2", "port": 3000}]}],
        },
    }
    built = upstream("tcproute-multiple-routes-attachment.yaml", newer)
    for route in ("tcproute-attach-older", "tcproute-attach-newer"):
        assert built.conditions("TCPRoute", route, gateway) == ACCEPTED
    attached, kinds, conditions = built.listener(gateway, "tcp")
    assert (attached, kinds, conditions["Accepted"]) == (2, ["TCPRoute"], ("True", "Accepted"))
    assert built.chains(gateway, 9310) == {"": "tcp-attach-backend-1"}  # only the older one's


def test_tcproute_parentref_attach_all(upstream: Callable[..., Built]) -> None:
    built = upstream("tcproute-parentref-attach-all.yaml")
    gateway = "tcp-attach-all-gateway"
    assert built.conditions("TCPRoute", "tcp-route-attach-all", gateway) == ACCEPTED
    for name, port in (("one", 9310), ("two", 9311), ("three", 9312), ("four", 9313)):
        assert built.listener(gateway, name)[0] == 1
        assert built.chains(gateway, port) == {"": "tcp-echo-attach-all"}


def test_tcproute_parentref_port_and_section_name(upstream: Callable[..., Built]) -> None:
    built = upstream("tcproute-parentref-port-and-section-name.yaml")
    gateway = "tcp-multi-listener-gateway"
    for route in ("tcp-route-by-port", "tcp-route-by-section", "tcp-route-by-section-and-port"):
        assert built.conditions("TCPRoute", route, gateway) == ACCEPTED
    for port, backend in ((9300, "tcp-echo-one"), (9301, "tcp-echo-two"), (9302, "tcp-echo-three")):
        assert built.chains(gateway, port) == {"": backend}


def test_tcproute_reference_grant(upstream: Callable[..., Built]) -> None:
    built = upstream("tcproute-reference-grant.yaml")
    gateway = "tcp-reference-grant-gateway"
    assert built.conditions("TCPRoute", "tcp-reference-grant", gateway) == ACCEPTED
    assert built.chains(gateway, 9320) == {"": "tcp-reference-grant-backend"}


def test_tcproute_weighted_routing(upstream: Callable[..., Built]) -> None:
    built = upstream("tcproute-weighted-routing.yaml")
    gateway = "tcp-weighted-gateway"
    assert built.conditions("TCPRoute", "tcp-weighted-route", gateway) == ACCEPTED
    assert built.chains(gateway, 9300) == {"": "tcp-backend-v1,tcp-backend-v2"}  # weight 0 left out
