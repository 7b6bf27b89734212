"""build_route's fast path for routes without policies gives what the full checks give."""

from __future__ import annotations

from typing import Any

import pytest
from cpx import Config, ObjectKey
from cpx.testing import SourceCache

from cpx_httpproxy import model, routebuild
from cpx_httpproxy.status import ProxyStatus

NS = "default"


def service(name: str, *ports: int) -> dict[str, Any]:
    spec = {"ports": [{"name": f"p{p}", "port": p, "protocol": "TCP"} for p in ports]}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def build(route: dict[str, Any], options: dict[str, Any]) -> tuple[routebuild.RouteParts | None, ProxyStatus]:
    source = SourceCache()
    source.insert(service("web", 80))
    source.insert(service("other", 80, 8080))
    status = ProxyStatus()
    parts = routebuild.build_route(
        model.Route.from_dict(route),
        namespace=NS,
        source=source,
        config=Config(options=options),
        status=status,
        referrer=ObjectKey("projectcontour.io", "HTTPProxy", NS, "web"),
    )
    return parts, status


PLAIN_ROUTES: list[dict[str, Any]] = [
    {"services": [{"name": "web", "port": 80}]},
    {"services": [{"name": "web", "port": 80}], "enableWebsockets": True, "permitInsecure": True},
    {"services": [{"name": "web", "port": 80, "weight": 3}, {"name": "other", "port": 8080, "weight": 1}]},
    {"services": [{"name": "web", "port": 80}, {"name": "other", "port": 80, "mirror": True}]},
    {"services": [{"name": "missing", "port": 80}]},
    {"services": [{"name": "web", "port": 80, "protocol": "h2c"}]},
    {"services": [{"name": "web", "port": 0}]},
    {"conditions": [{"prefix": "/a"}]},
]


@pytest.mark.parametrize("route", PLAIN_ROUTES)
@pytest.mark.parametrize("options", [{}, {"disable_permit_insecure": True}])
def test_plain_route_fast_path_matches_full_checks(
    route: dict[str, Any], options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, fast_status = build(route, options=options)
    monkeypatch.setattr(routebuild, "_NO_POLICIES", object())  # no route takes the fast path
    full, full_status = build(route, options=options)
    assert fast == full
    assert fast_status.errors == full_status.errors
    assert fast_status.warnings == full_status.warnings
