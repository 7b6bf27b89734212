"""``examples/httpproxy`` translates cleanly: every HTTPProxy is valid and served as documented."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cpx.testing import cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "httpproxy"


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["translate", "--plugins", "httpproxy", "-o", "json", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_every_httpproxy_is_valid(translated: dict[str, Any]) -> None:
    assert translated["errors"] == []
    statuses = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["status"]
        for o in translated["objects"]
        if o["kind"] == "HTTPProxy"
    }
    assert sorted(statuses) == ["blog/blog", "web/tcp", "web/www"]
    for name, status in statuses.items():
        assert (status["currentStatus"], status["description"]) == ("valid", "Valid HTTPProxy"), name
        (condition,) = status["conditions"]
        assert (condition["type"], condition["status"]) == ("Valid", "True"), name
        assert "errors" not in condition and "warnings" not in condition, name
        assert "cpx" not in status, (name, status)


def test_xds_serves_the_documented_hosts(translated: dict[str, Any]) -> None:
    xds = translated["xds"]
    routes = {r["name"]: r for r in xds["routes"]}
    # Plain HTTP: each exact host in its own RouteConfiguration (the scoped route shape).
    assert sorted(routes) == ["https/www.example.com", "ingress_http", "ingress_http/www.example.com"]
    (www,) = routes["https/www.example.com"]["virtualHosts"]
    assert www["domains"] == ["www.example.com"]
    # The include put the blog's routes under /blog.
    assert any(json.dumps(r["match"]).find("/blog") >= 0 for r in www["routes"])
    (https,) = (listener for listener in xds["listeners"] if listener["name"] == "ingress_https")
    names = sorted(n for chain in https["filterChains"] for n in chain["filterChainMatch"]["serverNames"])
    assert names == ["tcp.example.com", "www.example.com"]
