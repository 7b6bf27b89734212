"""HTTPRoutes through a whole build (``cpx_translate``): attachment, status, Envoy routes.

The Gateway side lays the listeners out as the issue says: ``http-<port>-<address>`` on the
Gateway's address, port + 8000.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest
import yaml
from cpx import SourceView
from cpx.dag import DAG
from cpx.testing import Translation, make_tls_secret

from cpx_gatewayapi import gateways
from cpx_gatewayapi import status as status_module
from cpx_gatewayapi.kinds import GROUP
from cpx_gatewayapi.model import Attachments, Resolution
from cpx_gatewayapi.settings import Settings

Translate = Callable[..., Translation]
ADDRESS = "127.0.0.10"
HTTP_LISTENER = "http-80-127_0_0_10"

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
  - {{name: http, port: 80, protocol: HTTP, allowedRoutes: {{namespaces: {{from: All}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: v1, namespace: default}}
spec: {{ports: [{{port: 8080, targetPort: 3000}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: v2, namespace: default}}
spec: {{ports: [{{port: 8080, targetPort: 3000}}]}}
"""


def route(name: str, spec: str, namespace: str = "default", created: str = "2026-01-01T00:00:00Z") -> str:
    return f"""
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {namespace}, generation: 3, creationTimestamp: "{created}"}}
spec:
{spec}
"""


SIMPLE = """
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: v1, port: 8080}]
"""


def build(cpx_translate: Translate, *docs: str) -> Translation:
    return cpx_translate(BASE + "".join(docs), ["gatewayapi"])


def vhosts(result: Translation, listener: str = HTTP_LISTENER) -> dict[str, dict[str, Any]]:
    return result.virtual_hosts(listener)


def envoy_routes(result: Translation, host: str = "*", listener: str = HTTP_LISTENER) -> list[dict[str, Any]]:
    return list(vhosts(result, listener)[host]["routes"])


