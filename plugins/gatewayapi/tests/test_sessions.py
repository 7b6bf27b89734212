"""Session persistence (experimental ``rules[].sessionPersistence``) as Envoy's stateful_session
filter: inert on the connection manager, switched on by the rule's routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cpx.testing import Translation

from .test_grpcroute import grpc_parents, grpc_route
from .test_httproute import BASE, HTTP_LISTENER, conditions, envoy_routes, parents, route

Translate = Callable[..., Translation]
FILTER = "envoy.filters.http.stateful_session"

SPEC = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /cookie}}]
    sessionPersistence: {sessionName: sticky}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /permanent}}]
    sessionPersistence:
      absoluteTimeout: 1h
      cookieConfig: {lifetimeType: Permanent}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /header}}]
    sessionPersistence: {type: Header, sessionName: x-session}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /plain}}]
    backendRefs: [{name: v1, port: 8080}]
"""


def _session_state(entry: dict[str, Any]) -> dict[str, Any]:
    config = entry["typedPerFilterConfig"][FILTER]
    state: dict[str, Any] = config["statefulSession"]["sessionState"]
    return state


def test_rules_with_session_persistence_switch_the_filter_on(cpx_translate: Translate) -> None:
    result = cpx_translate(BASE + route("r", SPEC), ["gatewayapi"])
    by_path = {r["match"]["pathSeparatedPrefix"]: r for r in envoy_routes(result)}
    cookie = _session_state(by_path["/cookie"])
    assert cookie["name"] == "envoy.http.stateful_session.cookie"
    assert cookie["typedConfig"]["cookie"] == {"name": "sticky", "path": "/"}  # a session cookie
    permanent = _session_state(by_path["/permanent"])["typedConfig"]["cookie"]
    assert permanent["ttl"] == "3600s" and permanent["name"].startswith("cpx-session-")
    header = _session_state(by_path["/header"])
    assert header["name"] == "envoy.http.stateful_session.header"
    assert header["typedConfig"]["name"] == "x-session"
    assert FILTER not in by_path["/plain"].get("typedPerFilterConfig", {})
    # On the connection manager, inert (no session state) and before the router.
    [listener] = [x for x in result.envoy_json()["listeners"] if x["name"] == HTTP_LISTENER]
    manager = listener["filterChains"][0]["filters"][0]["typedConfig"]
    names = [f["name"] for f in manager["httpFilters"]]
    assert names[-2:] == [FILTER, "router"]
    assert "sessionState" not in manager["httpFilters"][-2]["typedConfig"]
    assert conditions(parents(result, "r")[0])["Accepted"] == ("True", "Accepted")


def test_default_cookie_names_differ_per_rule(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /a}}]
    sessionPersistence: {}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /b}}]
    sessionPersistence: {}
    backendRefs: [{name: v1, port: 8080}]
"""
    result = cpx_translate(BASE + route("r", spec), ["gatewayapi"])
    names = {_session_state(r)["typedConfig"]["cookie"]["name"] for r in envoy_routes(result)}
    assert len(names) == 2


def test_what_envoy_cannot_do_drops_the_rule(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /idle}}]
    sessionPersistence: {idleTimeout: 10m}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /ok}}]
    backendRefs: [{name: v1, port: 8080}]
"""
    result = cpx_translate(BASE + route("r", spec), ["gatewayapi"])
    assert [r["match"]["pathSeparatedPrefix"] for r in envoy_routes(result)] == ["/ok"]
    [entry] = parents(result, "r")
    assert conditions(entry)["PartiallyInvalid"] == ("True", "UnsupportedValue")
    [partial] = [c for c in entry["conditions"] if c["type"] == "PartiallyInvalid"]
    assert "idleTimeout is not supported" in partial["message"]


def test_grpcroute_sessions_too(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{method: {service: echo.Echo, method: Echo}}]
    sessionPersistence: {type: Header, sessionName: x-session}
    backendRefs: [{name: v1, port: 8080}]
"""
    result = cpx_translate(BASE + grpc_route("g", spec), ["gatewayapi"])
    [entry] = envoy_routes(result)
    assert _session_state(entry)["typedConfig"]["name"] == "x-session"
    assert conditions(grpc_parents(result, "g")[0])["Accepted"] == ("True", "Accepted")


def test_without_a_gateway_class_no_connection_manager_carries_the_filter(cpx_translate: Translate) -> None:
    ingress = """
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
"""
    listeners = cpx_translate(ingress).envoy_json()["listeners"]
    filters = [
        f["name"]
        for listener in listeners
        for chain in listener["filterChains"]
        for manager in chain["filters"]
        for f in manager["typedConfig"].get("httpFilters", [])
    ]
    assert filters and FILTER not in filters
