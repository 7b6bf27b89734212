"""The upstream BackendTLSPolicy* conformance manifests (v1.6.1, vendored in ``manifests/``) through
one build (``cpx_translate``): the policy conditions each upstream test waits for (per Gateway
ancestor, at the current generation), the routes' ResolvedRefs, and the SNI each backend cluster
would present (what the traffic checks rely on).  The suite's CA ConfigMaps are made from the test CA
(``tls-checks-ca-certificate``) and another CA (``mismatch-ca-certificate``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cpx.ops import certgen
from cpx.testing import Translation, default_ca

from cpx_gatewayapi.l4testing import CONTROLLER_NAME, INFRA_NS, upstream_docs

Translate = Callable[..., Translation]
MANIFESTS = Path(__file__).parent / "manifests"
ACCEPTED = {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
CONFLICTED = ("False", "Conflicted")


def ca_config_map(name: str, pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": INFRA_NS},
        "data": {"ca.crt": pem.decode()},
    }


class Built:
    def __init__(self, result: Translation) -> None:
        self.result = result

    def policy(self, name: str, gateway: str = "same-namespace") -> dict[str, tuple[str, str]]:
        status = self.result.status("BackendTLSPolicy", name, INFRA_NS)
        [ancestor] = [a for a in status["ancestors"] if a["ancestorRef"]["name"] == gateway]
        assert ancestor["controllerName"] == CONTROLLER_NAME
        assert ancestor["ancestorRef"]["namespace"] == INFRA_NS
        return {c["type"]: (c["status"], c["reason"]) for c in ancestor["conditions"]}

    def generations(self, name: str) -> set[int]:
        status = self.result.status("BackendTLSPolicy", name, INFRA_NS)
        return {c["observedGeneration"] for a in status["ancestors"] for c in a["conditions"]}

    def route_resolved(self, name: str) -> set[tuple[str, str]]:
        parents = self.result.status("HTTPRoute", name, INFRA_NS)["parents"]
        return {
            (c["status"], c["reason"])
            for p in parents
            for c in p["conditions"]
            if c["type"] == "ResolvedRefs"
        }

    def sni(self, service: str, port: int = 443) -> set[str]:
        """The SNI of the service port's clusters ("" for plaintext)."""
        stat_name = f"{INFRA_NS}_{service}_{port}"
        return {
            (c.get("transportSocket") or {}).get("typedConfig", {}).get("sni", "")
            for c in self.result.envoy_json()["clusters"]
            if c["altStatName"] == stat_name
        }


@pytest.fixture
def build(cpx_translate: Translate) -> Callable[..., Built]:
    def run(manifest: str, *extra: dict[str, Any]) -> Built:
        config_maps = [
            ca_config_map("tls-checks-ca-certificate", default_ca().cert_pem),
            ca_config_map("mismatch-ca-certificate", certgen.new_ca("mismatch CA").cert_pem),
        ]
        docs, _ = upstream_docs(MANIFESTS, manifest, *config_maps, *extra)
        return Built(cpx_translate(yaml.safe_dump_all(docs), ["gatewayapi"]))

    return run


def test_backendtlspolicy(build: Callable[..., Built]) -> None:
    built = build("backendtlspolicy.yaml")
    for policy in ("normative-test", "host-mismatch", "cert-mismatch", "reconcile-test"):
        assert built.policy(policy) == ACCEPTED
    # The HTTPS listener's route re-encrypts to the same backend: that Gateway is an ancestor too.
    assert built.policy("normative-test", "same-namespace-with-https-listener") == ACCEPTED
    assert built.route_resolved("backendtlspolicy") == {("True", "ResolvedRefs")}
    assert built.sni("backendtlspolicy-test") == {"abc.example.com"}
    assert built.sni("backendtlspolicy-host-mismatch-test") == {"mismatch.example.com"}


def test_backendtlspolicy_reconciles_a_broken_ca_config_map(build: Callable[..., Built]) -> None:
    broken = ca_config_map("tls-checks-ca-certificate", b"not a certificate")
    built = build("backendtlspolicy.yaml", broken)  # the later document replaces the suite's
    assert built.policy("reconcile-test") == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }


def test_backendtlspolicy_conflict_resolution(build: Callable[..., Built]) -> None:
    built = build("backendtlspolicy-conflict-resolution.yaml")
    assert built.route_resolved("backendtlspolicy-conflict-resolution") == {("True", "ResolvedRefs")}
    for winner, loser, service in (
        ("conflicted-without-section-name-1", "conflicted-without-section-name-2", "without"),
        ("conflicted-with-section-name-1", "conflicted-with-section-name-2", "with"),
    ):
        assert built.policy(winner)["Accepted"] == ("True", "Accepted")
        assert built.policy(loser)["Accepted"] == CONFLICTED
        assert built.sni(f"backendtlspolicy-conflicted-{service}-section-name-test") == {"other.example.com"}
    assert built.policy("not-conflicted-with-section-name") == ACCEPTED
    assert built.policy("not-conflicted-without-section-name") == ACCEPTED
    assert built.sni("backendtlspolicy-not-conflicted-test", 443) == {"other.example.com"}
    assert built.sni("backendtlspolicy-not-conflicted-test", 8443) == {"abc.example.com"}


@pytest.mark.parametrize("policy", ["nonexistent-ca-certificate-ref", "malformed-ca-certificate-ref"])
def test_backendtlspolicy_invalid_ca_certificate_ref(build: Callable[..., Built], policy: str) -> None:
    built = build("backendtlspolicy-invalid-ca-certificate-ref.yaml")
    assert built.policy(policy) == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }
    # No usable backend: the rule answers 500 (the suite accepts 500, 502 or 503).
    paths = {
        r.path.value: r.direct_response
        for name in built.result.dag.listeners
        for r in built.result.routes(name)
    }
    answer = paths[f"/backendtlspolicy-{policy}"]
    assert answer is not None and answer.status_code == 500


def test_backendtlspolicy_invalid_kind(build: Callable[..., Built]) -> None:
    built = build("backendtlspolicy-invalid-kind.yaml")
    assert built.policy("invalid-kind") == {
        "Accepted": ("False", "NoValidCACertificate"),
        "ResolvedRefs": ("False", "InvalidKind"),
    }


def test_backendtlspolicy_san_validation(build: Callable[..., Built]) -> None:
    built = build("backendtlspolicy-san.yaml")
    for doc in yaml.safe_load_all((MANIFESTS / "backendtlspolicy-san.yaml").read_text()):
        if doc and doc["kind"] == "BackendTLSPolicy":
            assert built.policy(doc["metadata"]["name"]) == ACCEPTED


def test_backendtlspolicy_observed_generation_bump(build: Callable[..., Built]) -> None:
    built = build("backendtlspolicy-observed-generation-bump.yaml")
    assert built.policy("observed-generation-bump")["Accepted"] == ("True", "Accepted")
    assert built.generations("observed-generation-bump") == {0}  # no generation in the manifest
    [policy] = [
        doc
        for doc in yaml.safe_load_all(
            (MANIFESTS / "backendtlspolicy-observed-generation-bump.yaml").read_text()
        )
        if doc and doc["kind"] == "BackendTLSPolicy"
    ]
    policy["metadata"]["generation"] = 2
    policy["spec"]["validation"]["hostname"] = "foo.example.com"
    bumped = build("backendtlspolicy-observed-generation-bump.yaml", policy)
    assert bumped.policy("observed-generation-bump")["Accepted"] == ("True", "Accepted")
    assert bumped.generations("observed-generation-bump") == {2}
    assert bumped.sni("observed-generation-bump-test") == {"foo.example.com"}
