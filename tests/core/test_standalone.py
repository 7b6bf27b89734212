from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpx.config import Config
from cpx.events import Event, Op
from cpx.objects import KubeObject, ObjectKey
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.sources.admission import admit
from cpx.sources.standalone import StandaloneSource


def _service(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "resourceVersion": "42"},
        "spec": {"ports": [{"port": port}]},
    }


def test_an_edit_that_keeps_the_resource_version_still_applies() -> None:
    """Manifests copied from `kubectl get -o yaml` carry a resourceVersion that never changes."""
    pipeline = SnapshotHandler.create(PluginHost.load([]), Config())
    first = admit(pipeline, Path("s.yaml"), [_service(80)])
    assert first.unknown == first.refused == []
    assert first.accepted[0]["metadata"] == {"name": "s", "namespace": "default"}
    pipeline.upsert(first.accepted[0])
    with pipeline.source.build_recording():  # as if a route used it
        pipeline.source.lookup_service("default", "s")
    edited = admit(pipeline, Path("s.yaml"), [_service(81)])
    assert pipeline.upsert(edited.accepted[0]) is True


def test_unknown_kinds_are_reported_with_file_and_document() -> None:
    pipeline = SnapshotHandler.create(PluginHost.load([]), Config())
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

    def upsert(self, obj: KubeObject, source: str = "", *, admitted: bool = False) -> None:
        self.names.add(obj["metadata"]["name"])

    def delete(self, obj: KubeObject, source: str = "") -> None:
        self.names.discard(obj["metadata"]["name"])

    def synced(self, source: str) -> None:
        pass


