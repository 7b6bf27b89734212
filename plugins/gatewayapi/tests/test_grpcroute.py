"""GRPCRoutes through a whole build (``cpx_translate``): method and header matches as Envoy route
matches, HTTP/2 clusters, filters, attachment and status, and the HTTPRoute/GRPCRoute split."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cpx.testing import Translation

from cpx_gatewayapi.kinds import GROUP
from cpx_gatewayapi.plugin import cpx_status_writers, cpx_watches

from .test_httproute import BASE, HTTP_LISTENER, conditions, envoy_routes, parents, route

Translate = Callable[..., Translation]
H2C_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def grpc_route(name: str, spec: str, created: str = "2026-01-01T00:00:00Z") -> str:
    return route(name, spec, created=created).replace("kind: HTTPRoute", "kind: GRPCRoute")


def build(cpx_translate: Translate, *docs: str) -> Translation:
    return cpx_translate(BASE + "".join(docs), ["gatewayapi"])


def grpc_parents(result: Translation, name: str) -> list[dict[str, Any]]:
    return list(result.status("GRPCRoute", name, "default")["parents"])


def cluster(result: Translation, prefix: str) -> dict[str, Any]:
    [found] = [c for c in result.envoy_json()["clusters"] if c["name"].startswith(prefix)]
    return dict(found)


SIMPLE = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{method: {service: echo.Echo, method: Echo}}]
    backendRefs: [{name: v1, port: 8080}]
"""


def test_grpcroute_serves_its_method_over_http2(cpx_translate: Translate) -> None:
    result = build(cpx_translate, grpc_route("g", SIMPLE))
    [entry] = envoy_routes(result)
    assert entry["match"] == {"path": "/echo.Echo/Echo"}
    assert entry["route"]["cluster"].startswith("default/v1/8080/")
    options = cluster(result, "default/v1/8080/")["typedExtensionProtocolOptions"][H2C_OPTIONS]
    assert "http2ProtocolOptions" in options["explicitHttpConfig"]
    [parent] = grpc_parents(result, "g")
    assert parent["parentRef"] == {"group": GROUP, "kind": "Gateway", "name": "gw"}
    assert conditions(parent) == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    accepted = next(c for c in parent["conditions"] if c["type"] == "Accepted")
    assert accepted["message"] == "Accepted GRPCRoute"
    assert accepted["observedGeneration"] == 3
    [listener] = result.status("Gateway", "gw", "default")["listeners"]
    assert listener["attachedRoutes"] == 1


def test_an_httproute_to_the_same_service_keeps_http1(cpx_translate: Translate) -> None:
    http = """
  parentRefs: [{name: gw}]
  hostnames: [web.example.com]
  rules:
  - backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, grpc_route("g", SIMPLE), route("h", http))
    names = {c["name"] for c in result.envoy_json()["clusters"] if c["name"].startswith("default/v1/")}
    assert len(names) == 2  # one HTTP/1.1, one h2c: the protocol is part of the cluster's name


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("{service: a.B, method: C}", {"path": "/a.B/C"}),
        ("{type: Exact, service: a.B}", {"prefix": "/a.B/"}),
        ("{method: C}", {"safeRegex": {"regex": "^/[^/]+/C"}}),
        (
            "{type: RegularExpression, service: 'a\\..*', method: 'C.*'}",
            {"safeRegex": {"regex": "^/a\\..*/C.*"}},
        ),
        ("{type: RegularExpression, method: 'C.*'}", {"safeRegex": {"regex": "^/[^/]+/C.*"}}),
    ],
)
def test_method_matches_are_path_matches(cpx_translate: Translate, method: str, expected: Any) -> None:
    spec = f"""
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{method: {method}}}]
    backendRefs: [{{name: v1, port: 8080}}]