def parents(result: Translation, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    return list(result.status("HTTPRoute", name, namespace)["parents"])


def conditions(entry: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}


# -- attachment and status ---------------------------------------------------------------------------


def test_route_on_a_gateway_serves_its_backend(cpx_translate: Translate) -> None:
    result = build(cpx_translate, route("r", SIMPLE))
    [entry] = envoy_routes(result)
    assert entry["match"] == {"prefix": "/"}
    assert entry["route"]["cluster"].startswith("default/v1/8080/")
    listener = next(li for li in result.envoy_json()["listeners"] if li["name"] == HTTP_LISTENER)
    assert listener["address"]["socketAddress"] == {"address": ADDRESS, "portValue": 8080}
    [parent] = parents(result, "r")
    assert parent["parentRef"] == {"group": GROUP, "kind": "Gateway", "name": "gw"}
    assert parent["controllerName"] == "projectcontour.io/gateway-controller"
    assert conditions(parent) == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    assert {c["observedGeneration"] for c in parent["conditions"]} == {3}


def test_nothing_without_gateway_api_objects(cpx_translate: Translate) -> None:
    result = cpx_translate(BASE.split("---", 2)[2], ["gatewayapi"])
    assert not any(k.kind == "HTTPRoute" for k in result.statuses)


def test_route_of_another_controller_gets_no_entry(cpx_translate: Translate) -> None:
    other = SIMPLE.replace("{name: gw}", "{name: elsewhere}")
    result = build(cpx_translate, route("r", other))
    assert "parents" not in result.status("HTTPRoute", "r")


@pytest.mark.parametrize(
    ("parent_ref", "reason"),
    [
        ("{name: gw, namespace: default, sectionName: nope}", "NoMatchingParent"),
        ("{name: gw, namespace: default, port: 84}", "NoMatchingParent"),
        ("{name: gw, namespace: default, sectionName: http, port: 81}", "NoMatchingParent"),
        ("{name: gw, namespace: default, sectionName: only-tls}", "NotAllowedByListeners"),
        ("{name: gw, namespace: default, sectionName: same}", "NotAllowedByListeners"),
        ("{name: gw, namespace: default, sectionName: named}", "NoMatchingListenerHostname"),
    ],
)
def test_parent_ref_steps(cpx_translate: Translate, parent_ref: str, reason: str) -> None:
    base_listeners = "  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n"
    extra = (
        "  - {name: only-tls, port: 81, protocol: HTTP, allowedRoutes: "
        "{namespaces: {from: All}, kinds: [{kind: TLSRoute}]}}\n"
        "  - {name: same, port: 82, protocol: HTTP}\n"
        "  - {name: named, port: 83, protocol: HTTP, hostname: foo.example.com, "
        "allowedRoutes: {namespaces: {from: All}}}\n"
    )
    spec = f"""
  parentRefs: [{parent_ref}]
  hostnames: [bar.example.com]
  rules:
  - backendRefs: [{{name: v1, port: 8080}}]
"""
    text = BASE.replace(base_listeners, base_listeners + extra) + route("r", spec, namespace="other")
    result = cpx_translate(text, ["gatewayapi"])
    [parent] = parents(result, "r", "other")
    assert conditions(parent)["Accepted"] == ("False", reason)
    assert parent["parentRef"]["name"] == "gw"


def test_route_hostnames_make_virtual_hosts(cpx_translate: Translate) -> None:
    spec = SIMPLE + "  hostnames: [a.example.com, '*.wild.example.com']\n"
    result = build(cpx_translate, route("r", spec))
    assert set(vhosts(result)) == {"a.example.com", "*.wild.example.com"}
    # Gateway wildcards span labels: no one-label :authority regex on the wildcard host's routes
    [wild] = envoy_routes(result, "*.wild.example.com")
    assert "headers" not in wild["match"]


def test_listener_isolation_leaves_owned_hosts_to_the_specific_listener(cpx_translate: Translate) -> None:
    listeners = "  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n"
    specific = "  - {name: foo, port: 80, protocol: HTTP, hostname: foo.example.com}\n"
    broad = """
  parentRefs: [{name: gw, sectionName: http}]
  hostnames: [foo.example.com, bar.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /broad}}]
    backendRefs: [{name: v1, port: 8080}]
"""
    own = """
  parentRefs: [{name: gw, sectionName: foo}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /own}}]
    backendRefs: [{name: v2, port: 8080}]
"""
    text = BASE.replace(listeners, listeners + specific) + route("broad", broad) + route("own", own)
    result = cpx_translate(text, ["gatewayapi"])
    paths = {
        host: [r["match"]["pathSeparatedPrefix"] for r in v["routes"]] for host, v in vhosts(result).items()
    }
    assert paths == {"bar.example.com": ["/broad"], "foo.example.com": ["/own"]}


def test_route_on_two_gateways(cpx_translate: Translate) -> None:
    second = BASE.split("---")[1].replace("name: gw,", "name: gw2,").replace(ADDRESS, "127.0.0.11")
    spec = """
  parentRefs: [{name: gw}, {name: gw2}]
  rules:
  - backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, "---" + second, route("r", spec))
    assert set(vhosts(result)) == {"*"}
    assert set(vhosts(result, "http-80-127_0_0_11")) == {"*"}
    assert [p["parentRef"]["name"] for p in parents(result, "r")] == ["gw", "gw2"]


# -- matches and precedence ----------------------------------------------------------------------------


def test_matches(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - path: {type: Exact, value: /exact}
    - path: {type: PathPrefix, value: /v2/}
      headers:
      - {name: X-Env, value: a}
      - {name: x-env, value: ignored}
      - {name: x-re, type: RegularExpression, value: "b.*"}
      queryParams: [{name: q, value: "1"}]
      method: PATCH
    - path: {type: RegularExpression, value: "/re/[0-9]+"}
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, route("r", spec))
    matches = [r["match"] for r in envoy_routes(result)]
    assert matches[0] == {"path": "/exact"}
    assert matches[1] == {"safeRegex": {"regex": "^/re/[0-9]+"}}
    assert matches[2]["pathSeparatedPrefix"] == "/v2"
    assert matches[2]["headers"] == [
        {"name": ":method", "stringMatch": {"exact": "PATCH"}},
        {"name": "x-env", "stringMatch": {"exact": "a"}},
        {"name": "x-re", "stringMatch": {"safeRegex": {"regex": "b.*"}}},
    ]
    assert matches[2]["queryParameters"] == [{"name": "q", "stringMatch": {"exact": "1"}}]


def test_precedence_across_routes_is_age_then_name_then_rule(cpx_translate: Translate) -> None:
    def spec(header: str, backend: str) -> str:
        return f"""
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{headers: [{{name: {header}, value: "1"}}]}}]
    backendRefs: [{{name: {backend}, port: 8080}}]
