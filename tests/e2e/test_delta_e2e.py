"""A real Envoy on incremental (delta) ADS: ``cpx bootstrap --xds-api delta``.

Routing, a manifest edit, an EndpointSlice move and a cpx restart, each observed through Envoy, as
the state-of-the-world tests do; plus what delta adds: a change sends only what changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cpx.testing import EchoServer, EnvoyProcess, envoy_binary, http_get
from cpx.testing.cpxproc import CpxProcess, backend, write_manifest
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

# What moves when Envoy adds, changes or drops a listener or cluster (an empty delta answer to a
# reconnecting Envoy counts as an update_success but changes nothing, so it is not listed).
RECONFIGURATION_STATS = (
    "listener_manager.listener_added",
    "listener_manager.listener_modified",
    "listener_manager.listener_removed",
    "cluster_manager.cluster_added",
    "cluster_manager.cluster_modified",
    "cluster_manager.cluster_removed",
    "http.ingress_http.rds.ingress_http.config_reload",
)


def _answer(port: int, host: str) -> tuple[int, str | None]:
    try:
        response = http_get(f"http://127.0.0.1:{port}/", host_header=host, timeout=2.0)
    except OSError:
        return (0, None)
    return response.status, response.headers.get("x-backend")


def _wait(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, CpxProcess, EnvoyProcess, int]]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("delta-e2e")
    manifests = workdir / "manifests"
    with EchoServer("alpha") as alpha, EchoServer("beta") as beta:
        write_manifest(
            manifests,
            "base.yaml",
            [
                *backend("alpha", alpha.port),
                *backend("beta", beta.port),
                ingress("a", [("a.test", "/", "alpha")]),
            ],
        )
        cpx = CpxProcess(manifests, workdir)
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy", xds_api="delta")
        try:
            cpx.start()
            envoy.start()
            envoy.wait_ready()
            yield manifests, cpx, envoy, beta.port
        finally:
            envoy.stop()
            cpx.kill()


def test_delta_ads_routes_edits_and_moves_endpoints(
    stack: tuple[Path, CpxProcess, EnvoyProcess, int],
) -> None:
    manifests, cpx, envoy, beta_port = stack
    port = cpx.http_port
    _wait(lambda: _answer(port, "a.test") == (200, "alpha"), "a.test -> alpha")
    assert "DELTA_GRPC" in (Path(envoy.workdir) / "bootstrap.json").read_text()

    # A new Ingress to a Service no route used yet: a new cluster, endpoints and routes.
    write_manifest(manifests, "b.yaml", [ingress("b", [("b.test", "/", "beta")])])
    _wait(lambda: _answer(port, "b.test") == (200, "beta"), "b.test -> beta")
    assert _answer(port, "a.test") == (200, "alpha")

    # A route-only change: the route table is pushed, clusters are not.
    clusters_before = cpx.metric("cpx_xds_responses_total", type_url=CLUSTER)
    routes_before = cpx.metric("cpx_xds_responses_total", type_url=ROUTE)
    write_manifest(manifests, "c.yaml", [ingress("c", [("c.test", "/", "beta")])])
    _wait(lambda: _answer(port, "c.test") == (200, "beta"), "c.test -> beta")
    assert cpx.metric("cpx_xds_responses_total", type_url=ROUTE) > routes_before
    assert cpx.metric("cpx_xds_responses_total", type_url=CLUSTER) == clusters_before

    # An EndpointSlice move: traffic follows without a DAG rebuild.  (Edited where it is defined:
    # the same slice in a second file would be a conflict, reported after a rebuild.)
    rebuilds = cpx.metric("contour_dagrebuild_total")
    moved = [
        *backend("alpha", beta_port),
        *backend("beta", beta_port),
        ingress("a", [("a.test", "/", "alpha")]),
    ]
    write_manifest(manifests, "base.yaml", moved)
    _wait(lambda: _answer(port, "a.test") == (200, "beta"), "a.test -> beta's endpoint")
    assert cpx.metric("contour_dagrebuild_total") == rebuilds


def test_restart_over_delta_keeps_serving_and_changes_nothing(
    stack: tuple[Path, CpxProcess, EnvoyProcess, int],
) -> None:
    _manifests, cpx, envoy, _ = stack
    port = cpx.http_port
    _wait(lambda: _answer(port, "b.test") == (200, "beta"), "b.test -> beta")
    before = envoy.stats()
    replacement = cpx.clone()
    assert cpx.stop() == 0
    envoy.wait_stat("control_plane.connected_state", lambda v: v == 0, timeout=10.0)
    assert _answer(port, "b.test") == (200, "beta")  # Envoy serves on its own meanwhile
    replacement.start()
    try:
        envoy.wait_stat("control_plane.connected_state", lambda v: v == 1, timeout=15.0)
        _wait(lambda: replacement.metric("cpx_xds_requests_total") >= 2, "Envoy's delta requests")
        time.sleep(0.5)
        after = envoy.stats()
        changed = {
            n: (before.get(n), after.get(n)) for n in RECONFIGURATION_STATS if before.get(n) != after.get(n)
        }
        assert not changed, f"a restarted cpx reconfigured Envoy over delta: {changed}"
        assert after.get("listener_manager.lds.update_rejected", 0) == 0
        assert after.get("cluster_manager.cds.update_rejected", 0) == 0
        assert _answer(port, "b.test") == (200, "beta")
    finally:
        replacement.kill()


CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
