"""docs/plugins.md's complete plugin is real: its code block runs, through the fixtures only."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
OBJECTS = """
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec: {ports: [{port: 80}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: web, namespace: default}
spec:
  virtualhost: {fqdn: web.example.com}
  routes: [{services: [{name: echo, port: 80}]}]
---
apiVersion: example.com/v1
kind: Banner
metadata: {name: hello, namespace: default}
spec: {host: web.example.com, value: hello}
"""


@pytest.fixture(scope="module")
def banner() -> types.ModuleType:
    [code] = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if '"""cpx-banner' in b]
    module = types.ModuleType("cpx_banner")
    exec(compile(code, str(DOC), "exec"), module.__dict__)
    return module


def plugins(banner: types.ModuleType) -> list[tuple[str, Any]]:
    import cpx_httpproxy.plugin

    return [("httpproxy", cpx_httpproxy.plugin), ("banner", banner)]


def vhost_routes(result: Any) -> list[dict[str, Any]]:
    [vhost] = result.virtual_hosts().values()
    routes: list[dict[str, Any]] = vhost["routes"]
    return routes


@pytest.mark.parametrize(("options", "header"), [(None, "x-banner"), ({"banner_header": "x-edge"}, "x-edge")])
def test_the_documented_plugin_decorates_its_host(
    cpx_translate: Any, banner: types.ModuleType, options: dict[str, str] | None, header: str
) -> None:
    result = cpx_translate(OBJECTS, modules=plugins(banner), options=options)
    [route] = vhost_routes(result)
    assert {"key": header, "value": "hello"} in [h["header"] for h in route["responseHeadersToAdd"]]
    assert result.status("Banner", "hello") == {
        "currentStatus": "valid",
        "description": "web.example.com: hello",
    }


def test_the_documented_plugin_reports_what_it_cannot_do(
    cpx_translate: Any, banner: types.ModuleType
) -> None:
    text = OBJECTS.replace("{host: web.example.com, value: hello}", "{host: other.example.com, value: hi}")
    text += "---\napiVersion: example.com/v1\nkind: Banner\n"
    text += "metadata: {name: broken, namespace: default}\nspec: {host: 7}\n"
    result = cpx_translate(text, modules=plugins(banner))
    assert result.status("Banner", "hello")["currentStatus"] == "invalid"
    assert "responseHeadersToAdd" not in vhost_routes(result)[0]
    broken = str(result.status("Banner", "broken"))
    assert "spec.host: Invalid value: 7: must be a string" in broken
