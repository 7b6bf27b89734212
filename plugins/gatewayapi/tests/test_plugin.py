"""The plugin as the core sees it: entry point, watched kinds, processor order, status writers."""

from __future__ import annotations

import importlib.metadata

from cpx.testing import PLUGIN_GROUP as GROUP
from cpx.testing import PluginHost

import cpx_gatewayapi.plugin
from cpx_gatewayapi import status
from cpx_gatewayapi.kinds import GATEWAY, GATEWAY_CLASS, HTTPROUTE, REFERENCE_GRANT


def test_entry_point_resolves() -> None:
    [ep] = [ep for ep in importlib.metadata.entry_points(group=GROUP) if ep.name == "gatewayapi"]
    assert ep.value == "cpx_gatewayapi.plugin"
    assert ep.dist is not None and ep.dist.metadata["Name"] == "cpx-gatewayapi"
    assert ep.load() is cpx_gatewayapi.plugin


def test_watches_its_kinds_and_owns_their_status() -> None:
    host = PluginHost.load(["gatewayapi"])
    assert host.names == ("core", "gatewayapi")
    assert {w.gvk for w in host.watches()} >= {GATEWAY_CLASS, GATEWAY, HTTPROUTE, REFERENCE_GRANT}
    writers = {w.gvk: w.merge for w in host.status_writers()}
    assert writers[GATEWAY_CLASS] is status.merge_gateway_class
    assert writers[GATEWAY] is status.merge_gateway
    # Bound to the configured controller name (status.route_merge).
    route_merge = writers[HTTPROUTE]
    assert route_merge is not None and getattr(route_merge, "func", None) is status.merge_route


def test_runs_after_ingress_and_httpproxy() -> None:
    host = PluginHost.load(["ingress", "httpproxy", "gatewayapi"])
    names = [spec.name for spec in host.processors()]
    assert names.index("gatewayapi") > names.index("httpproxy") > names.index("ingress")
