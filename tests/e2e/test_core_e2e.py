"""The core end to end: ``cpx serve`` (a subprocess) in front of a real Envoy and real backends.

One cpx and one Envoy serve the whole module (``stack``); each test writes its own manifest
files, with hosts of its own, and removes them afterwards. Only the SIGTERM and mTLS tests start
processes of their own.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from cpx.ops import certgen
from cpx.testing import (
    EchoServer,
    EnvoyProcess,
    envoy_binary,
    http_get,
    https_get,
    make_tls_secret,
)
from cpx.testing.cpxproc import CpxProcess, backend, endpoint_slice, service, write_manifest
from cpx.testing.tls import weak_tls_secret
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

SECRET_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
# Envoy stats that move when Envoy accepts a push (update_success) or (re)configures a listener, a
# cluster or the HTTP route table.
RECONFIGURATION_STATS = (
    "listener_manager.listener_added",
    "listener_manager.listener_modified",
    "listener_manager.listener_removed",
    "listener_manager.listener_in_place_updated",
    "listener_manager.lds.update_success",
    "cluster_manager.cluster_added",
    "cluster_manager.cluster_modified",
    "cluster_manager.cluster_removed",
    "cluster_manager.cds.update_success",
    "http.ingress_http.rds.ingress_http.config_reload",
)


def _require_envoy() -> None:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "cpx_report_call", None)  # set by tests/conftest.py
    return report is None or report.failed


def _dump_logs(*procs: CpxProcess | EnvoyProcess) -> None:
    for proc in procs:
        what = "cpx" if isinstance(proc, CpxProcess) else "envoy"
        print(f"--- {what} log (tail) ---\n{proc.log_text()[-4000:]}")


def get(port: int, host: str, path: str = "/") -> tuple[int, str | None]:
    """(status, x-backend) of a request through Envoy; (0, None) when the connection fails."""
    try:
        response = http_get(f"http://127.0.0.1:{port}{path}", host_header=host, timeout=2.0)
    except OSError:
        return 0, None
    return response.status, response.headers.get("x-backend")


def wait_until(
    check: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02, what: str = ""
) -> float:
    """Poll ``check`` every ``interval`` until it is true; returns the seconds it took."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(interval)
    return time.monotonic() - started


def rejected(envoy: EnvoyProcess) -> int:
    """Every ``*.update_rejected`` counter of Envoy, summed (LDS, CDS, RDS, EDS, SDS)."""
    return sum(v for k, v in envoy.stats(r"update_rejected$").items() if k.endswith(".update_rejected"))


@attrs.define(eq=False)
class Stack:
    workdir: Path
    manifests: Path
    alpha: EchoServer
    beta: EchoServer
    cpx: CpxProcess
    envoy: EnvoyProcess
    written: set[str] = attrs.field(factory=set)

    def write(self, name: str, docs: Sequence[Mapping[str, Any]] | str) -> Path:
        self.written.add(name)
        return write_manifest(self.manifests, name, docs)

    def get(self, host: str, path: str = "/") -> tuple[int, str | None]:
        return get(self.cpx.http_port, host, path)

    def wait_backend(self, host: str, name: str | None, path: str = "/", timeout: float = 5.0) -> float:
        """Wait until ``host`` answers 200 from backend ``name`` (None: until it answers 404)."""
        want = (200, name) if name is not None else (404, None)
        return wait_until(lambda: self.get(host, path) == want, timeout, what=f"{host}{path} -> {want}")

    def settle(self, quiet: float = 0.4, timeout: float = 5.0) -> None:
        """Wait until cpx has stopped rebuilding and pushing (earlier tests' teardown included)."""

        def activity() -> tuple[float, float]:
            return self.cpx.metric("contour_dagrebuild_total"), self.cpx.metric("cpx_xds_responses_total")

        deadline = time.monotonic() + timeout
        last, since = activity(), time.monotonic()
        while time.monotonic() - since < quiet:
            assert time.monotonic() < deadline, "cpx kept rebuilding or pushing"
            time.sleep(0.05)
            now = activity()
            if now != last:
                last, since = now, time.monotonic()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    _require_envoy()
    workdir = tmp_path_factory.mktemp("core-e2e")
    manifests = workdir / "manifests"
    with EchoServer("alpha") as alpha, EchoServer("beta") as beta:
        base = [
            *backend("alpha", alpha.port),
            *backend("beta", beta.port),
            ingress("base", [("base.test", "/", "alpha")]),
        ]
        write_manifest(manifests, "00-base.yaml", base)
        cpx = CpxProcess(manifests, workdir)
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy")
        s = Stack(workdir, manifests, alpha, beta, cpx, envoy)
        try:
            try:
                cpx.start()
                envoy.start()
                envoy.wait_ready()
                s.wait_backend("base.test", "alpha")
            except BaseException:
                _dump_logs(cpx, envoy)
                raise
            yield s
        finally:
            s.envoy.stop()
            s.cpx.kill()