"""
    result = build(cpx_translate, grpc_route("g", spec))
    [entry] = envoy_routes(result)
    assert entry["match"] == expected


def test_header_matches_and_no_matches(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - headers: [{name: Version, value: two}, {type: RegularExpression, name: color, value: "gr[ae]y"}]
    backendRefs: [{name: v2, port: 8080}]
  - backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, grpc_route("g", spec))
    by_cluster = {r["route"]["cluster"].split("/")[1]: r["match"] for r in envoy_routes(result)}
    assert by_cluster["v1"] == {"prefix": "/"}
    assert by_cluster["v2"]["prefix"] == "/"
    assert sorted(by_cluster["v2"]["headers"], key=lambda h: str(h["name"])) == [
        {"name": "color", "stringMatch": {"safeRegex": {"regex": "gr[ae]y"}}},
        {"name": "version", "stringMatch": {"exact": "two"}},
    ]


def test_bad_regex_drops_the_rule(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{method: {type: RegularExpression, service: "(", method: M}}]
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{method: {service: s, method: M}}]
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, grpc_route("g", spec))
    assert [r["match"] for r in envoy_routes(result)] == [{"path": "/s/M"}]
    found = conditions(grpc_parents(result, "g")[0])
    assert found["Accepted"] == ("True", "Accepted")
    assert found["PartiallyInvalid"] == ("True", "UnsupportedValue")


def test_weights_filters_and_mirrors(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: X-Set, value: s}], remove: [x-gone]}
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: x-resp, value: r}]}
    - {type: RequestMirror, requestMirror: {backendRef: {name: v2, port: 8080}}}
    backendRefs:
    - name: v1
      port: 8080
      weight: 70
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {set: [{name: x-backend, value: v1}]}
    - {name: v2, port: 8080, weight: 30}
"""
    result = build(cpx_translate, grpc_route("g", spec))
    [entry] = envoy_routes(result)
    assert entry["requestHeadersToRemove"] == ["x-gone"]
    assert entry["responseHeadersToAdd"][0]["header"] == {"key": "x-resp", "value": "r"}
    weighted = {c["name"].split("/")[1]: c for c in entry["route"]["weightedClusters"]["clusters"]}
    assert (weighted["v1"]["weight"], weighted["v2"]["weight"]) == (70, 30)
    assert weighted["v1"]["requestHeadersToAdd"][0]["header"] == {"key": "x-backend", "value": "v1"}
    [mirror] = entry["route"]["requestMirrorPolicies"]
    mirrored = cluster(result, mirror["cluster"])
    assert (
        "http2ProtocolOptions" in mirrored["typedExtensionProtocolOptions"][H2C_OPTIONS]["explicitHttpConfig"]
    )


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("{name: missing, port: 8080}", "BackendNotFound"),
        ("{name: v1, port: 8080, namespace: other}", "RefNotPermitted"),
        ("{group: example.com, kind: Thing, name: v1}", "InvalidKind"),
    ],
)
def test_bad_backend_answers_unavailable_and_stays_accepted(
    cpx_translate: Translate, ref: str, reason: str
) -> None:
    spec = f"""
  parentRefs: [{{name: gw}}]
  rules:
  - backendRefs: [{ref}]
"""
    result = build(cpx_translate, grpc_route("g", spec))
    [entry] = envoy_routes(result)
    assert entry["directResponse"] == {"status": 503}  # gRPC clients read UNAVAILABLE
    found = conditions(grpc_parents(result, "g")[0])
    assert found == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", reason)}


def test_service_port_app_protocol_tls_means_h2(cpx_translate: Translate) -> None:
    service = """
---
apiVersion: v1
kind: Service
metadata: {name: secure, namespace: default}
spec: {ports: [{port: 443, appProtocol: https}]}
"""
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: secure, port: 443}]
"""
    result = build(cpx_translate, service, grpc_route("g", spec))
    found = cluster(result, "default/secure/443/")
    assert found["transportSocket"]["typedConfig"]["commonTlsContext"]["alpnProtocols"] == ["h2"]


def test_websocket_backend_cannot_carry_grpc(cpx_translate: Translate) -> None:
    service = """
---
apiVersion: v1
kind: Service
metadata: {name: ws, namespace: default}
spec: {ports: [{port: 8082, appProtocol: kubernetes.io/ws}]}
"""
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: ws, port: 8082}, {name: v1, port: 8080}]
"""
    result = build(cpx_translate, service, grpc_route("g", spec))
    [entry] = envoy_routes(result)
    # The unusable backend's share answers UNAVAILABLE (503), as the spec asks; v1 keeps its own.
    clusters = entry["route"]["weightedClusters"]["clusters"]
    assert [c["name"].split("/")[:2] for c in clusters] == [["cpx", "failed-backends"], ["default", "v1"]]
    assert "clusterNotFoundResponseCode" not in entry["route"]  # Envoy's default: SERVICE_UNAVAILABLE
    found = conditions(grpc_parents(result, "g")[0])
    assert found == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", "UnsupportedProtocol")}


def test_listener_hostnames_and_route_hostnames_intersect(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com, "*.example.org"]
  rules:
  - backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, grpc_route("g", spec))
    assert set(result.virtual_hosts(HTTP_LISTENER)) == {"grpc.example.com", "*.example.org"}
    miss = spec.replace("{name: gw}", "{name: gw, sectionName: nope}")
    result = build(cpx_translate, grpc_route("g", miss))
    [parent] = grpc_parents(result, "g")
    assert conditions(parent)["Accepted"] == ("False", "NoMatchingParent")


