"""BackendTLSPolicy through a whole build (``cpx_translate``): the Envoy cluster's upstream TLS
context (CA, SNI, SANs), the policy's ``status.ancestors[]``, conflicts and bad CAs.  The cases
follow the upstream conformance tests BackendTLSPolicy, BackendTLSPolicySANValidation,
BackendTLSPolicyConflictResolution, BackendTLSPolicyInvalidCACertificateRef and
BackendTLSPolicyInvalidKind; traffic is checked in ``test_backendtls_e2e.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import yaml
from cpx.testing import Translation, default_ca, make_ca_secret

from cpx_gatewayapi import backendtlsschema, status
from cpx_gatewayapi.kinds import GROUP

Translate = Callable[..., Translation]
CONTROLLER = "projectcontour.io/gateway-controller"
LISTENER = "http-80-127_0_0_10"


def base(service_ports: str = "[{name: https, port: 443, targetPort: 8443}]") -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: contour}}
spec: {{controllerName: {CONTROLLER}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default, generation: 1}}
spec:
  gatewayClassName: contour
  addresses: [{{type: IPAddress, value: 127.0.0.10}}]
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: v1
kind: Service
metadata: {{name: tls-backend, namespace: default}}
spec: {{ports: {service_ports}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: route, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [abc.example.com]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /a}}}}]
    backendRefs: [{{name: tls-backend, port: 443}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: ca, namespace: default}}
data:
  ca.crt: {json.dumps(default_ca().cert_pem.decode())}
"""


CA_REF = "{group: '', kind: ConfigMap, name: ca}"
VALIDATION = f"{{caCertificateRefs: [{CA_REF}], hostname: abc.example.com}}"


def policy(
    name: str,
    validation: str = VALIDATION,
    target: str = "{group: '', kind: Service, name: tls-backend}",
    created: str = "2026-01-01T00:00:00Z",
) -> str:
    return f"""
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {name}, namespace: default, generation: 2, creationTimestamp: "{created}"}}
spec:
  targetRefs: [{target}]
  validation: {validation}
"""


def tls_context(result: Translation, service: str = "tls-backend", port: int = 443) -> Mapping[str, Any]:
    [cluster] = [
        c
        for c in result.envoy_json()["clusters"]
        if c["name"].startswith(f"default/{service}/{port}/") and "transportSocket" in c
    ]
    context: Mapping[str, Any] = cluster["transportSocket"]["typedConfig"]
    return context


def conditions(result: Translation, name: str) -> dict[str, tuple[str, str]]:
    [ancestor] = result.status("BackendTLSPolicy", name)["ancestors"]
    assert ancestor["ancestorRef"] == {
        "group": GROUP,
        "kind": "Gateway",
        "namespace": "default",
        "name": "gw",
    }
    assert ancestor["controllerName"] == CONTROLLER
    assert all(c["observedGeneration"] == 2 for c in ancestor["conditions"])
    return {c["type"]: (c["status"], c["reason"]) for c in ancestor["conditions"]}


def served_clusters(result: Translation) -> list[str]:
    [route] = result.routes(LISTENER)
    return [c.upstream.name for c in route.clusters if c.weight > 0]


ACCEPTED = {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}


def test_policy_makes_the_cluster_verify_tls_with_the_hostname(cpx_translate: Translate) -> None:
    result = cpx_translate(base() + policy("btls"), ["gatewayapi"])
    context = tls_context(result)
    assert context["sni"] == "abc.example.com"
    validation = context["commonTlsContext"]["validationContext"]
    assert validation["trustedCa"]["inlineBytes"]  # the ConfigMap's ca.crt
    assert validation["matchTypedSubjectAltNames"] == [
        {"sanType": "DNS", "matcher": {"exact": "abc.example.com"}}
    ]
    assert conditions(result, "btls") == ACCEPTED


def test_without_a_policy_the_backend_stays_plaintext(cpx_translate: Translate) -> None:
    result = cpx_translate(base(), ["gatewayapi"])
    assert not [c for c in result.envoy_json()["clusters"] if "transportSocket" in c]


