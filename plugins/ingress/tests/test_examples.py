"""``examples/ingress`` translates cleanly: every Ingress gets a status, the broken one says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cpx.testing import cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "ingress"


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    args = ["translate", "--plugins", "ingress", "--ingress-status-address", "127.0.0.1", "-o", "json"]
    result = CliRunner().invoke(cli, [*args, str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _ingresses(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in doc["objects"] if o["kind"] == "Ingress"}


def test_every_object_is_read_and_every_ingress_has_a_status(translated: dict[str, Any]) -> None:
    assert translated["errors"] == []
    ingresses = _ingresses(translated)
    assert sorted(ingresses) == ["fallback", "legacy", "secure", "shop", "tenants"]
    for name, obj in ingresses.items():
        assert obj["status"]["loadBalancer"] == {"ingress": [{"ip": "127.0.0.1"}]}, name
        if name != "legacy":
            assert "cpx" not in obj["status"], (name, obj["status"])


def test_missing_service_is_reported_on_its_ingress(translated: dict[str, Any]) -> None:
    problems = _ingresses(translated)["legacy"]["status"]["cpx"]["problems"]
    assert [(p["type"], p["reason"], p["severity"]) for p in problems] == [
        ("ServiceError", "ServiceUnresolvedReference", "error")
    ]
    assert 'service "shop/legacy-api" not found' in problems[0]["message"]


def test_xds_has_the_expected_routes(translated: dict[str, Any]) -> None:
    xds = translated["xds"]
    routes = {r["name"]: r for r in xds["routes"]}
    # Plain HTTP: each exact host in its own RouteConfiguration (the scoped route shape), the
    # wildcard and default hosts together in ingress_http.
    assert sorted(routes) == [
        "https/secure.example.com",
        "ingress_http",
        "ingress_http/secure.example.com",
        "ingress_http/shop.example.com",
    ]
    assert [v["name"] for v in routes["ingress_http"]["virtualHosts"]] == ["*", "*.tenants.example.com"]
    plain = (r for name, r in routes.items() if name.split("/")[0] == "ingress_http")
    vhosts = {v["name"]: v for r in plain for v in r["virtualHosts"]}
    assert sorted(vhosts) == ["*", "*.tenants.example.com", "secure.example.com", "shop.example.com"]

    shop = [(next(k for k in r["match"] if k != "headers"), r) for r in vhosts["shop.example.com"]["routes"]]
    matches = [(kind, r["match"][kind]) for kind, r in shop]
    assert matches == [
        ("path", "/cart/checkout"),  # Exact first
        ("safeRegex", {"regex": "^/items/[0-9]+"}),
        ("pathSeparatedPrefix", "/legacy"),  # longer prefixes before shorter ones
        ("prefix", "/assets"),
        ("pathSeparatedPrefix", "/chat"),
        ("pathSeparatedPrefix", "/cart"),
        ("prefix", "/"),
    ]
    by_match = {json.dumps(r["match"], sort_keys=True): r for _, r in shop}
    legacy = by_match[json.dumps({"pathSeparatedPrefix": "/legacy"})]
    assert legacy["directResponse"] == {"status": 503}
    chat = by_match[json.dumps({"pathSeparatedPrefix": "/chat"})]["route"]
    assert chat["upgradeConfigs"] == [{"upgradeType": "websocket"}]
    assert chat["timeout"] == "10s"
    assert chat["retryPolicy"] == {"retryOn": "5xx,gateway-error", "numRetries": 2}

    (tenants,) = vhosts["*.tenants.example.com"]["routes"]
    assert tenants["match"]["headers"][0]["name"] == ":authority"  # one DNS label only
    (fallback,) = vhosts["*"]["routes"]
    assert fallback["route"]["cluster"].startswith("shop/fallback/80/")
    (redirect,) = vhosts["secure.example.com"]["routes"]
    assert redirect["redirect"] == {"httpsRedirect": True}

    (secure,) = routes["https/secure.example.com"]["virtualHosts"]
    assert secure["domains"] == ["secure.example.com"]
    assert secure["routes"][0]["route"]["cluster"].startswith("shop/shop/80/")

    (https,) = [listener for listener in xds["listeners"] if listener["name"] == "ingress_https"]
    (chain,) = https["filterChains"]
    assert chain["filterChainMatch"]["serverNames"] == ["secure.example.com"]
    assert [s["name"].rsplit("/", 1)[0] for s in xds["secrets"]] == ["shop/secure-example-com"]
