"""A third-party HTTP filter end to end: ``cpx serve`` loads a test plugin through its entry point,
the plugin contributes Envoy's ``header_mutation`` filter, its POLICIES-phase processor attaches a
header to the routes of ``mutate.*`` hosts, and a real Envoy adds that header to their responses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cpx.testing import EchoServer, Response, envoy_binary, http_get, https_get, make_tls_secret
from cpx.testing.cpxproc import backend, cpx_with_envoy, write_manifest
from cpx_ingress.testing import simple_ingress as ingress

pytestmark = pytest.mark.e2e

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "plugins"
PLUGIN = "test-header-mutation"


def _installed_plugin(site: Path) -> str:
    """Make ``cpx_test_header_mutation`` an installed distribution: a dist-info with its entry
    point next to the module's directory on the path (what pip would leave behind)."""
    info = site / "cpx_test_header_mutation-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cpx-test-header-mutation\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[cpx.plugins]\n{PLUGIN} = cpx_test_header_mutation\n")
    return os.pathsep.join(p for p in (str(site), str(PLUGIN_DIR), os.environ.get("PYTHONPATH")) if p)


def _eventually(
    get: Callable[[], Response], check: Callable[[Response], bool], timeout: float = 15
) -> Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            response = get()
            if check(response) or time.monotonic() > deadline:
                return response
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def test_contributed_filter_adds_the_header_its_route_attachment_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    monkeypatch.setenv("PYTHONPATH", _installed_plugin(tmp_path / "site"))
    secret, ca_pem = make_tls_secret("default", "mutate-tls", ["mutate.secure.test"])
    rules = [(host, "/", "web") for host in ("mutate.example.com", "plain.example.com", "mutate.secure.test")]
    manifests = tmp_path / "manifests"
    with EchoServer("web") as echo:
        objects = [
            *backend("web", echo.port),
            secret,
            ingress("web", rules, tls={"mutate-tls": ["mutate.secure.test"]}),
        ]
        write_manifest(manifests, "all.yaml", objects)
        with cpx_with_envoy(manifests, tmp_path, plugins=["ingress", PLUGIN]) as (cpx, envoy):
            envoy.wait_ready()

            def http(host: str) -> Callable[[], Response]:
                return lambda: http_get(f"http://127.0.0.1:{cpx.http_port}/", host_header=host)

            def served(response: Response) -> bool:
                return response.headers.get("x-backend") == "web"

            mutated = _eventually(http("mutate.example.com"), lambda r: "x-mutated" in r.headers)
            assert served(mutated) and mutated.headers["x-mutated"] == "mutate.example.com", cpx.log_text()[
                -3000:
            ]
            plain = _eventually(http("plain.example.com"), served)
            assert served(plain) and "x-mutated" not in plain.headers

            def https() -> Response:
                url = f"https://127.0.0.1:{cpx.https_port}/"
                return https_get(
                    url, sni="mutate.secure.test", ca_pem=ca_pem, host_header="mutate.secure.test"
                )

            secure = _eventually(https, lambda r: "x-mutated" in r.headers)
            assert served(secure) and secure.headers["x-mutated"] == "mutate.secure.test"
            # The builtin 421 check still runs first on the SNI chain.
            url = f"https://127.0.0.1:{cpx.https_port}/"
            assert (
                https_get(url, sni="mutate.secure.test", ca_pem=ca_pem, host_header="other.test").status
                == 421
            )
            assert cpx.running
