"""Make-before-break with a real Envoy: an Ingress flipping between two Services drops no request.

Issue #10's churn scenario, CI-sized: ``flip.test`` moves between Service A and Service B every
200 ms (the Service it leaves is no longer referenced, so its cluster goes), while keep-alive
clients send GETs continuously. Every answer must be a 200: a route pushed before its cluster is
warm, or a cluster removed while a route uses it, answers 503 (Envoy's ``NC``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cpx.testing import EchoServer, EnvoyProcess, envoy_binary, http_get
from cpx.testing.churn import flip_routes
from cpx.testing.cpxproc import CpxProcess, backend, write_manifest
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

HOST = "flip.test"


def flip_to(service: str) -> list[dict[str, Any]]:
    return [ingress("flip", [(HOST, "/", service)])]


@pytest.mark.parametrize("xds_api", ["sotw", "delta"])
def test_flipping_a_route_between_services_fails_no_request(tmp_path: Path, xds_api: str) -> None:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    manifests = tmp_path / "manifests"
    with EchoServer("alpha") as alpha, EchoServer("beta") as beta:
        write_manifest(
            manifests, "services.yaml", [*backend("alpha", alpha.port), *backend("beta", beta.port)]
        )
        write_manifest(manifests, "flip.yaml", flip_to("alpha"))
        cpx = CpxProcess(manifests, tmp_path)
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=tmp_path / "envoy", xds_api=xds_api)
        try:
            cpx.start()
            envoy.start()
            envoy.wait_ready()
            envoy.wait_stat("cluster_manager.active_clusters", lambda v: v >= 1, timeout=10.0)
            assert http_get(f"http://127.0.0.1:{cpx.http_port}/", host_header=HOST).status == 200
            result = flip_routes(
                manifests=manifests,
                file_name="flip.yaml",
                documents=flip_to,
                targets=("alpha", "beta"),
                flips=40,
                interval=0.2,
                http_port=cpx.http_port,
                host=HOST,
            )
            stats = envoy.stats()
        finally:
            envoy.stop()
            cpx.kill()
        served = (len(alpha.requests), len(beta.requests))
    assert result.requests > 100, result
    assert result.failures == 0, f"{result.failures} of {result.requests} requests failed: {result}"
    assert min(served) > 10, served  # the route did move, back and forth
    assert stats.get("cluster_manager.cluster_removed", 0) >= 10  # and the cluster it left went
    assert stats.get("cluster_manager.cds.update_rejected", 0) == 0
