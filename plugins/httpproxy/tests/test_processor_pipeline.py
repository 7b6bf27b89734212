"""The processor as the core runs it: options, configuration checks, ordering after Ingress, the
``cpx translate`` command line, and xDS built from what it puts in the DAG."""

from __future__ import annotations

import copy
import functools
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from cpx import Config, ConfigError, KubeObject
from cpx.testing import PluginHost, SnapshotHandler, cli, make_tls_secret

from cpx_httpproxy.kinds import HTTP_LISTENER, HTTPS_LISTENER


def service(name: str) -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]},
    }


def proxy(name: str, spec: dict[str, Any]) -> KubeObject:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def ingress(service_name: str, *paths: str) -> KubeObject:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "ing", "namespace": "default"},
        "spec": {
            "rules": [
                {
                    "host": "example.com",
                    "http": {
                        "paths": [
                            {
                                "path": p,
                                "pathType": "ImplementationSpecific",
                                "backend": {"service": {"name": service_name, "port": {"number": 80}}},
                            }
                            for p in paths
                        ]
                    },
                }
            ]
        },
    }


@functools.cache
def _secret() -> KubeObject:
    secret, _ca = make_tls_secret("default", "tls", ["example.com", "passthrough.example.com"])
    return secret


def tls_secret(name: str) -> KubeObject:
    secret = copy.deepcopy(_secret())
    secret["metadata"] = {"name": name, "namespace": "default"}
    return secret


# -- declarations -------------------------------------------------------------------------------------


def test_options() -> None:
    host = PluginHost.load(["httpproxy"])
    options = {o.name: o for o in host.options()}
    assert options["root_namespaces"].multiple and options["root_namespaces"].flag == "--root-namespaces"
    assert options["fallback_certificate"].type is str
    for name in ("disable_permit_insecure", "enable_external_name_service"):
        assert options[name].type is bool and options[name].default is False


def test_runs_after_the_listeners_and_after_ingress() -> None:
    assert [p.name for p in PluginHost.load(["httpproxy"]).processors()] == ["listeners", "httpproxy"]
    assert [p.name for p in PluginHost.load(["httpproxy", "ingress"]).processors()] == [
        "listeners",
        "ingress",
        "httpproxy",
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fallback_certificate": "nope"}, "--fallback-certificate: expected namespace/name, got 'nope'"),
        ({"fallback_certificate": "a/b/c"}, "--fallback-certificate: expected namespace/name, got 'a/b/c'"),
        ({"fallback_certificate": "/b"}, "--fallback-certificate: expected namespace/name, got '/b'"),
        ({"disable_permit_insecure": "yes"}, "--disable-permit-insecure: expected true or false, got 'yes'"),
        (
            {"enable_external_name_service": "false"},
            "--enable-external-name-service: expected true or false, got 'false'",
        ),
    ],
)
def test_bad_option_values_are_refused(options: dict[str, Any], message: str) -> None:
    host = PluginHost.load(["httpproxy"])
    with pytest.raises(ConfigError) as err:
        host.configure(Config(options=options))
    assert str(err.value) == message
    with pytest.raises(ConfigError):
        SnapshotHandler.create(host, Config(options=options))


def test_good_option_values_are_accepted() -> None:
    host = PluginHost.load(["httpproxy"])
    host.configure(
        Config(
            options={
                "fallback_certificate": "ns/name",
                "root_namespaces": ("a", "b,c"),
                "disable_permit_insecure": True,
                "enable_external_name_service": False,
            }
        )
    )


# -- with Ingress -------------------------------------------------------------------------------------


def test_an_httpproxy_route_replaces_an_ingress_route_with_the_same_match() -> None:
    pipeline = SnapshotHandler.create(PluginHost.load(["ingress", "httpproxy"]), Config())
    for obj in (
        service("from-ingress"),
        service("from-proxy"),
        ingress("from-ingress", "/", "/ingress-only"),
        proxy(
            "p",
            {
                "virtualhost": {"fqdn": "example.com"},
                "routes": [{"services": [{"name": "from-proxy", "port": 80}]}],
            },
        ),
    ):
        pipeline.upsert(obj, validate=True)
    pipeline.rebuild()
    assert pipeline.dag is not None
    vhost = pipeline.dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"]
    served = {r.path.value: r.clusters[0].upstream.name for r in vhost.routes.values()}
    assert served == {"/": "from-proxy", "/ingress-only": "from-ingress"}
    statuses = pipeline.statuses()
    [proxy_status] = [s for k, s in statuses.items() if k.kind == "HTTPProxy"]
    assert proxy_status.status["currentStatus"] == "valid"


