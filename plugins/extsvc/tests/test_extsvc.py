"""ExtensionService translation: clusters, endpoints, status reasons and the published upstreams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from cpx import ObjectKey
from cpx.dag import EXTENSION_UPSTREAMS, Duration, ExtensionUpstream
from cpx.testing import make_ca_secret, private_imports

import cpx_extsvc
from cpx_extsvc import schema

NS = "auth"
SERVICES = f"""
apiVersion: v1
kind: Service
metadata: {{name: authsvc, namespace: {NS}}}
spec: {{ports: [{{name: grpc, port: 9443}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: authsvc-1, namespace: {NS}, labels: {{kubernetes.io/service-name: authsvc}}}}
addressType: IPv4
ports: [{{name: grpc, port: 9443}}]
endpoints: [{{addresses: [10.0.0.1]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: second, namespace: {NS}}}
spec: {{ports: [{{port: 9000}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: second-1, namespace: {NS}, labels: {{kubernetes.io/service-name: second}}}}
addressType: IPv4
ports: [{{port: 9000}}]
endpoints: [{{addresses: [10.0.0.2]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: external, namespace: {NS}}}
spec: {{type: ExternalName, externalName: auth.example.com, ports: [{{port: 9443}}]}}
"""


def extension(name: str = "ext", **spec: Any) -> str:
    body = {"services": [{"name": "authsvc", "port": 9443}], **spec}
    obj = {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"name": name, "namespace": NS},
        "spec": body,
    }
    return "---\n" + yaml.safe_dump(obj)


def translate(cpx_translate: Any, *docs: str) -> Any:
    return cpx_translate(SERVICES + "".join(docs), ["extsvc"])


def valid_condition(result: Any, name: str = "ext") -> dict[str, Any]:
    [condition] = result.status("ExtensionService", name, NS)["conditions"]
    assert condition["type"] == "Valid"
    return dict(condition)


def reasons(result: Any, name: str = "ext") -> list[tuple[str, str, str]]:
    condition = valid_condition(result, name)
    return [(e["type"], e["reason"], e["message"]) for e in condition.get("errors", ())]


def clusters(result: Any) -> dict[str, Any]:
    return {c["name"]: c for c in result.envoy_json()["clusters"]}


def published(result: Any, name: str = "ext") -> ExtensionUpstream | None:
    entries = result.dag.registries.entries(EXTENSION_UPSTREAMS)
    found = entries.get(ObjectKey("projectcontour.io", "ExtensionService", NS, name))
    assert found is None or isinstance(found, ExtensionUpstream)
    return found


def test_only_the_public_api() -> None:
    assert private_imports(Path(cpx_extsvc.__file__).parent) == []


def test_a_valid_extension_is_an_h2_cluster_named_as_contour_names_it(cpx_translate: Any) -> None:
    result = translate(cpx_translate, extension(timeoutPolicy={"response": "250ms", "idleConnection": "1m"}))
    condition = valid_condition(result)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "Valid",
        "Valid ExtensionService",
    )
    cluster = clusters(result)["extension/auth/ext"]
    assert cluster["altStatName"] == "extension_auth_ext"
    assert cluster["edsClusterConfig"]["serviceName"] == "extension/auth/ext"
    tls = cluster["transportSocket"]["typedConfig"]
    assert tls["commonTlsContext"]["alpnProtocols"] == ["h2"]
    options = cluster["typedExtensionProtocolOptions"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert "http2ProtocolOptions" in options["explicitHttpConfig"]
    assert options["commonHttpProtocolOptions"]["idleTimeout"] == "60s"
    assert published(result) == ExtensionUpstream(
        cluster_name="extension/auth/ext", protocol="h2", response_timeout=Duration(seconds=0.25)
    )


@pytest.mark.parametrize(
    ("protocol", "explicit"), [("h2c", "http2ProtocolOptions"), ("http/1.1", "httpProtocolOptions")]
)
def test_cleartext_protocols(cpx_translate: Any, protocol: str, explicit: str) -> None:
    cluster = clusters(translate(cpx_translate, extension(protocol=protocol)))["extension/auth/ext"]
    assert "transportSocket" not in cluster
    options = cluster["typedExtensionProtocolOptions"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert explicit in options["explicitHttpConfig"]


def test_weighted_services_share_one_load_assignment(cpx_translate: Any) -> None:
    services = [{"name": "authsvc", "port": 9443, "weight": 3}, {"name": "second", "port": 9000, "weight": 1}]
    result = translate(cpx_translate, extension(services=services))
    [cla] = [e for e in result.envoy_json()["endpoints"] if e["clusterName"] == "extension/auth/ext"]
    localities = [
        (
            lb["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"]["address"],
            lb.get("loadBalancingWeight"),
        )
        for lb in cla["endpoints"]
    ]
    assert localities == [("10.0.0.1", 3), ("10.0.0.2", 1)]


def test_no_weight_at_all_spreads_evenly(cpx_translate: Any) -> None:
    services = [{"name": "authsvc", "port": 9443}, {"name": "second", "port": 9000}]
    result = translate(cpx_translate, extension(services=services))
    [cla] = [e for e in result.envoy_json()["endpoints"] if e["clusterName"] == "extension/auth/ext"]
    assert [lb["loadBalancingWeight"] for lb in cla["endpoints"]] == [1, 1]


def test_circuit_breakers_and_load_balancer_policy(cpx_translate: Any) -> None:
    spec = {"circuitBreakerPolicy": {"maxRequests": 7}, "loadBalancerPolicy": {"strategy": "Random"}}
    cluster = clusters(translate(cpx_translate, extension(**spec)))["extension/auth/ext"]
    assert cluster["lbPolicy"] == "RANDOM"
    assert cluster["circuitBreakers"]["thresholds"][0]["maxRequests"] == 7


@pytest.mark.parametrize("strategy", ["Cookie", "RequestHash"])
def test_hash_load_balancing_is_ignored_with_a_warning(cpx_translate: Any, strategy: str) -> None:
    result = translate(cpx_translate, extension(loadBalancerPolicy={"strategy": strategy}))
    condition = valid_condition(result)
    assert condition["status"] == "True"
    assert [(w["reason"], w["message"]) for w in condition["warnings"]] == [
        (
            "IgnoredField",
            f'ignoring field ".Spec.LoadBalancerPolicy"; {strategy} load balancer policy is not supported '
            "for ExtensionClusters",
        )
    ]
    assert "lbPolicy" not in clusters(result)["extension/auth/ext"]  # ROUND_ROBIN, the default


def test_idle_timeout_is_ignored_with_a_warning(cpx_translate: Any) -> None:
    condition = valid_condition(translate(cpx_translate, extension(timeoutPolicy={"idle": "5s"})))
    assert condition["status"] == "True"
    assert condition["warnings"][0]["message"].startswith('ignoring field ".Spec.TimeoutPolicy.Idle"')


def test_upstream_validation_sets_the_ca_and_sni(cpx_translate: Any) -> None:
    ca = "---\n" + yaml.safe_dump(make_ca_secret(NS, "ca"))
    validation = {"caSecret": "ca", "subjectName": "auth.example.com"}
    result = translate(cpx_translate, ca, extension(validation=validation))
    tls = clusters(result)["extension/auth/ext"]["transportSocket"]["typedConfig"]
    assert tls["sni"] == "auth.example.com"
    matcher = tls["commonTlsContext"]["validationContext"]["matchTypedSubjectAltNames"]
    assert matcher == [{"sanType": "DNS", "matcher": {"exact": "auth.example.com"}}]
    upstream = published(result)
    assert upstream is not None and upstream.sni == "auth.example.com"


def refused_with(result: Any, expected: tuple[str, str, str]) -> None:
    assert reasons(result) == [expected]
    assert valid_condition(result)["status"] == "False"
    assert valid_condition(result)["reason"] == "ErrorPresent"
    assert "extension/auth/ext" not in clusters(result)
    upstream = published(result)
    assert upstream is not None and not upstream.valid


def test_missing_service(cpx_translate: Any) -> None:
    result = translate(cpx_translate, extension(services=[{"name": "nope", "port": 9443}]))
    refused_with(
        result,
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            'unresolved service "auth/nope": service "auth/nope" not found',
        ),
    )


def test_unmatched_port(cpx_translate: Any) -> None:
    result = translate(cpx_translate, extension(services=[{"name": "authsvc", "port": 1}]))
    refused_with(
        result,
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            'unresolved service "auth/authsvc": port "1" on service "auth/authsvc" not matched',
        ),
    )


def test_external_name_service(cpx_translate: Any) -> None:
    result = translate(cpx_translate, extension(services=[{"name": "external", "port": 9443}]))
    refused_with(
        result,
        (
            "ServiceError",
            "UnsupportedServiceType",
            'Service "auth/external" is of unsupported type "ExternalName".',
        ),
    )


def test_missing_ca_secret(cpx_translate: Any) -> None:
    result = translate(cpx_translate, extension(validation={"caSecret": "ca", "subjectName": "a"}))
    refused_with(
        result,
        (
            "SpecError",
            "TLSUpstreamValidation",
            'TLS upstream validation policy error: invalid CA Secret "auth/ca": Secret auth/ca not found',
        ),
    )


def test_ca_secret_in_another_namespace_needs_delegation(cpx_translate: Any) -> None:
    ca = "---\n" + yaml.safe_dump(make_ca_secret("other", "ca"))
    result = translate(cpx_translate, ca, extension(validation={"caSecret": "other/ca", "subjectName": "a"}))
    refused_with(
        result,
        (
            "TLSError",
            "CACertificateNotDelegated",
            'service.UpstreamValidation.CACertificate Secret "other/ca" is not configured for certificate '
            "delegation",
        ),
    )


def test_validation_needs_h2(cpx_translate: Any) -> None:
    ca = "---\n" + yaml.safe_dump(make_ca_secret(NS, "ca"))
    result = translate(
        cpx_translate, ca, extension(protocol="h2c", validation={"caSecret": "ca", "subjectName": "a"})
    )
    refused_with(
        result,
        ("SpecError", "InconsistentProtocol", 'upstream TLS validation not supported for "h2c" protocol'),
    )


def test_timeout_policy_not_valid(cpx_translate: Any) -> None:
    # The CRD pattern lets ".s" through; Go's ParseDuration refuses it.
    result = translate(cpx_translate, extension(timeoutPolicy={"response": ".s"}))
    refused_with(
        result,
        (
            "SpecError",
            "TimeoutPolicyNotValid",
            "spec.timeoutPolicy failed to parse: error parsing response timeout: "
            'unable to parse timeout string ".s": time: invalid duration ".s"',
        ),
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"services": []},
            "spec.services: Invalid value: 0: spec.services in body should have at least 1 items",
        ),
        (
            {"services": [{"name": "a", "port": 65536}]},
            "spec.services[0].port: Invalid value: 65536: "
            "spec.services[0].port in body should be less than 65536",
        ),
        (
            {"services": [{"name": "a", "port": 1}], "protocol": "h3"},
            'spec.protocol: Unsupported value: "h3": supported values: "http/1.1", "h2", "h2c"',
        ),
        ({"services": [{"name": "a", "port": 1}], "bogus": 1}, "spec.bogus: unknown field"),
        (
            {
                "services": [{"name": "a", "port": 1}],
                "validation": {"caSecret": "c", "subjectName": "a", "subjectNames": ["b"]},
            },
            'spec.validation: Invalid value: "object": subjectNames[0] must equal subjectName if set',
        ),
        ({}, "spec.services: Required value"),
    ],
)
def test_schema(spec: dict[str, Any], problem: str) -> None:
    obj = {"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "metadata": {"name": "x"}}
    assert schema.validate({**obj, "spec": spec}) == [problem]


def _without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


def test_the_schema_is_the_shipped_crds() -> None:
    crd = yaml.safe_load((Path(__file__).parent.parent / "crd" / "extensionservice.yaml").read_text())
    [version] = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    shipped = _without_descriptions(version["schema"]["openAPIV3Schema"])
    assert shipped["properties"]["spec"] == schema.SPEC_SCHEMA