@pytest.fixture
def e2e(request: pytest.FixtureRequest, stack: Stack) -> Iterator[Stack]:
    """The module's stack; the files a test writes are removed after it, logs shown on failure."""
    stack.written.clear()
    yield stack
    if _failed(request):
        _dump_logs(stack.cpx, stack.envoy)
    for name in stack.written:
        (stack.manifests / name).unlink(missing_ok=True)


# --- the tests --------------------------------------------------------------------------------


def test_traffic_is_routed_per_the_manifests(e2e: Stack) -> None:
    e2e.write(
        "routing.yaml",
        [
            ingress(
                "routing",
                [
                    ("a.routing.test", "/", "alpha"),
                    ("a.routing.test", "/beta", "beta"),
                    ("b.routing.test", "/", "beta"),
                ],
            )
        ],
    )
    e2e.wait_backend("b.routing.test", "beta")
    assert e2e.get("a.routing.test", "/") == (200, "alpha")
    assert e2e.get("a.routing.test", "/beta") == (200, "beta")
    assert e2e.get("a.routing.test", "/beta/deeper") == (200, "beta")
    assert e2e.get("a.routing.test", "/betamax") == (200, "alpha")  # Prefix matches whole segments
    assert e2e.get("b.routing.test", "/anything") == (200, "beta")
    assert e2e.get("unknown.routing.test", "/") == (404, None)
    # The backend saw the request Envoy received.
    response = http_get(f"http://127.0.0.1:{e2e.cpx.http_port}/beta/x?q=1", host_header="a.routing.test")
    assert response.json()["path"] == "/beta/x"
    assert response.json()["headers"]["host"] == "a.routing.test"


def test_manifest_edit_changes_routing_within_a_second(e2e: Stack) -> None:
    e2e.write("edit.yaml", [ingress("edit", [("edit.test", "/", "alpha")])])
    e2e.wait_backend("edit.test", "alpha")
    seen: list[tuple[int, str | None]] = []

    def switched() -> bool:
        seen.append(e2e.get("edit.test"))
        return seen[-1] == (200, "beta")

    started = time.monotonic()
    e2e.write("edit.yaml", [ingress("edit", [("edit.test", "/", "beta")])])
    wait_until(switched, timeout=5.0, interval=0.02, what="edit.test -> beta")
    elapsed = time.monotonic() - started
    print(f"the edit reached Envoy in {elapsed * 1000:.0f} ms")
    assert elapsed < 1.0, f"the edit took {elapsed:.3f}s to reach Envoy"
    # Make-before-break: every request during the switch was answered by one backend or the other.
    assert {status for status, _ in seen} == {200}, seen


def test_endpointslice_edit_moves_traffic_without_a_dag_rebuild(e2e: Stack) -> None:
    e2e.write("mover.yaml", [service("mover"), ingress("mover", [("mover.test", "/", "mover")])])
    e2e.write("mover-endpoints.yaml", [endpoint_slice("mover", e2e.alpha.port)])
    e2e.wait_backend("mover.test", "alpha")
    rebuilds = e2e.cpx.metric("contour_dagrebuild_total")
    assert rebuilds > 0

    e2e.write("mover-endpoints.yaml", [endpoint_slice("mover", e2e.beta.port)])
    e2e.wait_backend("mover.test", "beta", timeout=3.0)
    time.sleep(0.3)  # past the rebuild hold-off: a rebuild, had one been triggered, would show now
    assert e2e.cpx.metric("contour_dagrebuild_total") == rebuilds
    assert e2e.get("mover.test") == (200, "beta")


