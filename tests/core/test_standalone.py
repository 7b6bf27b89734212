from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpx.config import Config
from cpx.objects import KubeObject
from cpx.pipeline import Pipeline
from cpx.plugins import PluginHost
from cpx.admission import admit
from cpx.standalone import StandaloneSource


def _service(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "resourceVersion": "42"},
        "spec": {"ports": [{"port": port}]},
    }


def test_an_edit_that_keeps_the_resource_version_still_applies() -> None:
    """Manifests copied from `kubectl get -o yaml` carry a resourceVersion that never changes."""
    pipeline = Pipeline.create(PluginHost.load([]), Config())
    first = admit(pipeline, Path("s.yaml"), [_service(80)])
    assert first.unknown == first.refused == []
    assert first.accepted[0]["metadata"] == {"name": "s", "namespace": "default"}
    pipeline.upsert(first.accepted[0])
    pipeline.source.referenced_services.add(("default", "s"))  # as if a route used it
    edited = admit(pipeline, Path("s.yaml"), [_service(81)])
    assert pipeline.upsert(edited.accepted[0]) is True


def test_unknown_kinds_are_reported_with_file_and_document() -> None:
    pipeline = Pipeline.create(PluginHost.load([]), Config())
    odd = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    admission = admit(pipeline, Path("g.yaml"), [_service(80), odd])
    assert len(admission.accepted) == 1
    assert [str(e) for e in admission.unknown] == [
        "g.yaml (document 2): Gadget g: unknown kind example.com/v1/Gadget: no enabled plugin handles it "
        "(known kinds: EndpointSlice.discovery.k8s.io, Namespace, Secret, Service)"
    ]


SERVICE_YAML = "apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {ports: [{port: 80}]}\n"


class _Recorder:
    """Stands in for the event handler: the names of the Services currently served."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def upsert(self, obj: KubeObject, source: str = "") -> None:
        self.names.add(obj["metadata"]["name"])

    def delete(self, obj: KubeObject, source: str = "") -> None:
        self.names.discard(obj["metadata"]["name"])

    def synced(self, source: str) -> None:
        pass


async def _watching(paths: list[Path]) -> tuple[_Recorder, asyncio.Task[None]]:
    recorder = _Recorder()
    handler: Any = recorder
    source = StandaloneSource(paths, Pipeline.create(PluginHost.load([]), Config()))
    task = asyncio.create_task(source.run(handler))
    await asyncio.sleep(0.3)  # the initial load, and the watch started
    return recorder, task


async def _eventually(check: Callable[[], bool]) -> None:
    for _ in range(100):
        if check():
            return
        await asyncio.sleep(0.05)
    assert check()


async def test_a_relative_manifests_folder_applies_deletes(tmp_path: Path, monkeypatch: Any) -> None:
    """`--manifests ./m/`: the watch reports absolute paths; deletes must still find the file."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.yaml").write_text(SERVICE_YAML % "a" + "---\n" + SERVICE_YAML % "b")
    monkeypatch.chdir(tmp_path)
    recorder, task = await _watching([Path("m")])
    try:
        assert recorder.names == {"a", "b"}
        (tmp_path / "m" / "a.yaml").write_text(SERVICE_YAML % "a")
        await _eventually(lambda: recorder.names == {"a"})
        (tmp_path / "m" / "a.yaml").unlink()
        await _eventually(lambda: recorder.names == set())
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_folders_moved_in_and_out_are_loaded_and_removed(tmp_path: Path) -> None:
    """A folder renamed or moved is reported as one event for the folder, none for its files."""
    root = tmp_path / "m"
    (root / "team").mkdir(parents=True)
    (root / "team" / "a.yaml").write_text(SERVICE_YAML % "a")
    recorder, task = await _watching([root])
    try:
        assert recorder.names == {"a"}
        (root / "team").rename(tmp_path / "elsewhere")
        await _eventually(lambda: recorder.names == set())
        (tmp_path / "elsewhere").rename(root / "back")
        await _eventually(lambda: recorder.names == {"a"})
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_unknown_kind_errors_name_the_document_in_the_file(tmp_path: Path) -> None:
    from cpx.manifests import parse_file

    f = tmp_path / "g.yaml"
    f.write_text("# header\n---\n---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
    pipeline = Pipeline.create(PluginHost.load([]), Config())
    positions: list[int] = []
    objects, _ = parse_file(f, positions)
    errors = admit(pipeline, f, objects, positions).unknown
    assert [e.index for e in errors] == [1] and "(document 2)" in str(errors[0])  # not object 1