"""

    # Header names alone would put x-a first; the older route wins instead.
    older, newer = (
        route("b", spec("x-b", "v1"), created="2025-01-01T00:00:00Z"),
        route("a", spec("x-a", "v2")),
    )
    result = build(cpx_translate, newer, older)
    assert [r["match"]["headers"][0]["name"] for r in envoy_routes(result)] == ["x-b", "x-a"]
    # more specific matches still come first whatever the age
    longer = route(
        "c", SIMPLE.replace("- backendRefs", "- matches: [{path: {value: /longer}}]\n    backendRefs")
    )
    result = build(cpx_translate, newer, older, longer)
    assert envoy_routes(result)[0]["match"]["pathSeparatedPrefix"] == "/longer"


def test_same_match_of_a_newer_route_is_dropped(cpx_translate: Translate) -> None:
    newer = route("newer", SIMPLE.replace("v1", "v2"), created="2026-02-01T00:00:00Z")
    result = build(cpx_translate, route("older", SIMPLE), newer)
    [entry] = envoy_routes(result)
    assert entry["route"]["cluster"].startswith("default/v1/")
    assert conditions(parents(result, "newer")[0])["Accepted"] == ("False", "RuleMatchConflict")


def test_invalid_regex_drops_the_rule(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: RegularExpression, value: "/(unclosed"}}]
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /fine}}]
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, route("r", spec))
    assert [r["match"] for r in envoy_routes(result)] == [{"pathSeparatedPrefix": "/fine"}]
    status = conditions(parents(result, "r")[0])
    assert status["Accepted"] == ("True", "Accepted")
    assert status["PartiallyInvalid"] == ("True", "UnsupportedValue")
    only_bad = spec.split("  - matches: [{path: {value: /fine}}]", maxsplit=1)[0]
    result = build(cpx_translate, route("r", only_bad))
    assert conditions(parents(result, "r")[0])["Accepted"] == ("False", "UnsupportedValue")
    assert HTTP_LISTENER not in {li["name"] for li in result.envoy_json()["listeners"]}


# -- backends --------------------------------------------------------------------------------------------


def test_weights_and_zero_weight(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: v1, port: 8080, weight: 70}, {name: v2, port: 8080, weight: 30}]
  - matches: [{path: {value: /zero}}]
    backendRefs: [{name: v1, port: 8080, weight: 0}, {name: v2, port: 8080}]
  - matches: [{path: {value: /none}}]
    backendRefs: [{name: v1, port: 8080, weight: 0}]
  - matches: [{path: {value: /empty}}]
"""
    result = build(cpx_translate, route("r", spec))
    by_path = {r["match"].get("pathSeparatedPrefix", "/"): r for r in envoy_routes(result)}
    weights = [
        (c["name"].split("/")[1], c["weight"]) for c in by_path["/"]["route"]["weightedClusters"]["clusters"]
    ]
    assert weights == [("v1", 70), ("v2", 30)]
    assert by_path["/zero"]["route"]["cluster"].startswith("default/v2/")
    assert by_path["/none"]["directResponse"] == {"status": 500}
    assert by_path["/empty"]["directResponse"] == {"status": 500}


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("{name: missing, port: 8080}", "BackendNotFound"),
        ("{name: v1, port: 9999}", "BackendNotFound"),
        ("{group: example.com, kind: Thing, name: v1}", "InvalidKind"),
        ("{name: v1, namespace: other, port: 8080}", "RefNotPermitted"),
    ],
)
def test_bad_backend_answers_500_and_stays_accepted(cpx_translate: Translate, ref: str, reason: str) -> None:
    spec = f"""
  parentRefs: [{{name: gw}}]
  rules:
  - backendRefs: [{ref}]
"""
    result = build(cpx_translate, route("r", spec))
    assert envoy_routes(result)[0]["directResponse"] == {"status": 500}
    status = conditions(parents(result, "r")[0])
    assert status == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", reason)}