def test_cpx_restart_keeps_envoy_serving_and_unconfigured(e2e: Stack) -> None:
    e2e.settle()
    envoy = e2e.envoy
    before = envoy.stats()
    assert before["control_plane.connected_state"] == 1
    assert rejected(envoy) == 0

    results: list[tuple[int, str | None]] = []
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            results.append(e2e.get("base.test"))
            time.sleep(0.01)

    thread = threading.Thread(target=hammer, name="hammer", daemon=True)
    thread.start()
    try:
        old = e2e.cpx
        assert old.stop() == 0  # SIGTERM; raises unless cpx exits within 5 s
        wait_until(
            lambda: envoy.stats()["control_plane.connected_state"] == 0, what="Envoy noticing cpx left"
        )
        during = len(results)
        e2e.cpx = old.clone().start()  # the same xDS, health and listener ports
        envoy.wait_stat("control_plane.connected_state", lambda v: v == 1, timeout=15.0)
        # Let the reconnected streams exchange their first requests and (non-)responses.
        wait_until(
            lambda: e2e.cpx.metric("cpx_xds_requests_total") >= 4, what="Envoy's requests to the new cpx"
        )
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join(5)

    assert during > 0 and len(results) > during, "requests ran while cpx was down and after it came back"
    assert set(results) == {(200, "alpha")}, [r for r in results if r != (200, "alpha")][:5]
    after = envoy.stats()
    changed = {
        name: (before.get(name), after.get(name))
        for name in RECONFIGURATION_STATS
        if before.get(name) != after.get(name)
    }
    assert not changed, f"Envoy was reconfigured by the restarted cpx: {changed}"
    assert after["control_plane.connected_state"] == 1
    assert rejected(envoy) == 0
    assert e2e.get("base.test") == (200, "alpha")


def test_a_secret_envoy_would_refuse_is_never_sent_and_a_fix_is(e2e: Stack) -> None:
    cpx, envoy = e2e.cpx, e2e.envoy
    nacks_before = cpx.metric("cpx_xds_nacks_total")
    rejected_before = rejected(envoy)
    secrets_sent_before = cpx.metric("cpx_xds_responses_total", type_url=SECRET_TYPE)
    log_mark = len(cpx.log_text())

    # A valid certificate and matching key, but RSA < 2048: Envoy would NACK it (it used to, and
    # then held no secret for the host); cpx leaves the Secret out before publishing.
    site = ingress("weak", [("weak.test", "/", "alpha")], tls={"weak": ["weak.test"]})
    e2e.write("weak.yaml", [weak_tls_secret("default", "weak", "weak.test"), site])
    line = cpx.wait_log("Secret default/weak: left out", start=log_mark)
    assert "2048" in line, line
    time.sleep(0.3)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        assert e2e.get("base.test") == (200, "alpha")
        time.sleep(0.1)
    assert cpx.metric("cpx_xds_nacks_total") == nacks_before
    assert rejected(envoy) == rejected_before
    assert cpx.metric("cpx_xds_responses_total", type_url=SECRET_TYPE) == secrets_sent_before
    assert envoy.stats()["control_plane.connected_state"] == 1

    # The fix is delivered: a proper certificate makes HTTPS work.
    good, ca_pem = make_tls_secret("default", "weak", ["weak.test"])
    e2e.write("weak.yaml", [good, site])
    url = f"https://127.0.0.1:{e2e.cpx.https_port}/"

    def https_ok() -> bool:
        with contextlib.suppress(OSError):
            return https_get(url, "weak.test", ca_pem, timeout=2.0).headers.get("x-backend") == "alpha"
        return False

    wait_until(https_ok, what="HTTPS with the replaced certificate")
    assert cpx.metric("cpx_xds_nacks_total") == nacks_before
    assert rejected(envoy) == rejected_before


def test_malformed_yaml_is_reported_and_keeps_the_last_good_routes(e2e: Stack) -> None:
    path = e2e.write("yaml.yaml", [ingress("yaml", [("yaml.test", "/", "alpha")])])
    e2e.wait_backend("yaml.test", "alpha")
    log_mark = len(e2e.cpx.log_text())

    e2e.write("yaml.yaml", "apiVersion: networking.k8s.io/v1\nkind: [Ingress\nmetadata: {name: yaml\n")
    line = e2e.cpx.wait_log("malformed YAML", start=log_mark)
    assert str(path) in line, line
    for _ in range(10):
        assert e2e.get("yaml.test") == (200, "alpha")
        time.sleep(0.02)

    e2e.write("yaml.yaml", [ingress("yaml", [("yaml.test", "/", "beta")])])
    e2e.wait_backend("yaml.test", "beta")
    e2e.cpx.wait_log("loads cleanly again", start=log_mark)


