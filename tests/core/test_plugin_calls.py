"""Hook calls go through pluggy (wrappers, tracing); cpx_configure comes first and may decline."""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cpx import PluginDeclined, ProcessorSpec, SourceView, hookimpl
from cpx.builtin import plugin as core
from cpx.cli import cli
from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.errors import ConfigError, PluginError
from cpx.offline import translate
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler


class Recorder:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def run(self, dag: DAG, source: SourceView) -> None:
        self.events.append("run")


def plugin(name: str, events: list[str], *, configure: Any = None) -> types.ModuleType:
    """A plugin with one processor that logs when it is registered, built and run."""
    module = types.ModuleType(name)

    def factory(config: Config) -> Recorder:
        events.append("factory")
        return Recorder(events)

    @hookimpl
    def cpx_dag_processors() -> Iterator[ProcessorSpec]:
        events.append("cpx_dag_processors")
        yield ProcessorSpec(name=name, factory=factory)

    @hookimpl
    def cpx_configure(config: Config) -> None:
        events.append("cpx_configure")
        if configure is not None:
            configure()

    module.cpx_dag_processors = cpx_dag_processors  # type: ignore[attr-defined]
    module.cpx_configure = cpx_configure  # type: ignore[attr-defined]
    return module


def test_a_wrapper_sees_every_plugins_registration_call() -> None:
    seen: list[list[str]] = []
    spy = types.ModuleType("spy")

    @hookimpl(wrapper=True)
    def cpx_dag_processors() -> Any:
        results = [list(records) for records in (yield)]
        seen.append([spec.name for records in results for spec in records])
        return results

    spy.cpx_dag_processors = cpx_dag_processors  # type: ignore[attr-defined]
    host = PluginHost.from_modules([("core", core), ("mine", plugin("mine", [])), ("spy", spy)])
    assert [spec.name for spec in host.processors()] == ["listeners", "mine"]
    # One real hook call per implementing plugin, each inside the wrapper.
    assert sorted(seen) == [["listeners"], ["mine"]]


def test_tracing_logs_every_hook_call(caplog: pytest.LogCaptureFixture) -> None:
    host = PluginHost.from_modules([("core", core), ("mine", plugin("mine", []))])
    assert "trace_plugins" in [option.name for option in host.options()]
    with caplog.at_level(logging.INFO, logger="cpx.plugins.trace"):
        host.configure(Config(options={"trace_plugins": True}))
        host.processors()
    traced = "\n".join(r.getMessage() for r in caplog.records if r.name == "cpx.plugins.trace")
    assert "cpx_configure" in traced and "cpx_dag_processors" in traced


def test_no_tracing_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    host = PluginHost.from_modules([("core", core), ("mine", plugin("mine", []))])
    with caplog.at_level(logging.DEBUG, logger="cpx.plugins.trace"):
        host.configure(Config())
        host.processors()
    assert not [r for r in caplog.records if r.name == "cpx.plugins.trace"]


def test_configuration_comes_before_anything_is_built() -> None:
    events: list[str] = []
    handler = SnapshotHandler.create(
        PluginHost.from_modules([("core", core), ("p", plugin("p", events))]), Config()
    )
    handler.rebuild()
    assert events == ["cpx_configure", "cpx_dag_processors", "factory", "run"]


def test_a_declining_plugins_processor_is_never_built_nor_run(caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []

    def decline() -> None:
        raise PluginDeclined("nothing to do without --shy-mode")

    host = PluginHost.from_modules([("core", core), ("shy", plugin("shy", events, configure=decline))])
    with caplog.at_level(logging.WARNING, logger="cpx.plugins"):
        handler = SnapshotHandler.create(host, Config())
        handler.rebuild()
        handler.rebuild()
    assert events == ["cpx_configure"]
    assert host.declined == {"shy": "nothing to do without --shy-mode"}
    assert host.names == ("core",)
    assert [spec.name for spec in host.processors()] == ["listeners"]
    declined = [r.getMessage() for r in caplog.records if "declined" in r.getMessage()]
    assert declined == ["plugin shy declined: nothing to do without --shy-mode"]


def test_translate_output_names_a_declined_plugin(tmp_path: Path) -> None:
    def decline() -> None:
        raise PluginDeclined("not today")

    host = PluginHost.from_modules([("core", core), ("shy", plugin("shy", [], configure=decline))])
    (tmp_path / "empty.yaml").write_text("")
    doc = translate([tmp_path / "empty.yaml"], host, Config())
    assert doc["plugins"] == {"declined": {"shy": "not today"}}


def test_configure_errors_name_the_plugin_config_errors_pass_through() -> None:
    def crash() -> None:
        raise RuntimeError("kaboom")

    def refuse() -> None:
        raise ConfigError("--bad-flag: not a number")

    host = PluginHost.from_modules([("core", core), ("bad", plugin("bad", [], configure=crash))])
    with pytest.raises(PluginError, match="plugin 'bad' failed in cpx_configure: kaboom"):
        host.configure(Config())
    host = PluginHost.from_modules([("core", core), ("picky", plugin("picky", [], configure=refuse))])
    with pytest.raises(ConfigError, match=r"^--bad-flag: not a number$"):
        host.configure(Config())


def test_the_core_cannot_decline() -> None:
    def decline() -> None:
        raise PluginDeclined("no")

    host = PluginHost.from_modules([("core", plugin("core", [], configure=decline))])
    with pytest.raises(PluginError, match="core plugin cannot decline: no"):
        host.configure(Config())


@pytest.mark.usefixtures("keep_logging")
def test_cpx_translate_trace_plugins_logs_each_plugins_hook_calls(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    args = ["translate", "--plugins", "ingress", "--trace-plugins", str(tmp_path)]
    result = CliRunner().invoke(cli, args)  # the command logs to its stderr
    assert result.exit_code == 0, result.output
    assert "cpx.plugins.trace: cpx_dag_processors of plugin ingress:" in result.stderr
    assert "cpx_dag_processors [hook]" in result.stderr
    quiet = CliRunner().invoke(cli, [*args[:-2], str(tmp_path)])
    assert "cpx.plugins.trace" not in quiet.stderr