def test_bad_backends_keep_their_weight_answered_500(cpx_translate: Translate) -> None:
    # The spec: requests that would have gone to an invalid backend get a 500; the valid ones keep
    # their share.  Envoy answers the failed share's absent cluster with the route's 500.
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - backendRefs:
    - {name: missing, port: 8080, weight: 2}
    - {kind: Unknown, name: v2, port: 8080}
    - {name: gone, port: 8080, weight: 0}
    - {name: v1, port: 8080, weight: 3}
"""
    result = build(cpx_translate, route("r", spec))
    action = envoy_routes(result)[0]["route"]
    entries = [(c["name"].split("/")[:2], c["weight"]) for c in action["weightedClusters"]["clusters"]]
    assert entries == [(["cpx", "failed-backends"], 3), (["default", "v1"], 3)]
    assert action["clusterNotFoundResponseCode"] == "INTERNAL_SERVER_ERROR"
    assert conditions(parents(result, "r")[0])["ResolvedRefs"][0] == "False"


def test_reference_grant_permits_a_cross_namespace_backend(cpx_translate: Translate) -> None:
    other = """
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: other}
spec: {ports: [{port: 8080}]}
"""
    grant = """
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
  to: [{group: "", kind: Service}]
"""
    spec = SIMPLE.replace("{name: v1, port: 8080}", "{name: app, namespace: other, port: 8080}")
    result = build(cpx_translate, other, grant, route("r", spec))
    assert envoy_routes(result)[0]["route"]["cluster"].startswith("other/app/")
    assert conditions(parents(result, "r")[0])["ResolvedRefs"] == ("True", "ResolvedRefs")
    near_miss = grant.replace("namespace: default", "namespace: elsewhere")
    result = build(cpx_translate, other, near_miss, route("r", spec))
    assert conditions(parents(result, "r")[0])["ResolvedRefs"] == ("False", "RefNotPermitted")


def test_app_protocols(cpx_translate: Translate) -> None:
    services = """
---
apiVersion: v1
kind: Service
metadata: {name: h2c, namespace: default}
spec: {ports: [{port: 8081, appProtocol: kubernetes.io/h2c}]}
---
apiVersion: v1
kind: Service
metadata: {name: ws, namespace: default}
spec: {ports: [{port: 8082, appProtocol: kubernetes.io/ws}]}
"""
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /h2c}}]
    backendRefs: [{name: h2c, port: 8081}]
  - matches: [{path: {value: /ws}}]
    backendRefs: [{name: ws, port: 8082}]
"""
    result = build(cpx_translate, services, route("r", spec))
    by_path = {r["match"]["pathSeparatedPrefix"]: r["route"] for r in envoy_routes(result)}
    assert by_path["/ws"]["upgradeConfigs"] == [{"upgradeType": "websocket"}]
    assert "upgradeConfigs" not in by_path["/h2c"]
    [cluster] = [c for c in result.envoy_json()["clusters"] if c["name"].startswith("default/h2c/")]
    assert (
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions" in cluster["typedExtensionProtocolOptions"]
    )


# -- filters -----------------------------------------------------------------------------------------------


def test_header_modifiers(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: X-Set, value: s}]
        add: [{name: x-add, value: a}]
        remove: [X-Remove]
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: x-resp, value: r}]}
    backendRefs:
    - name: v1
      port: 8080
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {set: [{name: x-backend, value: v1}]}
    - {name: v2, port: 8080}
