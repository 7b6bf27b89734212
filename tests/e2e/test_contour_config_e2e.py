"""``cpx serve -c contour.yaml`` through a real Envoy: Contour's configuration file sets the
compression, a timeout, the Server header transformation and the JSON access log; an unsupported
key only warns."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpx.ops.echoserver import EchoServer
from cpx.ops.envoyproc import EnvoyProcess
from cpx.testing import Response, envoy_binary, http_get
from cpx.testing.cpxproc import (
    CpxProcess,
    CpxProcessError,
    backend,
    cpx_with_envoy,
    eventually,
    write_manifest,
)
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

CONTOUR_YAML = """\
compression:
  algorithm: disabled
serverHeaderTransformation: pass_through
timeouts:
  stream-idle-timeout: 1s
accesslog-format: json
json-fields: ["@timestamp", method, path, upstream_host, response_code, "backend=%RESP(X-BACKEND)%"]
tracing: {serviceName: contour}
"""


@pytest.fixture(scope="module")
def served_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CpxProcess, EnvoyProcess]]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("contour-config")
    config = workdir / "contour.yaml"
    config.write_text(CONTOUR_YAML)
    manifests = workdir / "manifests"
    with EchoServer("web") as echo:
        write_manifest(
            manifests, "all.yaml", [*backend("web", echo.port), ingress("web", [("web.test", "/", "web")])]
        )
        args = ["-c", str(config)]
        with cpx_with_envoy(manifests, workdir, plugins=["ingress"], extra_args=args) as (cpx, envoy):
            envoy.wait_ready()
            yield cpx, envoy


@pytest.fixture(scope="module")
def served(served_pair: tuple[CpxProcess, EnvoyProcess]) -> CpxProcess:
    return served_pair[0]


def _get(cpx: CpxProcess, path: str) -> Response:
    def check() -> Response:
        response = http_get(
            f"http://127.0.0.1:{cpx.http_port}{path}",
            host_header="web.test",
            headers={"Accept-Encoding": "gzip"},
        )
        assert response.status == 200, response
        return response

    return eventually(check, timeout=15)


def test_compression_disabled_by_the_file(served: CpxProcess) -> None:
    response = _get(served, "/")
    assert response.headers.get("x-backend") == "web"
    assert len(response.body) > 100 and "content-encoding" not in response.headers


def test_the_backends_server_header_passes_through(served: CpxProcess) -> None:
    # Envoy's default (Contour's "overwrite") would answer "server: envoy".
    assert _get(served, "/").headers["server"].startswith("cpx-echo")


def test_the_stream_idle_timeout_of_the_file_cuts_a_silent_backend(served: CpxProcess) -> None:
    assert _get(served, "/slow?ms=200").status == 200
    started = time.monotonic()
    url = f"http://127.0.0.1:{served.http_port}/slow?ms=3000"
    response = http_get(url, host_header="web.test")
    assert (response.status, response.body) == (504, b"stream timeout")
    assert time.monotonic() - started < 2.5


def test_a_request_logs_a_json_line_with_the_files_fields(
    served_pair: tuple[CpxProcess, EnvoyProcess],
) -> None:
    cpx, envoy = served_pair
    _get(cpx, "/logged?x=1")

    def logged() -> dict[str, object]:
        lines = [line for line in envoy.log_text().splitlines() if '"/logged?x=1"' in line]
        assert lines, envoy.log_text()[-2000:]
        found: dict[str, object] = json.loads(lines[-1])
        return found

    entry = eventually(logged, timeout=15)
    assert set(entry) == {"@timestamp", "method", "path", "upstream_host", "response_code", "backend"}
    assert (entry["method"], entry["path"], entry["response_code"], entry["backend"]) == (
        "GET",
        "/logged?x=1",
        200,
        "web",
    )
    assert str(entry["upstream_host"]).startswith("127.0.0.1:")


def test_an_unsupported_key_is_logged_by_path(served: CpxProcess) -> None:
    assert "tracing.serviceName: not supported, ignored" in served.log_text()


def test_a_bad_value_refuses_the_start_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "contour.yaml"
    config.write_text("timeouts:\n  stream-idle-timeout: soon\n")
    cpx = CpxProcess(tmp_path / "manifests", tmp_path, plugins=["ingress"], extra_args=["-c", str(config)])
    with pytest.raises(CpxProcessError, match="exited"):
        cpx.start()
    assert "timeouts.stream-idle-timeout: 'soon' is not a duration" in cpx.log_text()