# -- cpx translate -------------------------------------------------------------------------------------


def _manifests(tmp_path: Path) -> Path:
    objects = [
        service("web"),
        tls_secret("tls"),
        tls_secret("fallback"),
        proxy(
            "secure",
            {
                "virtualhost": {
                    "fqdn": "example.com",
                    "tls": {"secretName": "tls", "enableFallbackCertificate": True},
                },
                "routes": [
                    {"services": [{"name": "web", "port": 80}]},
                    {
                        "conditions": [{"prefix": "/open"}],
                        "permitInsecure": True,
                        "services": [{"name": "web", "port": 80}],
                    },
                ],
                "includes": [{"name": "missing", "conditions": [{"prefix": "/missing"}]}],
            },
        ),
        proxy(
            "passthrough",
            {
                "virtualhost": {"fqdn": "passthrough.example.com", "tls": {"passthrough": True}},
                "tcpproxy": {"services": [{"name": "web", "port": 80}]},
            },
        ),
        proxy("orphan", {"routes": [{"services": [{"name": "web", "port": 80}]}]}),
    ]
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _translate(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["translate", "--plugins", "httpproxy", "-o", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_translate_end_to_end(tmp_path: Path) -> None:
    doc = _translate(
        "--fallback-certificate",
        "default/fallback",
        "--root-namespaces",
        "default,other",
        str(_manifests(tmp_path)),
    )
    statuses = {
        o["metadata"]["name"]: o.get("status", {}) for o in doc["objects"] if o["kind"] == "HTTPProxy"
    }
    assert statuses["passthrough"]["currentStatus"] == "valid"
    assert statuses["orphan"]["currentStatus"] == "orphaned"
    assert statuses["secure"]["currentStatus"] == "invalid"
    assert [e["reason"] for e in statuses["secure"]["conditions"][0]["errors"]] == ["IncludeNotFound"]
    xds = json.dumps(doc["xds"])
    for name in (HTTP_LISTENER, HTTPS_LISTENER, "https/example.com", "ingress_fallbackcert"):
        assert name in xds


def test_translate_disable_permit_insecure_flag(tmp_path: Path) -> None:
    manifests = str(_manifests(tmp_path))
    args = ("--fallback-certificate", "default/fallback", manifests)

    def open_route_redirects(doc: Any) -> bool:
        # The scoped route shape: the exact host's own RouteConfiguration.
        [config] = [r for r in doc["xds"]["routes"] if r["name"] == f"{HTTP_LISTENER}/example.com"]
        [vhost] = config["virtualHosts"]
        [route] = [r for r in vhost["routes"] if r["match"] == {"prefix": "/open"}]
        return bool(route.get("redirect", {}).get("httpsRedirect"))

    assert not open_route_redirects(_translate(*args))
    assert open_route_redirects(_translate("--disable-permit-insecure", *args))


def test_translate_refuses_a_bad_fallback_certificate(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["translate", "--plugins", "httpproxy", "--fallback-certificate", "nope", str(_manifests(tmp_path))],
    )
    assert result.exit_code != 0
    assert "--fallback-certificate: expected namespace/name, got 'nope'" in result.output


def _root(fqdn: str) -> KubeObject:
    return proxy(
        "root", {"virtualhost": {"fqdn": fqdn}, "routes": [{"services": [{"name": "web", "port": 80}]}]}
    )


def test_status_is_stable_across_rebuilds_and_carries_the_load_balancer_address() -> None:
    """Objects from files carry no status: the last one computed keeps lastTransitionTime stable."""
    config = Config(options={"ingress_status_address": "192.0.2.7"})
    pipeline = SnapshotHandler.create(PluginHost.load(["httpproxy"]), config)
    for obj in (service("web"), _root("a.example.com")):
        pipeline.upsert(obj)
    pipeline.rebuild()
    [first] = [s.status for k, s in pipeline.statuses().items() if k.kind == "HTTPProxy"]
    assert first["currentStatus"] == "valid"
    assert first["loadBalancer"] == {"ingress": [{"ip": "192.0.2.7"}]}
    time.sleep(1.1)  # lastTransitionTime has a resolution of one second
    pipeline.upsert(service("other"))  # an unrelated change, then another build
    pipeline.rebuild()
    [second] = [s.status for k, s in pipeline.statuses().items() if k.kind == "HTTPProxy"]
    assert second == first
