"""The plugin as the core sees it (entry point, hooks, records) and its class selection."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest
from cpx import Config, ingress_class_accepts
from cpx.testing import PLUGIN_GROUP as GROUP
from cpx.testing import PluginHost
from cpx.testing import builtin_plugin as core

import cpx_httpproxy.plugin
from cpx_httpproxy import schema, status
from cpx_httpproxy.kinds import HTTP_LISTENER, HTTPPROXY, HTTPS_LISTENER


def test_entry_point_resolves() -> None:
    [ep] = [ep for ep in importlib.metadata.entry_points(group=GROUP) if ep.name == "httpproxy"]
    assert ep.value == "cpx_httpproxy.plugin"
    assert ep.dist is not None and ep.dist.metadata["Name"] == "cpx-httpproxy"
    assert ep.load() is cpx_httpproxy.plugin


def test_loads_through_the_plugin_host() -> None:
    host = PluginHost.load(["httpproxy"])
    assert host.names == ("core", "httpproxy")
    [watch] = [w for w in host.watches() if w.gvk == HTTPPROXY]
    assert watch.validate is schema.validate and watch.accept is ingress_class_accepts
    [writer] = [w for w in host.status_writers() if w.gvk == HTTPPROXY]
    assert writer.name == "httpproxy" and writer.merge is status.merge


def test_loads_alongside_ingress() -> None:
    host = PluginHost.load(["ingress", "httpproxy"])
    assert {w.gvk.kind for w in host.watches()} >= {"Ingress", "HTTPProxy"}


def test_listener_names_match_the_core() -> None:
    assert (core.HTTP_LISTENER, core.HTTPS_LISTENER) == (HTTP_LISTENER, HTTPS_LISTENER)


def _proxy(annotations: dict[str, str] | None = None, class_name: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default"}
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {} if class_name is None else {"ingressClassName": class_name}
    return {"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "configured", "accepted"),
    [
        (_proxy(), None, True),
        (_proxy(class_name="contour"), None, True),
        (_proxy(class_name="other"), None, False),
        (_proxy(class_name="other"), "other", True),
        (_proxy(), "other", False),
        (_proxy({"projectcontour.io/ingress.class": "a"}, class_name="b"), "a", True),
        (_proxy({"kubernetes.io/ingress.class": "b"}, class_name="a"), "a", False),
        (_proxy({"projectcontour.io/ingress.class": "a", "kubernetes.io/ingress.class": "b"}), "b", False),
        (_proxy({"projectcontour.io/ingress.class": ""}, class_name="a"), "a", True),
        (_proxy(class_name="b"), ["a", "b,c"], True),
    ],
)
def test_class_selection(obj: dict[str, Any], configured: Any, accepted: bool) -> None:
    config = Config(options={} if configured is None else {"ingress_class_name": configured})
    assert ingress_class_accepts(obj, config) is accepted