def test_deleting_a_manifest_removes_its_routes(e2e: Stack) -> None:
    path = e2e.write("delete.yaml", [ingress("delete", [("delete.test", "/", "alpha")])])
    e2e.wait_backend("delete.test", "alpha")
    path.unlink()
    e2e.wait_backend("delete.test", None)
    assert e2e.get("base.test") == (200, "alpha")


@pytest.fixture
def lone_backend() -> Iterator[EchoServer]:
    with EchoServer("lone") as server:
        yield server


def _lone_manifests(directory: Path, port: int) -> None:
    write_manifest(directory, "lone.yaml", [*backend("lone", port), ingress("lone", [(None, "/", "lone")])])


def test_cpx_exits_cleanly_on_sigterm(
    request: pytest.FixtureRequest, tmp_path: Path, lone_backend: EchoServer
) -> None:
    _require_envoy()
    _lone_manifests(tmp_path / "manifests", lone_backend.port)
    with (
        CpxProcess(tmp_path / "manifests", tmp_path) as cpx,
        EnvoyProcess.with_xds(cpx.xds_port, workdir=tmp_path / "envoy") as envoy,
    ):
        try:
            envoy.wait_ready()
            assert get(cpx.http_port, "any.test") == (200, "lone")
            assert cpx.metric("cpx_xds_connections") >= 1  # a live stream for shutdown to end

            started = time.monotonic()
            assert cpx.stop(timeout=5.0) == 0
            assert time.monotonic() - started < 5.0
            assert "shutting down" in cpx.log_text()
            envoy.wait_stat("control_plane.connected_state", lambda v: v == 0, timeout=3.0)
            assert get(cpx.http_port, "any.test") == (200, "lone")  # Envoy keeps its last config
        finally:
            if _failed(request):
                _dump_logs(cpx, envoy)


def _without_client_certificate(config: Any) -> Any:
    """The bootstrap with the xDS client certificate removed (the CA check of cpx stays)."""
    if isinstance(config, dict):
        return {k: _without_client_certificate(v) for k, v in config.items() if k != "tls_certificates"}
    if isinstance(config, list):
        return [_without_client_certificate(v) for v in config]
    return config


def test_xds_over_mtls(request: pytest.FixtureRequest, tmp_path: Path, lone_backend: EchoServer) -> None:
    _require_envoy()
    certs = tmp_path / "certs"
    certgen.generate(certs)
    _lone_manifests(tmp_path / "manifests", lone_backend.port)
    client = {
        "xds_cafile": str(certs / certgen.CA_CERT_FILE),
        "xds_cert_file": str(certs / certgen.ENVOY_CERT_FILE),
        "xds_key_file": str(certs / certgen.ENVOY_KEY_FILE),
    }
    cpx = CpxProcess(
        tmp_path / "manifests",
        tmp_path,
        xds_cafile=certs / certgen.CA_CERT_FILE,
        xds_cert_file=certs / certgen.CPX_CERT_FILE,
        xds_key_file=certs / certgen.CPX_KEY_FILE,
    )
    trusted = EnvoyProcess.with_xds(cpx.xds_port, workdir=tmp_path / "trusted", **client)
    anonymous = EnvoyProcess.with_xds(cpx.xds_port, workdir=tmp_path / "anonymous", **client)
    anonymous.config = _without_client_certificate(copy.deepcopy(anonymous.config))
    assert "tls_certificates" not in str(anonymous.config) and "tls_certificates" in str(trusted.config)
    with cpx, trusted, anonymous:
        try:
            assert "(mTLS)" in cpx.log_text()
            trusted.wait_ready()
            assert get(cpx.http_port, "any.test") == (200, "lone")
            handshakes = trusted.stats(r"contour.*\.ssl\.handshake$")
            assert handshakes and all(v >= 1 for v in handshakes.values()), handshakes

            # The Envoy without a client certificate keeps trying and never gets anything.
            wait_until(
                lambda: sum(anonymous.stats(r"contour.*\.upstream_cx_total$").values()) >= 2,
                what="the anonymous Envoy's retries",
            )
            time.sleep(0.3)
            stats = anonymous.stats()
            assert stats["control_plane.connected_state"] == 0
            assert stats.get("listener_manager.lds.update_success", 0) == 0
            assert stats.get("cluster_manager.cds.update_success", 0) == 0
            assert cpx.metric("cpx_xds_connections") == 1  # only the trusted Envoy's stream
        finally:
            if _failed(request):
                _dump_logs(cpx, trusted, anonymous)