def test_subject_alt_names_replace_the_hostname(cpx_translate: Translate) -> None:
    validation = (
        "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: abc.example.com, "
        "subjectAltNames: [{type: URI, uri: 'spiffe://abc.example.com/test-identity'}, "
        "{type: Hostname, hostname: other.example.com}]}"
    )
    result = cpx_translate(base() + policy("sans", validation), ["gatewayapi"])
    context = tls_context(result)
    assert context["sni"] == "abc.example.com"
    assert context["commonTlsContext"]["validationContext"]["matchTypedSubjectAltNames"] == [
        {"sanType": "DNS", "matcher": {"exact": "other.example.com"}},
        {"sanType": "URI", "matcher": {"exact": "spiffe://abc.example.com/test-identity"}},
    ]


def test_ca_from_a_secret(cpx_translate: Translate) -> None:
    validation = (
        "{caCertificateRefs: [{group: '', kind: Secret, name: ca-secret}], hostname: abc.example.com}"
    )
    secret = "---\n" + json.dumps(make_ca_secret("default", "ca-secret"))
    result = cpx_translate(base() + policy("btls", validation) + secret, ["gatewayapi"])
    assert tls_context(result)["commonTlsContext"]["validationContext"]["trustedCa"]["inlineBytes"]
    assert conditions(result, "btls") == ACCEPTED


@pytest.mark.parametrize(
    ("ref", "configmap", "resolved_reason"),
    [
        ("{group: '', kind: ConfigMap, name: missing}", "", "InvalidCACertificateRef"),
        ("{group: '', kind: ConfigMap, name: bad}", "data: {}", "InvalidCACertificateRef"),
        (
            "{group: '', kind: ConfigMap, name: bad}",
            "data: {ca.crt: not a certificate}",
            "InvalidCACertificateRef",
        ),
        ("{group: example.com, kind: Bundle, name: bad}", "", "InvalidKind"),
    ],
)
def test_unusable_ca_is_reported_and_the_backend_answers_500(
    cpx_translate: Translate, ref: str, configmap: str, resolved_reason: str
) -> None:
    extra = (
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bad, namespace: default}}\n{configmap}\n"
    )
    validation = f"{{caCertificateRefs: [{ref}], hostname: abc.example.com}}"
    result = cpx_translate(base() + policy("btls", validation) + (extra if configmap else ""), ["gatewayapi"])
    assert conditions(result, "btls") == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", resolved_reason),
    }
    assert served_clusters(result) == []  # the rule answers 500: never plaintext to a TLS backend
    [route] = result.routes(LISTENER)
    assert route.direct_response is not None and route.direct_response.status_code == 500


def test_one_good_ca_of_two_is_accepted_but_not_resolved(cpx_translate: Translate) -> None:
    missing = "{group: '', kind: ConfigMap, name: x}"
    validation = f"{{caCertificateRefs: [{CA_REF}, {missing}], hostname: abc.example.com}}"
    result = cpx_translate(base() + policy("btls", validation), ["gatewayapi"])
    assert conditions(result, "btls") == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }
    assert "sni" in tls_context(result)


def test_well_known_ca_certificates_are_not_supported(cpx_translate: Translate) -> None:
    validation = "{wellKnownCACertificates: System, hostname: abc.example.com}"
    result = cpx_translate(base() + policy("btls", validation), ["gatewayapi"])
    assert conditions(result, "btls")["Accepted"] == ("False", "Invalid")
    assert served_clusters(result) == []


def test_conflicts_older_wins_then_namespace_name(cpx_translate: Translate) -> None:
    other = "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: other.example.com}"
    docs = (
        base()
        + policy("b-newer", other, created="2026-02-01T00:00:00Z")
        + policy("c-older")
        + policy("a-newer", other, created="2026-02-01T00:00:00Z")
    )
    result = cpx_translate(docs, ["gatewayapi"])
    assert conditions(result, "c-older") == ACCEPTED
    for loser in ("a-newer", "b-newer"):
        assert conditions(result, loser)["Accepted"] == ("False", "Conflicted")
    assert tls_context(result)["sni"] == "abc.example.com"