"""
    result = build(cpx_translate, route("r", spec))
    [entry] = envoy_routes(result)
    assert entry["requestHeadersToAdd"] == [
        {"header": {"key": "x-set", "value": "s"}, "appendAction": "OVERWRITE_IF_EXISTS_OR_ADD"},
        {"header": {"key": "x-add", "value": "a"}},
    ]
    assert entry["requestHeadersToRemove"] == ["x-remove"]
    assert entry["responseHeadersToAdd"][0]["header"] == {"key": "x-resp", "value": "r"}
    v1 = next(
        c for c in entry["route"]["weightedClusters"]["clusters"] if c["name"].startswith("default/v1/")
    )
    assert v1["requestHeadersToAdd"][0]["header"] == {"key": "x-backend", "value": "v1"}


def test_redirects(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /plain}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
  - matches: [{path: {value: /scheme}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]
  - matches: [{path: {value: /prefix}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}
  - matches: [{path: {value: /strip}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}
  - matches: [{path: {value: /full}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {port: 8083, path: {type: ReplaceFullPath, replaceFullPath: /x}}
"""
    result = build(cpx_translate, route("r", spec))
    by_path = {r["match"]["pathSeparatedPrefix"]: r["redirect"] for r in envoy_routes(result)}
    found = {"responseCode": "FOUND"}
    assert by_path["/plain"] == {
        "hostRedirect": "example.org",
        "portRedirect": 80,
        **found,
    }  # listener's port
    # 301 is Envoy's default response code: JSON leaves it out
    assert by_path["/scheme"] == {"schemeRedirect": "https", "portRedirect": 443}
    assert by_path["/prefix"] == {"portRedirect": 80, "prefixRewrite": "/new", **found}
    assert by_path["/strip"]["regexRewrite"] == {"pattern": {"regex": "^/strip/*"}, "substitution": "/"}
    assert by_path["/full"] == {"portRedirect": 8083, "pathRedirect": "/x", **found}


def test_url_rewrite(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /prefix}}]
    filters:
    - type: URLRewrite
      urlRewrite:
        hostname: backend.example
        path: {type: ReplacePrefixMatch, replacePrefixMatch: /p}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /full}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /one}}}]
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, route("r", spec))
    by_path = {r["match"]["pathSeparatedPrefix"]: r["route"] for r in envoy_routes(result)}
    assert by_path["/prefix"]["prefixRewrite"] == "/p"
    assert by_path["/prefix"]["hostRewriteLiteral"] == "backend.example"
    assert by_path["/full"]["regexRewrite"] == {"pattern": {"regex": "^/.*$"}, "substitution": "/one"}


def test_mirrors(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - {type: RequestMirror, requestMirror: {backendRef: {name: v2, port: 8080}}}
    - type: RequestMirror
      requestMirror: {backendRef: {name: v2, port: 8080}, fraction: {numerator: 25, denominator: 50}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: missing, port: 8080}}}
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, route("r", spec))
    mirrors = envoy_routes(result)[0]["route"]["requestMirrorPolicies"]
    assert [m["runtimeFraction"]["defaultValue"]["numerator"] for m in mirrors] == [100, 50]
    assert conditions(parents(result, "r")[0])["ResolvedRefs"] == ("False", "BackendNotFound")


def test_unknown_filter_is_unsupported(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Thing, name: t}}]
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, route("r", spec))
    assert conditions(parents(result, "r")[0])["Accepted"] == ("False", "UnsupportedValue")


