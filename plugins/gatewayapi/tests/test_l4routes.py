"""TLSRoutes and TCPRoutes through a whole build (``cpx_translate``): attachment, status, and the
Envoy listeners and filter chains they get (TLS listeners on ``https-<port>-<address>``, one SNI
chain per hostname; TCP listeners on ``tcp-<port>-<address>``, one chain for every connection)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml
from cpx.testing import Translation, make_tls_secret

from cpx_gatewayapi import l4schema
from cpx_gatewayapi.kinds import GROUP

Translate = Callable[..., Translation]
ADDRESS = "127.0.0.10"
TLS_LISTENER = "https-443-127_0_0_10"
TCP_LISTENER = "tcp-9000-127_0_0_10"
TCP_PROXY = "envoy.filters.network.tcp_proxy"

BASE = f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: contour}}
spec: {{controllerName: projectcontour.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default, generation: 1}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress, value: "{ADDRESS}"}}]
  listeners:
  - {{name: http, port: 80, protocol: HTTP}}
  - {{name: pass, port: 443, protocol: TLS, hostname: "*.example.com", tls: {{mode: Passthrough}}}}
  - name: term
    port: 443
    protocol: TLS
    hostname: tls.example.org
    tls: {{mode: Terminate, certificateRefs: [{{name: cert}}]}}
  - {{name: tcp, port: 9000, protocol: TCP}}
---
apiVersion: v1
kind: Service
metadata: {{name: tls-backend, namespace: default}}
spec: {{ports: [{{port: 443, targetPort: 8443}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: v1, namespace: default}}
spec: {{ports: [{{port: 3000}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: v2, namespace: default}}
spec: {{ports: [{{port: 3000}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: other, namespace: elsewhere}}
spec: {{ports: [{{port: 3000}}]}}
"""


def route(kind: str, name: str, spec: str, created: str = "2026-01-01T00:00:00Z", version: str = "v1") -> str:
    return f"""
---
apiVersion: gateway.networking.k8s.io/{version}
kind: {kind}
metadata: {{name: {name}, namespace: default, generation: 2, creationTimestamp: "{created}"}}
spec:
{spec}
"""


PASSTHROUGH = """
  parentRefs: [{name: gw, sectionName: pass}]
  hostnames: [abc.example.com]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
"""
TERMINATE = """
  parentRefs: [{name: gw, sectionName: term}]
  hostnames: [tls.example.org]
  rules: [{backendRefs: [{name: v1, port: 3000}]}]
"""
TCP = """
  parentRefs: [{name: gw, sectionName: tcp}]
  rules: [{backendRefs: [{name: v1, port: 3000}]}]
"""


def build(cpx_translate: Translate, *docs: str) -> Translation:
    secret, _ = make_tls_secret("default", "cert", ["tls.example.org"])
    return cpx_translate(BASE + "---\n" + yaml.safe_dump(secret) + "".join(docs), ["gatewayapi"])


def listener(result: Translation, name: str) -> dict[str, Any] | None:
    return next((li for li in result.envoy_json()["listeners"] if li["name"] == name), None)


def chains(result: Translation, name: str = TLS_LISTENER) -> dict[str, dict[str, Any]]:
    """A listener's filter chains by server name ("" for none)."""
    found = listener(result, name)
    assert found is not None, f"no listener {name}"
    return {
        ",".join(chain.get("filterChainMatch", {}).get("serverNames", [])): chain
        for chain in found["filterChains"]
    }


def tcp_proxy(chain: Mapping[str, Any]) -> dict[str, Any]:
    [network_filter] = chain["filters"]
    assert network_filter["name"] == TCP_PROXY
    return dict(network_filter["typedConfig"])


def conditions(result: Translation, kind: str, name: str) -> list[dict[str, tuple[str, str]]]:
    return [
        {c["type"]: (c["status"], c["reason"]) for c in parent["conditions"]}
        for parent in result.status(kind, name)["parents"]
    ]


def attached(result: Translation, listener_name: str) -> int:
    [entry] = [e for e in result.status("Gateway", "gw")["listeners"] if e["name"] == listener_name]
    return int(entry["attachedRoutes"])


ACCEPTED = {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}


def test_passthrough_route_proxies_its_sni_untouched(cpx_translate: Translate) -> None:
    result = build(cpx_translate, route("TLSRoute", "r", PASSTHROUGH))
    chain = chains(result)["abc.example.com"]
    assert "transportSocket" not in chain  # the backend terminates TLS
    assert tcp_proxy(chain)["cluster"].startswith("default/tls-backend/443/")
    found = listener(result, TLS_LISTENER)
    assert found is not None and found["address"]["socketAddress"] == {"address": ADDRESS, "portValue": 8443}
    assert [f["name"] for f in found["listenerFilters"]] == ["envoy.filters.listener.tls_inspector"]
    assert conditions(result, "TLSRoute", "r") == [ACCEPTED]
    [parent] = result.status("TLSRoute", "r")["parents"]
    assert parent["parentRef"] == {"group": GROUP, "kind": "Gateway", "name": "gw", "sectionName": "pass"}
    assert {c["observedGeneration"] for c in parent["conditions"]} == {2}
    assert attached(result, "pass") == 1 and attached(result, "term") == 0