def test_port_policy_beats_the_whole_service_one_and_both_are_accepted(cpx_translate: Translate) -> None:
    ports = "[{name: https-1, port: 443, targetPort: 8443}, {name: https-2, port: 8443, targetPort: 8443}]"
    route_8443 = (
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
        "metadata: {name: route-b, namespace: default}\n"
        "spec: {parentRefs: [{name: gw}], hostnames: [abc.example.com], rules: "
        "[{matches: [{path: {type: PathPrefix, value: /b}}], "
        "backendRefs: [{name: tls-backend, port: 8443}]}]}\n"
    )
    port_only = "{group: '', kind: Service, name: tls-backend, sectionName: https-1}"
    other = "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: other.example.com}"
    docs = base(ports) + route_8443 + policy("whole", other) + policy("port", target=port_only)
    result = cpx_translate(docs, ["gatewayapi"])
    assert tls_context(result, port=443)["sni"] == "abc.example.com"
    assert tls_context(result, port=8443)["sni"] == "other.example.com"
    assert conditions(result, "port") == ACCEPTED
    assert conditions(result, "whole") == ACCEPTED


def test_a_policy_no_route_uses_has_no_ancestors(cpx_translate: Translate) -> None:
    target = "{group: '', kind: Service, name: unused}"
    result = cpx_translate(base() + policy("btls", target=target), ["gatewayapi"])
    assert result.status("BackendTLSPolicy", "btls") == {"ancestors": []}


def test_grpc_backend_becomes_h2_over_tls(cpx_translate: Translate) -> None:
    grpc = (
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\n"
        "metadata: {name: grpc, namespace: default}\n"
        "spec: {parentRefs: [{name: gw}], hostnames: [grpc.example.com], rules: "
        "[{backendRefs: [{name: tls-backend, port: 443}]}]}\n"
    )
    result = cpx_translate(base() + grpc + policy("btls"), ["gatewayapi"])
    contexts = [
        c["transportSocket"]["typedConfig"]
        for c in result.envoy_json()["clusters"]
        if c["name"].startswith("default/tls-backend/443/")
    ]
    assert any(ctx["commonTlsContext"].get("alpnProtocols") == ["h2"] for ctx in contexts)
    assert all(ctx["sni"] == "abc.example.com" for ctx in contexts)


def test_ancestor_merge_keeps_other_controllers_entries() -> None:
    merge = status.ancestors_merge(CONTROLLER)
    ref = {"group": GROUP, "kind": "Gateway", "namespace": "default", "name": "gw"}
    theirs = {"ancestorRef": ref, "controllerName": "example.com/other", "conditions": []}
    mine = {"ancestorRef": ref, "controllerName": CONTROLLER, "conditions": []}
    stale = {"ancestorRef": {**ref, "name": "old"}, "controllerName": CONTROLLER, "conditions": []}
    assert merge({"ancestors": [theirs, stale]}, {"ancestors": [mine]}) == {"ancestors": [theirs, mine]}
    assert merge({"ancestors": [theirs]}, {"ancestors": []}) is None


@pytest.mark.parametrize(
    ("validation", "problem"),
    [
        ("{hostname: a.example.com}", "must specify either CACertificateRefs or WellKnownCACertificates"),
        (
            "{hostname: a.example.com, wellKnownCACertificates: System, "
            "caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}]}",
            "must specify either",
        ),
        ("{wellKnownCACertificates: System}", "spec.validation.hostname: Required value"),
        (
            "{wellKnownCACertificates: System, hostname: a.example.com, subjectAltNames: [{type: URI}]}",
            "uri must",
        ),
    ],
)
def test_schema(validation: str, problem: str) -> None:
    obj = yaml.safe_load(policy("p", validation).strip("-\n"))
    assert any(problem in p for p in backendtlsschema.validate_backend_tls_policy(obj))


def test_tlsroute_passthrough_backend_is_left_alone(cpx_translate: Translate) -> None:
    passthrough = """
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tls-gw, namespace: default}
spec:
  gatewayClassName: contour
  addresses: [{type: IPAddress, value: 127.0.0.11}]
  listeners: [{name: tls, port: 443, protocol: TLS, tls: {mode: Passthrough}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: pass, namespace: default}
spec:
  parentRefs: [{name: tls-gw}]
  hostnames: [abc.example.com]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
"""
    result = cpx_translate(base() + passthrough + policy("btls"), ["gatewayapi"])
    clusters = [
        c for c in result.envoy_json()["clusters"] if c["name"].startswith("default/tls-backend/443/")
    ]
    assert len(clusters) == 2  # the HTTPRoute's verifies TLS, the TLSRoute's passes bytes through
    assert sum("transportSocket" in c for c in clusters) == 1
