"""The upstream TLSRoute* and TCPRoute* conformance manifests (vendored in ``manifests/``) through one
build (``cpx_translate``): the statuses each upstream test waits for, and the Envoy filter chains
its traffic checks would go through.  The base set and each test's YAML are built as the suite
applies them (``{GATEWAY_CLASS_NAME}`` = contour, each Gateway its own loopback address, the
suite's TLS Secrets).  Traffic itself is checked in ``test_l4routes_upstream_e2e.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from cpx.testing import Translation

from cpx_gatewayapi.l4testing import CONTROLLER_NAME, INFRA_NS, newer_tcproute, upstream_docs
from cpx_gatewayapi.listeners import envoy_port

Translate = Callable[..., Translation]
MANIFESTS = Path(__file__).parent / "manifests"
INFRA = INFRA_NS


class Built:
    def __init__(self, result: Translation, addresses: Mapping[str, str]) -> None:
        self.result, self.addresses = result, addresses

    def conditions(self, kind: str, name: str, gateway: str) -> dict[str, tuple[str, str]]:
        [parent] = [
            p for p in self.result.status(kind, name, INFRA)["parents"] if p["parentRef"]["name"] == gateway
        ]
        assert parent["controllerName"] == CONTROLLER_NAME
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
        address, mapped = self.addresses[gateway], envoy_port(port)
        found: dict[str, str] = {}
        for listener in self.result.dag.listeners.values():
            if (listener.address, listener.port) != (address, mapped):
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


@pytest.fixture
def l4_build(cpx_translate: Translate) -> Callable[..., Built]:
    def build(manifest: str, *extra: dict[str, Any]) -> Built:
        docs, addresses = upstream_docs(MANIFESTS, manifest, *extra)
        return Built(cpx_translate(yaml.safe_dump_all(docs), ["gatewayapi"]), addresses)

    return build


ACCEPTED = {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}


def test_tlsroute_simple_same_namespace(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tlsroute-simple-same-namespace.yaml")
    assert built.conditions("TLSRoute", "gateway-conformance-infra-test", "gateway-tlsroute") == ACCEPTED
    assert built.chains("gateway-tlsroute", 443) == {"abc.example.com": "tcp-backend"}


def test_tlsroute_hostname_intersection(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tlsroute-hostname-intersection.yaml")
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
    l4_build: Callable[..., Built], manifest: str, route: str, gateway: str, reason: str
) -> None:
    built = l4_build(manifest)
    assert built.conditions("TLSRoute", route, gateway) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", reason),
    }
    assert built.chains(gateway, 443) == {}  # connections rejected


def test_tlsroute_invalid_no_matching_listener_hostname(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tlsroute-invalid-no-matching-listener-hostname.yaml")
    for route, gateway in (
        ("tlsroute-hostname-mismatch-1", "gateway-tls-exact-hostname"),
        ("tlsroute-hostname-mismatch-2", "gateway-tls-wildcard-hostname"),
    ):
        assert built.conditions("TLSRoute", route, gateway)["Accepted"] == (
            "False",
            "NoMatchingListenerHostname",
        )
        assert built.listener(gateway, "tls")[0] == 0


def test_tlsroute_invalid_no_matching_listener(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tlsroute-invalid-no-matching-listener.yaml")
    for route, gateway, reason in (
        ("tlsroute-not-allowed-protocol-http", "gateway-tlsroute-http-only", "NotAllowedByListeners"),
        ("tlsroute-not-allowed-protocol-https", "gateway-tlsroute-https-only", "NotAllowedByListeners"),
        ("tlsroute-no-matching-section-name", "gateway-tlsroute-tls-passthrough-only", "NoMatchingParent"),
    ):
        assert built.conditions("TLSRoute", route, gateway)["Accepted"] == ("False", reason)
    assert built.listener("gateway-tlsroute-http-only", "http")[0] == 0
    assert built.listener("gateway-tlsroute-https-only", "https")[0] == 0


def test_tlsroute_listener_supported_kinds(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tlsroute-listener-passthrough-supported-kinds.yaml")
    attached, kinds, conditions = built.listener(
        "gateway-tlsroute-passthrough-supported-kind", "tls-passthrough"
    )
    assert (attached, kinds, conditions["ResolvedRefs"]) == (0, ["TLSRoute"], ("False", "InvalidRouteKinds"))
    built = l4_build("tlsroute-listener-terminate-supported-kinds.yaml")
    attached, kinds, conditions = built.listener("gateway-tlsroute-terminate-supported", "tls-terminate")
    assert (attached, kinds, conditions["Accepted"]) == (0, ["TLSRoute"], ("True", "Accepted"))


def test_tlsroute_terminate_simple_same_namespace(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tlsroute-terminate-simple-same-namespace.yaml")
    assert built.conditions("TLSRoute", "tlsroute-terminated-test", "gateway-tlsroute-terminate") == ACCEPTED
    assert built.listener("gateway-tlsroute-terminate", "tlsterminate")[2]["Programmed"] == (
        "True",
        "Programmed",
    )
    assert built.chains("gateway-tlsroute-terminate", 8443) == {"tls.example.com": "tcp-backend"}


def test_tlsroute_mixed_termination_same_namespace(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tlsroute-mixed-termination-same-namespace.yaml")
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
    l4_build: Callable[..., Built], manifest: str, route: str, gateway: str, reason: str
) -> None:
    built = l4_build(manifest)
    assert built.conditions("TCPRoute", route, gateway) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", reason),
    }
    assert not any(li["name"].startswith("tcp-") for li in built.result.envoy_json()["listeners"])


def test_tcproute_invalid_non_tcp_listener(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tcproute-invalid-non-tcp-listener.yaml")
    gateway = "tcp-mixed-protocol-gateway"
    assert built.conditions("TCPRoute", "tcp-route", gateway)["Accepted"] == (
        "False",
        "NotAllowedByListeners",
    )
    assert built.listener(gateway, "only-allow-http-routes")[0] == 0


def test_tcproute_multiple_routes_attachment(l4_build: Callable[..., Built]) -> None:
    gateway = "tcp-multi-route-attach-gateway"
    newer = newer_tcproute(gateway, "tcp-attach-backend-2")  # added once the older one is Accepted
    built = l4_build("tcproute-multiple-routes-attachment.yaml", newer)
    for route in ("tcproute-attach-older", "tcproute-attach-newer"):
        assert built.conditions("TCPRoute", route, gateway) == ACCEPTED
    attached, kinds, conditions = built.listener(gateway, "tcp")
    assert (attached, kinds, conditions["Accepted"]) == (2, ["TCPRoute"], ("True", "Accepted"))
    assert built.chains(gateway, 9310) == {"": "tcp-attach-backend-1"}  # only the older one's


def test_tcproute_parentref_attach_all(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tcproute-parentref-attach-all.yaml")
    gateway = "tcp-attach-all-gateway"
    assert built.conditions("TCPRoute", "tcp-route-attach-all", gateway) == ACCEPTED
    for name, port in (("one", 9310), ("two", 9311), ("three", 9312), ("four", 9313)):
        assert built.listener(gateway, name)[0] == 1
        assert built.chains(gateway, port) == {"": "tcp-echo-attach-all"}


def test_tcproute_parentref_port_and_section_name(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tcproute-parentref-port-and-section-name.yaml")
    gateway = "tcp-multi-listener-gateway"
    for route in ("tcp-route-by-port", "tcp-route-by-section", "tcp-route-by-section-and-port"):
        assert built.conditions("TCPRoute", route, gateway) == ACCEPTED
    for port, backend in ((9300, "tcp-echo-one"), (9301, "tcp-echo-two"), (9302, "tcp-echo-three")):
        assert built.chains(gateway, port) == {"": backend}


def test_tcproute_reference_grant(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tcproute-reference-grant.yaml")
    gateway = "tcp-reference-grant-gateway"
    assert built.conditions("TCPRoute", "tcp-reference-grant", gateway) == ACCEPTED
    assert built.chains(gateway, 9320) == {"": "tcp-reference-grant-backend"}


def test_tcproute_weighted_routing(l4_build: Callable[..., Built]) -> None:
    built = l4_build("tcproute-weighted-routing.yaml")
    gateway = "tcp-weighted-gateway"
    assert built.conditions("TCPRoute", "tcp-weighted-route", gateway) == ACCEPTED
    assert built.chains(gateway, 9300) == {"": "tcp-backend-v1,tcp-backend-v2"}  # weight 0 left out