def test_terminate_route_proxies_the_decrypted_stream(cpx_translate: Translate) -> None:
    result = build(cpx_translate, route("TLSRoute", "r", TERMINATE))
    chain = chains(result)["tls.example.org"]
    assert chain["transportSocket"]["name"] == "envoy.transport_sockets.tls"
    assert tcp_proxy(chain)["cluster"].startswith("default/v1/3000/")
    assert conditions(result, "TLSRoute", "r") == [ACCEPTED]


def test_passthrough_and_terminate_share_one_port(cpx_translate: Translate) -> None:
    result = build(cpx_translate, route("TLSRoute", "a", PASSTHROUGH), route("TLSRoute", "b", TERMINATE))
    assert set(chains(result)) == {"abc.example.com", "tls.example.org"}


def test_tcp_route_gets_the_whole_listener(cpx_translate: Translate) -> None:
    result = build(cpx_translate, route("TCPRoute", "r", TCP, version="v1alpha2"))
    found = listener(result, TCP_LISTENER)
    assert found is not None
    assert found["address"]["socketAddress"] == {"address": ADDRESS, "portValue": 17000}
    [chain] = found["filterChains"]
    assert "filterChainMatch" not in chain and "listenerFilters" not in found
    assert tcp_proxy(chain)["cluster"].startswith("default/v1/3000/")
    assert conditions(result, "TCPRoute", "r") == [ACCEPTED]
    assert attached(result, "tcp") == 1


def test_two_tcp_routes_on_one_listener_the_older_serves(cpx_translate: Translate) -> None:
    newer = TCP.replace("name: v1,", "name: v2,")
    result = build(
        cpx_translate,
        route("TCPRoute", "newer", newer, created="2026-02-01T00:00:00Z"),
        route("TCPRoute", "older", TCP, created="2026-01-01T00:00:00Z"),
    )
    [chain] = chains(result, TCP_LISTENER).values()
    assert tcp_proxy(chain)["cluster"].startswith("default/v1/3000/")
    assert conditions(result, "TCPRoute", "older") == [ACCEPTED]
    assert conditions(result, "TCPRoute", "newer") == [ACCEPTED]
    assert attached(result, "tcp") == 2


def test_weights_split_connections_and_zero_gets_none(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw, port: 9000}]
  rules:
  - backendRefs: [{name: v1, port: 3000, weight: 70}, {name: v2, port: 3000, weight: 30},
                  {name: tls-backend, port: 443, weight: 0}]
"""
    result = build(cpx_translate, route("TCPRoute", "r", spec))
    [chain] = chains(result, TCP_LISTENER).values()
    weighted = tcp_proxy(chain)["weightedClusters"]["clusters"]
    assert [(c["name"].split("/")[1], c["weight"]) for c in weighted] == [("v1", 70), ("v2", 30)]


def test_routes_on_listeners_of_another_protocol_are_not_allowed(cpx_translate: Translate) -> None:
    on_http = TCP.replace("sectionName: tcp", "sectionName: http")
    tcp_on_tls = TCP.replace("sectionName: tcp", "sectionName: pass")
    tls_on_tcp = PASSTHROUGH.replace("sectionName: pass", "sectionName: tcp")
    result = build(
        cpx_translate,
        route("TCPRoute", "on-http", on_http),
        route("TCPRoute", "tcp-on-tls", tcp_on_tls),
        route("TLSRoute", "tls-on-tcp", tls_on_tcp),
    )
    for kind, name in (("TCPRoute", "on-http"), ("TCPRoute", "tcp-on-tls"), ("TLSRoute", "tls-on-tcp")):
        [found] = conditions(result, kind, name)
        assert found["Accepted"] == ("False", "NotAllowedByListeners")
    assert listener(result, TCP_LISTENER) is None and listener(result, TLS_LISTENER) is None
    assert attached(result, "http") == attached(result, "tcp") == attached(result, "pass") == 0


def test_no_matching_parent_or_hostname(cpx_translate: Translate) -> None:
    unknown_section = PASSTHROUGH.replace("sectionName: pass", "sectionName: nope")
    other_host = PASSTHROUGH.replace("abc.example.com", "abc.example.net")
    result = build(
        cpx_translate,
        route("TLSRoute", "section", unknown_section),
        route("TLSRoute", "host", other_host),
    )
    assert conditions(result, "TLSRoute", "section")[0]["Accepted"] == ("False", "NoMatchingParent")
    assert conditions(result, "TLSRoute", "host")[0]["Accepted"] == ("False", "NoMatchingListenerHostname")
    assert attached(result, "pass") == 0


def test_bad_backends_refuse_connections(cpx_translate: Translate) -> None:
    missing = PASSTHROUGH.replace("name: tls-backend", "name: missing")
    kind = PASSTHROUGH.replace("{name: tls-backend,", "{kind: Gadget, group: example.com, name: tls-backend,")
    cross = TCP.replace("{name: v1,", "{name: other, namespace: elsewhere,")
    result = build(
        cpx_translate,
        route("TLSRoute", "missing", missing.replace("abc.", "a.")),
        route("TLSRoute", "kind", kind.replace("abc.", "b.")),
        route("TCPRoute", "cross", cross),
    )
    for route_kind, name, reason in (
        ("TLSRoute", "missing", "BackendNotFound"),
        ("TLSRoute", "kind", "InvalidKind"),
        ("TCPRoute", "cross", "RefNotPermitted"),
    ):
        [found] = conditions(result, route_kind, name)
        assert found == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", reason)}
    # Nothing to proxy to: no chain, so Envoy refuses those connections.
    assert listener(result, TLS_LISTENER) is None and listener(result, TCP_LISTENER) is None
    assert attached(result, "pass") == 2 and attached(result, "tcp") == 1


def test_reference_grant_admits_a_cross_namespace_backend(cpx_translate: Translate) -> None:
    cross = TCP.replace("{name: v1,", "{name: other, namespace: elsewhere,")
    grant = """
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: tcp, namespace: elsewhere}
spec:
  from: [{group: gateway.networking.k8s.io, kind: TCPRoute, namespace: default}]
  to: [{group: "", kind: Service}]
