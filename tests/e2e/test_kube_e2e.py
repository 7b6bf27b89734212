"""Kubernetes mode end to end: ``cpx serve --kubeconfig`` against an emulated API server (kmock).

One emulated API server, cpx and Envoy serve the whole module; each test changes objects through
the API, with hosts of its own.  The last test takes the API server away and brings it back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from cpx import objects as k8s
from cpx.testing import EchoServer, EnvoyProcess, envoy_binary, http_get
from cpx.testing.cpxproc import CpxProcess, backend, endpoint_slice, service
from cpx.testing.kubeapi import KubeAPI
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

INGRESS = k8s.GroupVersionKind(group="networking.k8s.io", version="v1", kind="Ingress", plural="ingresses")
# HTTPProxy is left out on purpose: its CRD is "not installed".
KINDS = (k8s.SERVICE, k8s.ENDPOINT_SLICE, k8s.SECRET, k8s.NAMESPACE, INGRESS)


def wait_until(check: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.05)


@attrs.define(eq=False)
class Stack:
    workdir: Path
    api: KubeAPI
    alpha: EchoServer
    beta: EchoServer
    cpx: CpxProcess
    envoy: EnvoyProcess

    def get(self, host: str) -> tuple[int, str | None]:
        try:
            response = http_get(f"http://127.0.0.1:{self.cpx.http_port}/", host_header=host, timeout=2.0)
        except OSError:
            return 0, None
        return response.status, response.headers.get("x-backend")

    def wait_backend(self, host: str, name: str | None, timeout: float = 10.0) -> None:
        """Wait until ``host`` answers 200 from backend ``name`` (None: until it answers 404)."""
        want = (200, name) if name is not None else (404, None)
        wait_until(lambda: self.get(host) == want, timeout, f"{host} -> {want}")


def base_objects(alpha: EchoServer) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        *backend("alpha", alpha.port),
        ingress("base", [("base.test", "/", "alpha")]),
    ]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("kube-e2e")
    with EchoServer("alpha") as alpha, EchoServer("beta") as beta:
        api = KubeAPI(kinds=KINDS, objects=base_objects(alpha)).start()
        kubeconfig = api.write_kubeconfig(workdir / "kubeconfig")
        cpx = CpxProcess(
            [],
            workdir,
            plugins=["ingress", "httpproxy"],
            extra_args=["--kubeconfig", str(kubeconfig)],
        )
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy")
        s = Stack(workdir, api, alpha, beta, cpx, envoy)
        try:
            try:
                cpx.start()
                envoy.start()
                envoy.wait_ready()
                s.wait_backend("base.test", "alpha")
            except BaseException:
                _dump(s)
                raise
            yield s
        finally:
            s.envoy.stop()
            s.cpx.kill()
            s.api.stop()


@pytest.fixture
def e2e(request: pytest.FixtureRequest, stack: Stack) -> Iterator[Stack]:
    yield stack
    report = getattr(request.node, "cpx_report_call", None)  # set by tests/conftest.py
    if report is None or report.failed:
        _dump(stack)


def _dump(s: Stack) -> None:
    print(f"--- cpx log (tail) ---\n{s.cpx.log_text()[-5000:]}")
    print(f"--- envoy log (tail) ---\n{s.envoy.log_text()[-3000:]}")


def test_missing_crd_is_reported_and_skipped(e2e: Stack) -> None:
    line = e2e.cpx.wait_log("does not serve projectcontour.io/v1/HTTPProxy")
    assert "(plugin 'httpproxy')" in line and "CRD" in line
    assert e2e.cpx.log_text().count("does not serve") == 1


def test_objects_created_changed_and_deleted_through_the_api(e2e: Stack) -> None:
    api = e2e.api
    route = ingress("crud", [("crud.test", "/", "beta")])
    api.create(backend("beta", e2e.beta.port), route)
    e2e.wait_backend("crud.test", "beta")

    api.patch(route, {"spec": {"rules": ingress("x", [("crud.test", "/", "alpha")])["spec"]["rules"]}})
    e2e.wait_backend("crud.test", "alpha")

    api.delete(route)
    e2e.wait_backend("crud.test", None)
    assert e2e.get("base.test") == (200, "alpha")


def test_endpoint_slice_patch_moves_traffic(e2e: Stack) -> None:
    api = e2e.api
    slice_ = endpoint_slice("gamma", e2e.alpha.port)
    api.create(service("gamma"), slice_, ingress("gamma", [("gamma.test", "/", "gamma")]))
    e2e.wait_backend("gamma.test", "alpha")
    rebuilds = e2e.cpx.metric("contour_dagrebuild_total")

    api.patch(slice_, {"ports": [{"name": "http", "port": e2e.beta.port, "protocol": "TCP"}]})
    e2e.wait_backend("gamma.test", "beta")
    # Endpoints take the EDS fast path: no DAG rebuild.
    assert e2e.cpx.metric("contour_dagrebuild_total") == rebuilds


def test_api_server_outage_keeps_serving_then_reconciles(e2e: Stack) -> None:
    """Runs last: it replaces the module's API server."""
    port = e2e.api.port
    log_start = len(e2e.cpx.log_text())
    e2e.api.stop()
    e2e.cpx.wait_log("cannot list/watch", timeout=10, start=log_start)
    # The API server is gone: the last good configuration stays.
    for _ in range(5):
        assert e2e.get("base.test") == (200, "alpha")
        assert e2e.get("gamma.test") == (200, "beta")
        time.sleep(0.1)

    # Back, with a state cpx never saw through a watch: gamma gone, base moved to beta.
    state = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        *backend("alpha", e2e.alpha.port),
        *backend("beta", e2e.beta.port),
        ingress("base", [("base.test", "/", "beta")]),
    ]
    e2e.api = KubeAPI(port=port, kinds=KINDS, objects=state).start()
    e2e.wait_backend("base.test", "beta", timeout=30)
    e2e.wait_backend("gamma.test", None)
