"""Fixtures shared by the whole suite, built on :mod:`cpx.testing`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cpx.testing import EchoServer, EnvoyProcess, TCPEchoServer, envoy_binary


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Remember each phase's report so fixtures can tell, at teardown, whether the test failed.
    report = yield
    setattr(item, f"cpx_report_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "cpx_report_call", None)
    return report is None or report.failed


@pytest.fixture
def keep_logging() -> Iterator[None]:
    """Restore the root logger after a test that runs the ``cpx`` command line in process (its
    group configures logging for the CliRunner's soon closed stderr)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def envoy_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., EnvoyProcess]]:
    """``envoy_factory(config, **kw)`` starts a real Envoy; all are stopped after the test.

    On failure the tail of each Envoy's log is printed (the full log stays in ``tmp_path``).
    """
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    started: list[EnvoyProcess] = []

    def start(config: Mapping[str, Any], **kwargs: Any) -> EnvoyProcess:
        kwargs.setdefault("workdir", tmp_path / f"envoy{len(started)}")
        envoy = EnvoyProcess(config, **kwargs)
        started.append(envoy)
        return envoy.start()

    yield start
    for envoy in started:
        envoy.stop()
        if _failed(request):
            print(f"--- {envoy.log_path} (tail) ---\n{envoy.log_text()[-4000:]}")


@pytest.fixture
def echo_server() -> Iterator[EchoServer]:
    with EchoServer("echo") as server:
        yield server


@pytest.fixture
def echo_factory() -> Iterator[Callable[..., EchoServer]]:
    """``echo_factory(name, **kw)`` starts more echo backends; all are stopped after the test."""
    servers: list[EchoServer] = []

    def start(name: str = "echo", **kwargs: Any) -> EchoServer:
        server = EchoServer(name, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def tcp_echo_server() -> Iterator[TCPEchoServer]:
    with TCPEchoServer() as server:
        yield server
