"""``cpx translate`` YAML with the last resources rendered by a forked child: the same bytes."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cpx.cli import cli, main, translate_fork
from cpx.testing.cpxproc import backend, write_manifest
from cpx.xds.resource import Snapshot
from cpx_ingress.testing import simple_ingress

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"

pytestmark = [
    pytest.mark.usefixtures("keep_logging"),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork"),
]


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever threads other tests left running: this test's translate forks."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    """Eight Ingresses of a host each: eight RouteConfigurations, the last six for the child."""
    docs = [*backend("web", 8081)]
    docs += [simple_ingress(f"web-{i}", [(f"web-{i}.example.com", "/", "web")]) for i in range(8)]
    write_manifest(tmp_path, "hosts.yaml", docs)
    return tmp_path


def translate(monkeypatch: pytest.MonkeyPatch, folder: Path, *, fork: bool) -> str:
    monkeypatch.setattr(translate_fork, "MIN_RESOURCES", 1 if fork else 1 << 30)
    result = CliRunner().invoke(cli, ["translate", "--plugins", "ingress", str(folder)])
    assert result.exit_code == 0, result.output
    return result.stdout


def count_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[Any, ...]]:
    """The arguments of the calls of ``Snapshot.<name>`` in this process (not the child's)."""
    calls: list[tuple[Any, ...]] = []
    method = getattr(Snapshot, name)

    def counted(self: Snapshot, *args: Any, **kwargs: Any) -> Any:
        calls.append((*args, *kwargs.values()))
        return method(self, *args, **kwargs)

    monkeypatch.setattr(Snapshot, name, counted)
    return calls


def test_the_child_renders_the_last_routes_and_the_text_is_the_same(
    monkeypatch: pytest.MonkeyPatch, hosts: Path
) -> None:
    alone = translate(monkeypatch, hosts, fork=False)
    assert alone.count("- name: ingress_http/web-") == 16  # their scopes and RouteConfigurations
    rendered_here = count_calls(monkeypatch, "last_json")
    left_out = count_calls(monkeypatch, "to_json")
    assert translate(monkeypatch, hosts, fork=True) == alone
    assert left_out == [(2,)]
    assert rendered_here == []


@pytest.mark.parametrize("failure", ["raises", "needs libyaml"])
def test_what_the_child_does_not_deliver_is_rendered_here(
    monkeypatch: pytest.MonkeyPatch, hosts: Path, failure: str
) -> None:
    alone = translate(monkeypatch, hosts, fork=False)

    def items_text(items: list[Any], indent: int) -> str | None:
        if failure == "raises":
            raise RuntimeError("the child fails")
        return None

    monkeypatch.setattr(translate_fork, "items_text", items_text)
    rendered_here = count_calls(monkeypatch, "last_json")
    assert translate(monkeypatch, hosts, fork=True) == alone
    assert rendered_here == [(2,)]


def test_the_process_entry_keeps_the_output_and_the_exit_code(tmp_path: Path) -> None:
    """``python -m cpx`` ends the process itself after translate (no teardown): nothing is lost."""
    done = subprocess.run(
        [sys.executable, "-m", "cpx", "translate", "--plugins", "ingress", str(QUICKSTART)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    in_process = CliRunner().invoke(cli, ["translate", "--plugins", "ingress", str(QUICKSTART)])
    assert done.stdout == in_process.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "cpx", "translate", "--plugins", "ingress", str(tmp_path / "none.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode != 0
    assert "none.yaml" in missing.stderr


def test_a_failure_after_the_fork_ends_the_child(monkeypatch: pytest.MonkeyPatch, hosts: Path) -> None:
    forked: list[int] = []
    fork = os.fork

    def recorded() -> int:
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    def fails(*args: Any) -> Any:
        raise RuntimeError("status fails")

    monkeypatch.setattr(os, "fork", recorded)
    monkeypatch.setattr("cpx.offline.translated_objects", fails)
    monkeypatch.setattr(translate_fork, "MIN_RESOURCES", 1)
    result = CliRunner().invoke(cli, ["translate", "--plugins", "ingress", str(hosts)])
    assert isinstance(result.exception, RuntimeError)
    assert len(forked) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forked[0], os.WNOHANG)  # already reaped


def test_stdout_redirected_to_text_in_process(monkeypatch: pytest.MonkeyPatch, hosts: Path) -> None:
    """The child's UTF-8 is written as text where stdout takes nothing else (no binary buffer)."""
    alone = translate(monkeypatch, hosts, fork=False)
    monkeypatch.setattr(translate_fork, "MIN_RESOURCES", 1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        main(["translate", "--plugins", "ingress", str(hosts)])
    assert stop.value.code == 0
    assert out.getvalue() == alone