async def _watching(paths: list[Path]) -> tuple[_Recorder, asyncio.Task[None]]:
    recorder = _Recorder()
    handler: Any = recorder
    source = StandaloneSource(paths, SnapshotHandler.create(PluginHost.load([]), Config()))
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
    from cpx.sources.manifests import parse_file

    f = tmp_path / "g.yaml"
    f.write_text("# header\n---\n---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
    pipeline = SnapshotHandler.create(PluginHost.load([]), Config())
    positions: list[int] = []
    objects, _ = parse_file(f, positions)
    errors = admit(pipeline, f, objects, positions).unknown
    assert [e.index for e in errors] == [1] and "(document 2)" in str(errors[0])  # not object 1


class _Sink:
    """Stands in for the event handler: what is served, and whether a rebuild was asked for."""

    def __init__(self) -> None:
        self.served: dict[str, KubeObject] = {}
        self.resyncs = 0

    def upsert(self, obj: KubeObject, source: str = "", *, admitted: bool = False) -> None:
        self.served[obj["metadata"]["name"]] = obj

    def delete(self, obj: KubeObject, source: str = "") -> None:
        del self.served[obj["metadata"]["name"]]

    def submit(self, event: Event) -> None:
        assert event.op is Op.RESYNC
        self.resyncs += 1


def _loaded(tmp_path: Path) -> tuple[StandaloneSource, _Sink]:
    return StandaloneSource([tmp_path], SnapshotHandler.create(PluginHost.load([]), Config())), _Sink()


def _port(obj: KubeObject) -> int:
    port: int = obj["spec"]["ports"][0]["port"]
    return port


def _notes(source: StandaloneSource, name: str) -> list[str]:
    key = ObjectKey("", "Service", "default", name)
    return [f"{n.type}/{n.reason}: {n.message}" for n in source.pipeline.source_notes.get(key, ())]


SERVICE_PORT = "apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {ports: [{port: %d}]}\n"


def test_a_refused_edit_keeps_the_previous_version_and_says_why(tmp_path: Path, caplog: Any) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(SERVICE_PORT % ("web", 80))
    source, sink = _loaded(tmp_path)
    source.load_file(f, sink)
    f.write_text(SERVICE_PORT % ("web", 0))
    source.load_file(f, sink)
    assert _port(sink.served["web"]) == 80  # never withdrawn
    [note] = _notes(source, "web")
    assert note == (
        f"SchemaError/Invalid: refused (the previous version is kept): {f} (document 1): "
        "Service default/web: spec.ports[0].port: Invalid value: 0: must be between 1 and 65535"
    )
    assert sink.resyncs == 1  # so that the status is reported at once
    assert f"{f} (document 1): Service default/web: spec.ports[0].port" in caplog.text
    assert "(refused; the previous version is kept)" in caplog.text
    # Its status shows the served version's status and the refusal.
    status = source.pipeline.statuses()[ObjectKey("", "Service", "default", "web")]
    assert [n.reason for n in status.notes] == ["Invalid"]
    f.write_text(SERVICE_PORT % ("web", 81))
    source.load_file(f, sink)
    assert _port(sink.served["web"]) == 81 and _notes(source, "web") == [] and sink.resyncs == 2


def test_an_edit_to_a_bad_name_keeps_the_object_until_the_file_loads_cleanly(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(SERVICE_PORT % ("web", 80))
    source, sink = _loaded(tmp_path)
    source.load_file(f, sink)
    f.write_text(SERVICE_PORT % ("Web_1", 80))
    source.load_file(f, sink)
    assert set(sink.served) == {"web"}
    [note] = _notes(source, "Web_1")
    assert (
        "refused (not served)" in note and 'metadata.name: Invalid value: "Web_1": a DNS-1035 label' in note
    )
    assert _notes(source, "web") == [
        f"ManifestError/KeptWhileRefused: no longer in {f}, but kept: the file has refused documents and "
        "one of them may be this object edited; it goes once the file loads cleanly"
    ]
    f.write_text(SERVICE_PORT % ("web-1", 80))  # a rename, now valid: the old name goes
    source.load_file(f, sink)
    assert set(sink.served) == {"web-1"} and _notes(source, "Web_1") == _notes(source, "web") == []


def test_names_and_namespaces_follow_kubernetes_rules(tmp_path: Path) -> None:
    docs = [
        SERVICE_PORT % ("a.b", 80),  # a Service name is a DNS-1035 label: no dots
        "apiVersion: v1\nkind: Secret\nmetadata: {name: a.b}\n",  # most names are subdomains
        "apiVersion: v1\nkind: Secret\nmetadata: {name: x, namespace: Team_A}\n",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: %s}\n" % ("a" * 254),
    ]
    f = tmp_path / "names.yaml"
    f.write_text("---\n".join(docs))
    source, sink = _loaded(tmp_path)
    source.load_file(f, sink)
    assert list(sink.served) == ["a.b"]  # the Secret
    problems = source.problems[f]
    assert len(problems) == 3
    assert '(document 1): Service default/a.b: metadata.name: Invalid value: "a.b"' in problems[0]
    assert '(document 3): Secret Team_A/x: metadata.namespace: Invalid value: "Team_A"' in problems[1]
    assert "(document 4)" in problems[2] and "must be no more than 253 characters" in problems[2]


def test_an_object_in_two_files_is_a_conflict_on_it_with_a_stable_winner(tmp_path: Path, caplog: Any) -> None:
    caplog.set_level(logging.INFO, "cpx.sources.manifests")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    b.write_text(SERVICE_PORT % ("web", 82))
    a.write_text(SERVICE_PORT % ("web", 81))
    source, sink = _loaded(tmp_path)
    source.load_file(b, sink)
    source.load_file(a, sink)  # edited last, but a sorts first: a wins either way
    assert _port(sink.served["web"]) == 81
    [note] = _notes(source, "web")
    assert note == (
        f"ManifestError/DuplicateObject: Service default/web is defined in 2 files ({a}, {b}): "
        f"the one in {a} is served (the file that sorts first by path)"
    )
    assert caplog.text.count(note.split(": ", 1)[1]) == 1
    b.write_text(SERVICE_PORT % ("web", 83))
    source.load_file(b, sink)
    assert _port(sink.served["web"]) == 81
    assert caplog.text.count("is defined in 2 files") == 1  # logged when it appears, not at every load
    a.unlink()
    source.remove_file(a, sink)
    assert _port(sink.served["web"]) == 83 and _notes(source, "web") == []
    assert "Service default/web: no longer defined in more than one file" in caplog.text


async def test_a_file_caught_mid_write_is_read_again_not_reported(tmp_path: Path, caplog: Any) -> None:
    f = tmp_path / "s.yaml"
    source, sink = _loaded(tmp_path)
    with f.open("w") as fh:
        fh.write("apiVersion: v1\nkind: Service\nmetadata: {name: web")  # unclosed: malformed so far
        fh.flush()
        source.load_file(f, sink)
        await asyncio.sleep(0.1)
        fh.write("}\nspec: {ports: [{port: 80}]}\n")
    await _eventually(lambda: "web" in sink.served)
    assert "malformed" not in caplog.text and source.problems[f] == []


async def test_a_malformed_file_is_reported_once_it_settled(tmp_path: Path, caplog: Any) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("kind: [unclosed\n")
    source, sink = _loaded(tmp_path)
    source.load_file(f, sink)
    assert f not in source.problems  # too fresh to tell
    await _eventually(lambda: f in source.problems)
    assert "malformed YAML" in source.problems[f][0] and "malformed YAML" in caplog.text


def test_a_malformed_file_keeps_its_objects_and_their_status_says_so(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(SERVICE_PORT % ("web", 80))
    source, sink = _loaded(tmp_path)
    source.load_file(f, sink)
    bomb = "x: &a [" + ", ".join(["1"] * 1000) + "]\ny: [" + ", ".join(["*a"] * 1000) + "]\n"
    f.write_text(SERVICE_PORT % ("web", 81) + bomb)
    source.load_file(f, sink)
    assert _port(sink.served["web"]) == 80 and sink.resyncs == 1
    [note] = _notes(source, "web")
    assert note.startswith(f"ManifestError/Malformed: {f}: malformed YAML: document 1: aliases expand")
    assert note.endswith("; the last version read from the file is kept")
    f.write_text(SERVICE_PORT % ("web", 81))
    source.load_file(f, sink)
    assert _port(sink.served["web"]) == 81 and _notes(source, "web") == []


def test_an_object_defined_twice_in_one_file_is_served_from_the_first_document(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(SERVICE_PORT % ("web", 80) + "---\n" + SERVICE_PORT % ("web", 81))
    source, sink = _loaded(tmp_path)
    source.load_file(f, sink)
    assert _port(sink.served["web"]) == 80
    [note] = _notes(source, "web")
    assert note.endswith(
        f"{f} (document 2): Service default/web: defined again: document 1 of this file defines it"
    )
