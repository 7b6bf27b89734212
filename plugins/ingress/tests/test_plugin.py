"""The plugin as the core sees it: entry point, hooks, records, options."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

import cpx_ingress.plugin
from cpx import Config, ConfigError, Phase, ingress_class_accepts
from cpx.testing import PLUGIN_GROUP as GROUP
from cpx.testing import PluginHost, translate
from cpx.testing import builtin_plugin as core
from cpx_ingress import schema, status
from cpx_ingress.kinds import HTTP_LISTENER, HTTPS_LISTENER, INGRESS
from cpx_ingress.processor import IngressProcessor


def test_entry_point_resolves() -> None:
    [ep] = [ep for ep in importlib.metadata.entry_points(group=GROUP) if ep.name == "ingress"]
    assert ep.value == "cpx_ingress.plugin"
    assert ep.dist is not None and ep.dist.metadata["Name"] == "cpx-ingress"
    assert ep.load() is cpx_ingress.plugin


def test_loads_through_the_plugin_host() -> None:
    host = PluginHost.load(["ingress"])
    assert host.names == ("core", "ingress")
    assert [p.name for p in host.processors()] == ["listeners", "ingress"]
    assert INGRESS.group_kind in {w.gvk.group_kind for w in host.watches()}


def test_listener_names_match_the_core() -> None:
    assert (core.HTTP_LISTENER, core.HTTPS_LISTENER) == (HTTP_LISTENER, HTTPS_LISTENER)


@pytest.fixture
def host() -> PluginHost:
    from cpx.testing import builtin_plugin as core

    # The core owns --ingress-class-name and --ingress-status-address (shared with HTTPProxy).
    return PluginHost.from_modules([("core", core), ("ingress", cpx_ingress.plugin)])


def test_hooks(host: PluginHost) -> None:
    assert host.hook_names("ingress") == [
        "cpx_dag_processors",
        "cpx_fuzz_strategies",
        "cpx_status_writers",
        "cpx_watches",
    ]


def test_records(host: PluginHost) -> None:
    options = {o.name: o for o in host.options()}
    assert options["ingress_class_name"].multiple
    assert options["ingress_class_name"].flag == "--ingress-class-name"
    assert options["ingress_status_address"].flag == "--ingress-status-address"

    [watch] = [w for w in host.watches() if w.gvk == INGRESS]
    assert (watch.gvk.api_version, watch.gvk.plural) == ("networking.k8s.io/v1", "ingresses")
    assert watch.accept is ingress_class_accepts and watch.validate is schema.validate

    [writer] = host.status_writers()
    assert writer.gvk == INGRESS and writer.merge is status.merge_status

    [spec] = [s for s in host.processors() if s.name == "ingress"]
    assert (spec.name, spec.phase, spec.after) == ("ingress", Phase.ROUTES, ("listeners",))
    processor = spec.factory(Config(options={"ingress_status_address": "192.0.2.1"}))
    assert isinstance(processor, IngressProcessor)
    assert processor.load_balancer == {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}


def test_configure_refuses_a_bad_status_address(host: PluginHost) -> None:
    host.configure(Config(options={"ingress_status_address": "lb.example.com"}))
    with pytest.raises(ConfigError, match="--ingress-status-address"):
        host.configure(Config(options={"ingress_status_address": "not an address"}))


MANIFESTS = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  rules:
  - host: "*.example.com"
    http:
      paths:
      - {path: /app/, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: invalid, namespace: default}
spec:
  rules:
  - http: {paths: [{path: app, pathType: Sideways, backend: {service: {name: web, port: {number: 80}}}}]}
"""


def test_translate_end_to_end(tmp_path: Path) -> None:
    """Manifests → pipeline (class filter, schema check) → DAG → Envoy routes."""
    (tmp_path / "ingress.yaml").write_text(MANIFESTS)
    host = PluginHost.load(["ingress"])
    out = translate([tmp_path], host, Config(options={"ingress_status_address": "192.0.2.1"}))
    statuses = {o["metadata"]["name"]: o.get("status") for o in out["objects"] if o["kind"] == "Ingress"}
    assert statuses["web"] == {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    [problem] = statuses["invalid"]["cpx"]["problems"]
    assert problem["type"] == "SchemaError" and "pathType" in problem["message"]
    [config] = out["xds"]["routes"]
    [vhost] = config["virtualHosts"]
    [route] = vhost["routes"]
    assert vhost["domains"] == ["*.example.com"]
    assert route["match"]["pathSeparatedPrefix"] == "/app"
    assert [h["name"] for h in route["match"]["headers"]] == [":authority"]  # one label only
