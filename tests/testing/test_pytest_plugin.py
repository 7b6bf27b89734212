"""The pytest plugin's fixtures, used as a plugin author would: through the fixtures only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from cpx import Config, OptionSpec, Phase, ProcessorSpec, SourceView, hookimpl
from cpx.dag import DAG, HeaderValue

SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec: {ports: [{port: 80, targetPort: 8080}]}
"""


def proxy(name: str, fqdn: str, service: str = "echo") -> str:
    return f"""
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {{name: {name}, namespace: default}}
spec:
  virtualhost: {{fqdn: {fqdn}}}
  routes: [{{services: [{{name: {service}, port: 80}}]}}]
"""


class TagPlugin:
    """A plugin given as an object (not installed): tags every route's responses."""

    @staticmethod
    @hookimpl
    def cpx_options() -> Iterator[OptionSpec]:
        yield OptionSpec(name="tag_value", help="The x-tag value.", default="plain")

    @staticmethod
    @hookimpl
    def cpx_dag_processors() -> Iterator[ProcessorSpec]:
        yield ProcessorSpec(name="tag", factory=Tagger, phase=Phase.FINALIZE, description="x-tag")


@attrs.define
class Tagger:
    config: Config

    def run(self, dag: DAG, source: SourceView) -> None:
        tag = HeaderValue(name="x-tag", value=self.config.option("tag_value"))
        for listener in dag.listeners.values():
            for vhost in listener.virtual_hosts.values():
                for key, route in vhost.routes.items():
                    headers = attrs.evolve(route.response_headers, set=(*route.response_headers.set, tag))
                    vhost.routes[key] = attrs.evolve(route, response_headers=headers)


def test_translate_gives_the_dag_the_xds_and_the_statuses(cpx_translate: Any) -> None:
    result = cpx_translate(SERVICE + proxy("web", "web.example.com"), ["httpproxy"])
    [route] = result.routes("ingress_http")
    assert route.clusters[0].upstream.name == "echo"
    [vhost] = result.virtual_hosts().values()
    assert vhost["domains"] == ["web.example.com"]
    assert result.status("HTTPProxy", "web")["currentStatus"] == "valid"


def test_translate_reports_a_bad_object_in_its_status(cpx_translate: Any) -> None:
    result = cpx_translate(SERVICE + proxy("web", "web.example.com", service="missing"), ["httpproxy"])
    status = result.status("HTTPProxy", "web")
    assert status["currentStatus"] == "invalid"
    [error] = status["conditions"][0]["errors"]
    assert (error["type"], error["reason"]) == ("ServiceError", "ServiceUnresolvedReference")
    assert 'service "default/missing" not found' in error["message"]
    [route] = result.routes("ingress_http")
    assert route.clusters == ()  # Contour keeps the route, answering 503


def test_translate_names_kinds_no_plugin_watches(cpx_translate: Any) -> None:
    result = cpx_translate(SERVICE + proxy("web", "web.example.com"), plugins=[])
    [(key, message)] = result.unknown.items()
    assert key.kind == "HTTPProxy" and "no enabled plugin handles it" in message


@pytest.mark.parametrize(("options", "expected"), [(None, "plain"), ({"tag_value": "blue"}, "blue")])
def test_translate_runs_plugin_objects_with_their_options(
    cpx_translate: Any, options: dict[str, str] | None, expected: str
) -> None:
    import cpx_httpproxy.plugin

    modules = [("httpproxy", cpx_httpproxy.plugin), ("tag", TagPlugin)]
    result = cpx_translate(SERVICE + proxy("web", "web.example.com"), modules=modules, options=options)
    [vhost] = result.virtual_hosts().values()
    added = vhost["routes"][0]["responseHeadersToAdd"]
    assert {
        "header": {"key": "x-tag", "value": expected},
        "appendAction": "OVERWRITE_IF_EXISTS_OR_ADD",
    } in added


@pytest.mark.e2e
def test_envoy_serves_the_config_and_later_changes(cpx_envoy: Any) -> None:
    served = cpx_envoy(proxy("web", "web.test"), plugins=["httpproxy"])
    response = served.wait_served("web.test")
    assert response.json()["server"] == "echo"
    served.apply(proxy("api", "api.test"))
    served.wait_served("api.test")
    assert served.get("nowhere.test").status == 404
    assert served.rejected_updates() == 0


def test_the_plugin_is_inert_for_projects_that_do_not_use_it(tmp_path: Path) -> None:
    """Loaded in every pytest run where cpx is installed: it loads cpx's light facade, no machinery."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_other.py").write_text(
        textwrap.dedent(
            """
            import sys

            def test_nothing_loaded(request):
                assert request.config.pluginmanager.has_plugin("cpx")
                heavy = ("grpc", "google.protobuf", "cryptography", "cpx.snapshot", "cpx.testing.translation")
                assert not [m for m in heavy if m in sys.modules]
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