def test_timeouts(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /request}}]
    timeouts: {request: 500ms}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /both}}]
    timeouts: {request: 2s, backendRequest: 1s}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /off}}]
    timeouts: {request: 0s}
    backendRequest: {}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /retry}}]
    timeouts: {request: 1s, backendRequest: 200ms}
    retry: {codes: [500, 503], attempts: 3}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /backoff}}]
    retry: {attempts: 2, backoff: 100ms}
    backendRefs: [{name: v1, port: 8080}]
  - matches: [{path: {value: /tiny}}]
    retry: {backoff: 1ms}
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, route("r", spec))
    by_path = {r["match"]["pathSeparatedPrefix"]: r["route"] for r in envoy_routes(result)}
    assert by_path["/request"]["timeout"] == "0.500s"
    assert by_path["/both"]["timeout"] == "1s"
    assert by_path["/off"]["timeout"] == "0s"
    retry = by_path["/retry"]
    assert retry["timeout"] == "1s"
    assert retry["retryPolicy"]["numRetries"] == 3
    assert retry["retryPolicy"]["perTryTimeout"] == "0.200s"
    assert retry["retryPolicy"]["retriableStatusCodes"] == [500, 503]
    assert "retryBackOff" not in retry["retryPolicy"]
    assert by_path["/backoff"]["retryPolicy"]["retryBackOff"] == {"baseInterval": "0.100s"}
    # Envoy wants more than 1 ms.
    assert by_path["/tiny"]["retryPolicy"]["retryBackOff"] == {"baseInterval": "0.002s"}


def test_https_listener_serves_secure_virtual_hosts(cpx_translate: Translate) -> None:
    secret, _ = make_tls_secret("default", "cert", ["*.example.com"])
    https = "  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}\n"
    listeners = "  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n"
    import yaml

    spec = SIMPLE.replace("{name: gw}", "{name: gw, sectionName: https}") + "  hostnames: [a.example.com]\n"
    text = BASE.replace(listeners, listeners + https) + "---\n" + yaml.safe_dump(secret) + route("r", spec)
    result = cpx_translate(text, ["gatewayapi"])
    names = {c["name"] for c in result.envoy_json()["routes"]}
    assert "https-443-127_0_0_10/https/a.example.com" in names
    assert conditions(parents(result, "r")[0])["Accepted"] == ("True", "Accepted")
    # The listener has no hostname: any other SNI gets its certificate (a catch-all host without
    # routes: 404), not a reset handshake, and may ask for the listener's named hosts.
    (catch_all,) = [c for c in result.envoy_json()["routes"] if c["name"] == "https-443-127_0_0_10/https/*"]
    assert [(v["domains"], bool(v.get("routes"))) for v in catch_all["virtualHosts"]] == [
        (["*"], False),
        (["a.example.com"], True),
    ]