def test_listener_that_admits_only_httproutes_refuses_grpcroutes(cpx_translate: Translate) -> None:
    base = BASE.replace(
        "allowedRoutes: {namespaces: {from: All}}",
        "allowedRoutes: {namespaces: {from: All}, kinds: [{kind: HTTPRoute}]}",
    )
    result = cpx_translate(base + grpc_route("g", SIMPLE), ["gatewayapi"])
    [parent] = grpc_parents(result, "g")
    assert conditions(parent)["Accepted"] == ("False", "NotAllowedByListeners")


SHARED_HTTP = """
  parentRefs: [{name: gw}]
  hostnames: [shared.example.com]
  rules:
  - backendRefs: [{name: v2, port: 8080}]
"""


def test_grpcroute_does_not_merge_into_an_httproute_host(cpx_translate: Translate) -> None:
    http = SHARED_HTTP
    grpc = SIMPLE.replace("rules:", "hostnames: [shared.example.com, grpc.example.com]\n  rules:")
    result = build(cpx_translate, route("h", http), grpc_route("g", grpc, created="2026-02-01T00:00:00Z"))
    shared = envoy_routes(result, "shared.example.com")
    assert [r["route"]["cluster"].split("/")[1] for r in shared] == ["v2"]
    assert [r["match"] for r in envoy_routes(result, "grpc.example.com")] == [{"path": "/echo.Echo/Echo"}]
    found = conditions(grpc_parents(result, "g")[0])
    assert found["PartiallyInvalid"] == ("True", "RuleMatchPartiallyConflict")


def test_an_older_grpcroute_keeps_the_host_from_a_newer_httproute(cpx_translate: Translate) -> None:
    # The spec: of an HTTPRoute and a GRPCRoute with intersecting hostnames, the older is accepted.
    http = SHARED_HTTP
    grpc = SIMPLE.replace("rules:", "hostnames: [shared.example.com]\n  rules:")
    result = build(cpx_translate, route("h", http, created="2026-02-01T00:00:00Z"), grpc_route("g", grpc))
    assert [r["match"] for r in envoy_routes(result, "shared.example.com")] == [{"path": "/echo.Echo/Echo"}]
    assert conditions(grpc_parents(result, "g")[0])["Accepted"] == ("True", "Accepted")
    [accepted] = [c for c in parents(result, "h")[0]["conditions"] if c["type"] == "Accepted"]
    assert (accepted["status"], accepted["reason"]) == ("False", "RuleMatchConflict")
    assert "an older GRPCRoute on the same hostname" in accepted["message"]
    # Same age: namespace/name decides ("default/g" < "default/h").
    result = build(cpx_translate, route("h", http), grpc_route("g", grpc))
    assert [r["match"] for r in envoy_routes(result, "shared.example.com")] == [{"path": "/echo.Echo/Echo"}]
    # The HTTPRoute named first wins.
    result = build(cpx_translate, route("a", http), grpc_route("g", grpc))
    assert [r["route"]["cluster"].split("/")[1] for r in envoy_routes(result, "shared.example.com")] == ["v2"]
    [accepted] = [c for c in grpc_parents(result, "g")[0]["conditions"] if c["type"] == "Accepted"]
    assert (accepted["status"], accepted["reason"]) == ("False", "RuleMatchConflict")
    assert "an older HTTPRoute on the same hostname" in accepted["message"]


def test_same_match_of_a_newer_grpcroute_is_dropped(cpx_translate: Translate) -> None:
    newer = SIMPLE.replace("name: v1", "name: v2")
    result = build(
        cpx_translate, grpc_route("a", SIMPLE), grpc_route("b", newer, created="2026-03-01T00:00:00Z")
    )
    [entry] = envoy_routes(result)
    assert entry["route"]["cluster"].startswith("default/v1/")
    assert conditions(grpc_parents(result, "b")[0])["Accepted"] == ("False", "RuleMatchConflict")


def test_a_grpcroute_without_rules_serves_nothing(cpx_translate: Translate) -> None:
    # Unlike HTTPRoute's, the GRPCRoute CRD has no default rule.
    result = build(cpx_translate, grpc_route("g", "  parentRefs: [{name: gw}]"))
    assert not result.virtual_hosts(HTTP_LISTENER)
    assert conditions(grpc_parents(result, "g")[0])["Accepted"] == ("True", "Accepted")


def test_plugin_watches_and_writes_grpcroutes() -> None:
    assert any(w.gvk.kind == "GRPCRoute" and w.validate is not None for w in cpx_watches())
    assert any(s.gvk.kind == "GRPCRoute" for s in cpx_status_writers())
