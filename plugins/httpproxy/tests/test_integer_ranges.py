"""Schema-valid integers beyond Envoy's uint32/Duration ranges are clamped, never crash a build."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from cpx.testing import cli

from cpx_httpproxy import policies

BIG = 2**63 - 1  # int64: the API server accepts it in every integer field of the CRD
SERVICES = [
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": n, "namespace": "web"},
     "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}
    for n in ("a", "b")
]  # fmt: skip
LOCAL = {"requests": BIG, "unit": "second", "burst": BIG}
HEALTH = {
    "intervalSeconds": BIG,
    "timeoutSeconds": BIG,
    "unhealthyThresholdCount": BIG,
    "healthyThresholdCount": -1,
}


def _proxy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"virtualhost": {"fqdn": f"{name}.example.com"}, **spec}
    return {"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy",
            "metadata": {"name": name, "namespace": "web"}, "spec": spec}  # fmt: skip


def _translate(tmp_path: Path, objs: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    result = CliRunner().invoke(cli, ["translate", "--plugins", "httpproxy", "-o", "json", str(path)])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_huge_integers_are_clamped_not_a_crash(tmp_path: Path) -> None:
    route = {
        "services": [{"name": "a", "port": 80, "weight": BIG}, {"name": "b", "port": 80, "weight": BIG}],
        "retryPolicy": {"count": BIG, "retriableStatusCodes": [BIG, 503], "retryOn": ["5xx"]},
        "internalRedirectPolicy": {"maxInternalRedirects": BIG},
        "rateLimitPolicy": {"local": LOCAL},
        "healthCheckPolicy": {"path": "/h", **HEALTH, "healthyThresholdCount": BIG},
    }
    tcp = {"services": [{"name": "a", "port": 80, "weight": BIG}, {"name": "b", "port": 80, "weight": 1}],
           "healthCheckPolicy": HEALTH}  # fmt: skip
    objs = [
        *SERVICES,
        _proxy("http", {"routes": [route]}),
        _proxy(
            "tcp", {"virtualhost": {"fqdn": "tcp.example.com", "tls": {"passthrough": True}}, "tcpproxy": tcp}
        ),
    ]
    doc = _translate(tmp_path, objs)
    statuses = {
        o["metadata"]["name"]: o["status"]["currentStatus"]
        for o in doc["objects"]
        if o["kind"] == "HTTPProxy"
    }
    assert statuses == {"http": "valid", "tcp": "valid"}
    text = json.dumps(doc["xds"])
    assert str(policies.UINT32_MAX) in text


def test_fit_weights_keeps_small_weights_and_scales_big_ones() -> None:
    assert policies.fit_weights([90, 10]) == [90, 10]
    assert policies.fit_weights([BIG, BIG]) == [policies.UINT32_MAX // 2] * 2
    assert sum(policies.fit_weights([BIG, 1, BIG])) <= policies.UINT32_MAX