def test_cors(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: CORS
      cors:
        allowOrigins: ["https://www.foo.com", "https://*.bar.com"]
        allowMethods: [GET, OPTIONS]
        allowHeaders: [x-header-1]
        exposeHeaders: [x-header-3]
        allowCredentials: true
    backendRefs: [{name: v1, port: 8080}]
"""
    result = build(cpx_translate, route("r", spec))
    policy = envoy_routes(result)[0]["typedPerFilterConfig"]["envoy.filters.http.cors"]
    assert policy["allowOriginStringMatch"] == [
        {"exact": "https://www.foo.com", "ignoreCase": True},
        {"safeRegex": {"regex": "(?i)^https://[^/]+\\.bar\\.com$"}},
    ]
    assert (policy["allowMethods"], policy["allowHeaders"], policy["exposeHeaders"]) == (
        "GET,OPTIONS",
        "x-header-1",
        "x-header-3",
    )
    assert (policy["maxAge"], policy["allowCredentials"]) == ("5", True)
    assert policy["forwardNotMatchingPreflights"] is False  # the Gateway answers other origins


def test_attached_routes_count_programmed_or_not(
    cpx_translate: Translate, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: dict[str, int] = {}
    stand_in = gateways.resolve

    def unprogrammed(dag: DAG, source: SourceView, settings: Settings) -> Resolution:
        resolution = stand_in(dag, source, settings)
        return Resolution(
            {
                key: attrs.evolve(
                    gw, listeners=tuple(attrs.evolve(li, dag_listener=None) for li in gw.listeners)
                )
                for key, gw in resolution.gateways.items()
            }
        )

    def report(
        dag: DAG, source: SourceView, resolution: Resolution, attachments: Attachments, _: Any
    ) -> None:
        counted.update({li.name: attachments.count(li) for gw in resolution for li in gw.listeners})

    monkeypatch.setattr(gateways, "resolve", unprogrammed)
    monkeypatch.setattr(gateways, "report", report)
    listeners = "  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n"
    named = "  - {name: named, port: 81, protocol: HTTP, hostname: foo.example.com}\n"
    elsewhere = SIMPLE + "  hostnames: [bar.example.com]\n"
    text = BASE.replace(listeners, listeners + named) + route("a", SIMPLE) + route("b", elsewhere)
    result = cpx_translate(text, ["gatewayapi"])
    # a: both listeners; b: only the one without hostname (no intersection with foo.example.com)
    assert counted == {"http": 2, "named": 1}
    assert conditions(parents(result, "a")[0])["Accepted"] == ("True", "Accepted")
    assert HTTP_LISTENER not in {li["name"] for li in result.envoy_json()["listeners"]}


def test_entries_of_ours_go_when_the_route_leaves_our_gateways(cpx_translate: Translate) -> None:
    spec = SIMPLE.replace("{name: gw}", "{name: elsewhere}")
    theirs = {"parentRef": {"name": "other"}, "controllerName": "example.com/other", "conditions": []}
    ours: dict[str, Any] = {"parentRef": {"group": GROUP, "kind": "Gateway", "name": "gw"}}
    ours |= {"controllerName": "projectcontour.io/gateway-controller", "conditions": []}
    status = f"status: {{parents: [{json.dumps(theirs)}, {json.dumps(ours)}]}}\n"
    result = build(cpx_translate, route("r", spec) + status)
    computed = result.status("HTTPRoute", "r")
    assert computed == {"parents": []}
    merge = status_module.route_merge("projectcontour.io/gateway-controller")
    assert merge({"parents": [theirs, ours]}, computed) == {"parents": [theirs]}


def test_conflicted_listeners_take_no_routes(cpx_translate: Translate) -> None:
    listeners = "  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n"
    twin = "  - {name: twin, port: 80, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}\n"
    secret, _ = make_tls_secret("default", "cert", ["*.example.com"])
    spec = SIMPLE.replace("{name: gw}", "{name: gw, sectionName: twin}")
    text = BASE.replace(listeners, listeners + twin) + "---\n" + yaml.safe_dump(secret) + route("r", spec)
    result = cpx_translate(text, ["gatewayapi"])
    assert conditions(parents(result, "r")[0])["Accepted"] == ("False", "NotAllowedByListeners")


def test_a_route_without_rules_answers_500_everywhere(cpx_translate: Translate) -> None:
    result = build(cpx_translate, route("r", "  parentRefs: [{name: gw}]\n"))
    assert [(r["match"], r["directResponse"]) for r in envoy_routes(result)] == [
        ({"prefix": "/"}, {"status": 500})
    ]


def test_filters_of_a_rule_s_only_backend_apply_to_the_rule(cpx_translate: Translate) -> None:
    spec = """
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /full}}]
    backendRefs:
    - name: v1
      port: 8080
      filters:
      - type: URLRewrite
        urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /rewritten-full}}
  - matches: [{path: {value: /redirect}}]
    backendRefs:
    - name: v1
      port: 8080
      filters:
      - type: RequestRedirect
        requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /other}}
  - matches: [{path: {value: /two}}]
    backendRefs:
    - {name: v2, port: 8080}
    - name: v1
      port: 8080
      filters: [{type: URLRewrite, urlRewrite: {hostname: x.example.com}}]
"""
    result = build(cpx_translate, route("r", spec))
    by_path = {r["match"]["pathSeparatedPrefix"]: r for r in envoy_routes(result)}
    assert by_path["/full"]["route"]["regexRewrite"]["substitution"] == "/rewritten-full"
    assert by_path["/redirect"]["redirect"]["prefixRewrite"] == "/other"
    assert "/two" not in by_path  # several backends: dropped, the route says why
    assert conditions(parents(result, "r")[0])["PartiallyInvalid"] == ("True", "UnsupportedValue")