"""
    result = build(cpx_translate, route("TCPRoute", "cross", cross), grant)
    assert conditions(result, "TCPRoute", "cross") == [ACCEPTED]
    [chain] = chains(result, TCP_LISTENER).values()
    assert tcp_proxy(chain)["cluster"].startswith("elsewhere/other/3000/")


def test_most_specific_listener_owns_a_hostname(cpx_translate: Translate) -> None:
    """A TLSRoute on the wildcard listener does not take a name a more specific listener owns."""
    both = PASSTHROUGH.replace("sectionName: pass}", "}").replace(
        "[abc.example.com]", "[abc.example.com, tls.example.org]"
    )
    result = build(cpx_translate, route("TLSRoute", "r", both))
    found = chains(result)
    assert set(found) == {"abc.example.com", "tls.example.org"}
    assert "transportSocket" not in found["abc.example.com"]  # the Passthrough listener's
    assert "transportSocket" in found["tls.example.org"]  # the Terminate listener's
    assert attached(result, "pass") == 1 and attached(result, "term") == 1


def test_older_tls_route_keeps_a_hostname(cpx_translate: Translate) -> None:
    newer = PASSTHROUGH.replace("name: tls-backend, port: 443", "name: v2, port: 3000")
    result = build(
        cpx_translate,
        route("TLSRoute", "newer", newer, created="2026-02-01T00:00:00Z"),
        route("TLSRoute", "older", PASSTHROUGH),
    )
    assert tcp_proxy(chains(result)["abc.example.com"])["cluster"].startswith("default/tls-backend/443/")


def test_schema_refuses_what_the_api_server_would() -> None:
    def obj(version: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        return {"apiVersion": f"{GROUP}/{version}", "metadata": {"name": "r", "namespace": "d"}, "spec": spec}

    good: dict[str, Any] = {
        "parentRefs": [{"name": "gw"}],
        "rules": [{"backendRefs": [{"name": "s", "port": 1}]}],
    }
    assert l4schema.validate_tcproute(obj("v1alpha2", good)) == []
    assert l4schema.validate_tlsroute(obj("v1alpha2", good)) == []
    assert l4schema.validate_tlsroute(obj("v1", good)) == ["spec.hostnames: Required value"]
    two_rules = {**good, "hostnames": ["a.b"], "rules": good["rules"] * 2}
    assert l4schema.validate_tlsroute(obj("v1alpha2", two_rules)) == []
    assert l4schema.validate_tlsroute(obj("v1", two_rules)) == [
        "spec.rules: Too many: 2: must have at most 1 items"
    ]
    no_port = {"rules": [{"backendRefs": [{"name": "s"}]}]}
    [problem] = l4schema.validate_tcproute(obj("v1", no_port))
    assert "Must have port for Service reference" in problem
    assert l4schema.validate_tcproute(obj("v1", {"rules": [{}]})) == [
        "spec.rules[0].backendRefs: Required value"
    ]
    [bad_host] = l4schema.validate_tlsroute(obj("v1", {**good, "hostnames": ["Not_A_Host"]}))
    assert bad_host.startswith("spec.hostnames[0]: Invalid value")
