"""Processors built when their inputs appear (ProcessorSpec.inputs) and functions imported at their
first call (cpx.Deferred): a plugin whose kinds are absent costs no import."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from cpx import Deferred, GroupVersionKind, ProcessorSpec, SourceView, hookimpl
from cpx.builtin import plugin as core
from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler

WIDGET = GroupVersionKind(group="example.com", version="v1", kind="Widget", plural="widgets")


class Recorder:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def run(self, dag: DAG, source: SourceView) -> None:
        self.events.append(f"run {source.count(WIDGET)}")


def widgets_plugin(events: list[str]) -> types.ModuleType:
    module = types.ModuleType("widgets")

    def factory(config: Config) -> Recorder:
        events.append("factory")
        return Recorder(events)

    @hookimpl
    def cpx_watches() -> Iterator[Any]:
        from cpx import WatchSpec

        yield WatchSpec(gvk=WIDGET)

    @hookimpl
    def cpx_dag_processors(config: Config) -> Iterator[ProcessorSpec]:
        yield ProcessorSpec(name="widgets", factory=factory, inputs=(WIDGET,))

    module.cpx_watches = cpx_watches  # type: ignore[attr-defined]
    module.cpx_dag_processors = cpx_dag_processors  # type: ignore[attr-defined]
    return module


def widget(name: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "a"}}


def test_a_processor_is_built_and_run_from_the_first_build_with_an_input() -> None:
    events: list[str] = []
    host = PluginHost.from_modules([("core", core), ("widgets", widgets_plugin(events))])
    handler = SnapshotHandler.create(host, Config())
    handler.rebuild()
    assert events == []  # no Widget: neither built nor run
    handler.upsert(widget("w"))
    handler.rebuild()
    handler.delete(widget("w"))
    handler.rebuild()  # built once: it runs every build from then on, as without inputs
    assert events == ["factory", "run 1", "run 0"]


def test_deferred_imports_at_the_first_call() -> None:
    dumps = Deferred("json:dumps")
    assert repr(dumps) == "Deferred('json:dumps')"
    assert dumps([1]) == "[1]"
    assert dumps.resolve() is json.dumps
    method = Deferred("collections:OrderedDict.fromkeys")  # a dotted attribute: a class's method
    assert list(method("ab")) == ["a", "b"]
    with pytest.raises(ValueError, match="module:attribute"):
        Deferred("json.dumps")
    with pytest.raises(ModuleNotFoundError):
        Deferred("no_such_module_here:f")()


def test_translating_ingresses_imports_no_httpproxy_model_or_processor(tmp_path: Any) -> None:
    manifest = tmp_path / "ingress.yaml"
    manifest.write_text(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: default}\n"
        "spec:\n  defaultBackend: {service: {name: web, port: {number: 80}}}\n"
    )
    code = (
        "import sys\nfrom cpx.cli import main\n"
        "try:\n    main(['translate', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
        "heavy = ('cpx_httpproxy.model', 'cpx_httpproxy.processor', 'asyncio')\n"
        "print('HEAVY', [m for m in heavy if m in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(manifest)], capture_output=True, text=True, check=True
    )
    assert "HEAVY []" in done.stderr
    assert "kind: Ingress" in done.stdout
