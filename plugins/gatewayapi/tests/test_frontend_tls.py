"""A Gateway's ``spec.tls.frontend`` through a real build (``cpx_translate``): the client
validation its HTTPS listeners' hosts get in Envoy, and the listener and Gateway conditions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import yaml
from cpx import Config
from cpx.dag import SecureVirtualHost
from cpx.ops import certgen
from cpx.testing import Builder, ListenerProcessor, SourceCache, make_ca_secret, make_tls_secret
from cpx.testing.tls import default_ca
from cpx.testing.translation import Translation

from cpx_gatewayapi import plugin
from cpx_gatewayapi.processor import GatewayAPIProcessor

GROUP = "gateway.networking.k8s.io"
CA = default_ca().cert_pem.decode()


def _objects(frontend: Mapping[str, Any], *extra: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tls = {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "group": "", "name": "cert"}]}
    listeners = [
        {"name": "https", "port": 443, "protocol": "HTTPS", "tls": tls},
        {"name": "https-8443", "port": 8443, "protocol": "HTTPS", "hostname": "b.example.com", "tls": tls},
        {"name": "http", "port": 80, "protocol": "HTTP"},
    ]
    route = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "infra"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": ["a.example.com", "b.example.com"],
            "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}],
        },
    }
    return [
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "contour"},
            "spec": {"controllerName": "projectcontour.io/gateway-controller"},
        },
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "infra", "generation": 2},
            "spec": {
                "gatewayClassName": "contour",
                "addresses": [{"type": "IPAddress", "value": "127.0.0.2"}],
                "tls": {"frontend": frontend},
                "listeners": listeners,
            },
        },
        route,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc", "namespace": "infra"},
            "spec": {"ports": [{"port": 80}]},
        },
        make_tls_secret("infra", "cert", ["*.example.com"])[0],
        _config_map("infra", "ca"),
        make_ca_secret("infra", "ca-secret", CA),
        *extra,
    ]


def _config_map(namespace: str, name: str, data: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"ca.crt": CA} if data is None else dict(data),
    }


def _ref(name: str, kind: str = "ConfigMap", **more: str) -> dict[str, str]:
    return {"group": "", "kind": kind, "name": name, **more}


Build = Callable[..., Translation]


@pytest.fixture
def build(cpx_translate: Callable[..., Translation]) -> Build:
    def run(frontend: Mapping[str, Any], *extra: Mapping[str, Any]) -> Translation:
        return cpx_translate(yaml.safe_dump_all(_objects(frontend, *extra)), ["gatewayapi"])

    return run


def _conditions(built: Translation, listener: str | None = None) -> dict[str, tuple[str, str]]:
    status = built.status("Gateway", "gw", "infra")
    if listener is not None:
        [status] = [entry for entry in status["listeners"] if entry["name"] == listener]
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def _validation(built: Translation, listener: str, host: str) -> Any:
    vhost = built.dag.listeners[listener].secure_virtual_hosts.get(host)
    assert vhost is not None, f"no secure host {host} on {listener}"
    return vhost.downstream_validation


def test_default_and_per_port_validation_reach_the_hosts_of_their_listeners(build: Build) -> None:
    built = build(
        {
            "default": {"validation": {"caCertificateRefs": [_ref("ca")]}},
            "perPort": [
                {
                    "port": 8443,
                    "tls": {
                        "validation": {
                            "caCertificateRefs": [_ref("ca-secret", "Secret")],
                            "mode": "AllowInsecureFallback",
                        }
                    },
                }
            ],
        }
    )
    strict = _validation(built, "https-443-127_0_0_2", "a.example.com")
    assert strict.ca.ca_pem == CA.encode() and not strict.optional and not strict.skip_verification
    assert _validation(built, "https-443-127_0_0_2", "*") == strict
    fallback = _validation(built, "https-8443-127_0_0_2", "b.example.com")
    assert fallback.optional and fallback.skip_verification
    assert _conditions(built)["InsecureFrontendValidationMode"] == ("True", "ConfigurationChanged")
    assert _conditions(built, "https")["Accepted"] == ("True", "Accepted")
    chains = [
        chain
        for listener in built.envoy_json()["listeners"]
        if listener["name"] == "https-443-127_0_0_2"
        for chain in listener["filterChains"]
    ]
    contexts = [c["transportSocket"]["typedConfig"] for c in chains if "transportSocket" in c]
    assert contexts and all(c["requireClientCertificate"] for c in contexts)


def test_no_frontend_validation_leaves_the_hosts_open(build: Build) -> None:
    built = build({})
    assert _validation(built, "https-443-127_0_0_2", "a.example.com") is None
    assert "InsecureFrontendValidationMode" not in _conditions(built)


@pytest.mark.parametrize(
    ("ref", "extra", "reason"),
    [
        (_ref("missing"), (), "InvalidCACertificateRef"),
        (_ref("empty"), (_config_map("infra", "empty", {}),), "InvalidCACertificateRef"),
        (_ref("svc", "Service"), (), "InvalidCACertificateKind"),
        (_ref("ca", namespace="other"), (_config_map("other", "ca"),), "RefNotPermitted"),
    ],
)
def test_unusable_ca_refuses_the_listener_only(
    build: Build, ref: Mapping[str, str], extra: tuple[Mapping[str, Any], ...], reason: str
) -> None:
    built = build({"perPort": [{"port": 8443, "tls": {"validation": {"caCertificateRefs": [ref]}}}]}, *extra)
    listener = _conditions(built, "https-8443")
    assert listener["ResolvedRefs"] == ("False", reason)
    assert listener["Accepted"] == ("False", "NoValidCACertificate")
    assert listener["Programmed"][0] == "False"
    assert "https-8443-127_0_0_2" not in built.dag.listeners
    assert _conditions(built, "https")["Accepted"] == ("True", "Accepted")
    assert _conditions(built, "http")["Accepted"] == ("True", "Accepted")


def test_a_reference_grant_permits_another_namespaces_config_map(build: Build) -> None:
    grant = {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "g", "namespace": "other"},
        "spec": {
            "from": [{"group": GROUP, "kind": "Gateway", "namespace": "infra"}],
            "to": [{"group": "", "kind": "ConfigMap"}],
        },
    }
    frontend = {"default": {"validation": {"caCertificateRefs": [_ref("ca", namespace="other")]}}}
    built = build(frontend, _config_map("other", "ca"), grant)
    assert _conditions(built, "https")["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert _validation(built, "https-443-127_0_0_2", "a.example.com").ca is not None


def test_one_bad_ref_among_good_ones_keeps_the_listener(build: Build) -> None:
    built = build({"default": {"validation": {"caCertificateRefs": [_ref("ca"), _ref("missing")]}}})
    listener = _conditions(built, "https")
    assert listener["ResolvedRefs"] == ("False", "InvalidCACertificateRef")
    assert listener["Accepted"] == ("True", "Accepted")
    assert _validation(built, "https-443-127_0_0_2", "a.example.com").ca.ca_pem == CA.encode()


def test_a_changed_ca_config_map_reaches_the_hosts_of_a_long_lived_build() -> None:
    watches = {spec.gvk.group_kind: spec for spec in plugin.cpx_watches()}
    source = SourceCache(watches=watches)
    config = Config()
    builder = Builder(
        [("listeners", ListenerProcessor(config)), ("gatewayapi", GatewayAPIProcessor.from_config(config))]
    )
    for obj in _objects({"default": {"validation": {"caCertificateRefs": [_ref("ca")]}}}):
        source.insert(dict(obj))
    vhosts = builder.build(source).listeners["https-443-127_0_0_2"].secure_virtual_hosts
    assert _ca_pem(vhosts["a.example.com"]) == CA.encode()
    other = certgen.new_ca("another CA", lifetime_days=1).cert_pem.decode()
    config_map = _config_map("infra", "ca", {"ca.crt": other})
    assert plugin._config_map_in_use(config_map, source)
    assert not plugin._config_map_in_use(_config_map("infra", "unrelated"), source)
    source.insert(config_map)
    vhosts = builder.build(source).listeners["https-443-127_0_0_2"].secure_virtual_hosts
    assert {_ca_pem(vhosts[name]) for name in ("a.example.com", "*")} == {other.encode()}


def _ca_pem(vhost: SecureVirtualHost) -> bytes:
    validation = vhost.downstream_validation
    assert validation is not None and validation.ca is not None
    return validation.ca.ca_pem
