from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from cpx.config import Config
from cpx.errors import ManifestError
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.sources import prefetch
from cpx.sources.manifests import expand
from cpx.sources.prefetch import prefetched
from cpx.sources.standalone import Prepared, StandaloneSource

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="prefetching forks")

SERVICE = "apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {ports: [{port: 80}]}\n"
REFUSED = "apiVersion: v1\nkind: Service\nmetadata: {name: Not_A_Name}\nspec: {ports: [{port: 80}]}\n"
UNKNOWN = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"
MALFORMED = "apiVersion: v1\nkind: [Service\n"


@pytest.fixture(autouse=True)
def _small_batches(monkeypatch: Any) -> None:
    # Fork for a dozen files, and send them in several chunks.
    monkeypatch.setattr(prefetch, "MIN_FILES", 2)
    monkeypatch.setattr(prefetch, "CHUNK_FILES", 2)


def _folder(tmp_path: Path) -> list[Path]:
    """Good, malformed and partly refused files in both the parent's and the child's share."""
    texts = [SERVICE % "a", MALFORMED, SERVICE % "b" + "---\n" + REFUSED, UNKNOWN + "---\n" + SERVICE % "c"]
    for i in range(12):
        (tmp_path / f"f{i:02}.yaml").write_text(texts[i % len(texts)].replace("name: a", f"name: a{i}"))
    return expand([tmp_path])


def _comparable(prepared: Prepared) -> Any:
    if isinstance(prepared, ManifestError):
        return ("malformed", str(prepared))
    return prepared


def _source() -> StandaloneSource:
    return StandaloneSource([], SnapshotHandler.create(PluginHost.load([]), Config()))


def test_the_child_prepares_as_this_process_would(tmp_path: Path) -> None:
    paths = _folder(tmp_path)
    serial = [(path, _comparable(_source().prepare(path))) for path in paths]
    parallel = [(path, _comparable(prepared)) for path, prepared in prefetched(paths, _source().prepare)]
    assert parallel == serial
    outcomes = [p[0] if p[0] == "malformed" else (bool(p[2].refused), bool(p[2].unknown)) for _, p in serial]
    assert {"malformed", (True, False), (False, True), (False, False)} <= set(outcomes)


def test_a_failing_child_leaves_its_files_to_this_process(tmp_path: Path, caplog: Any) -> None:
    paths = _folder(tmp_path)
    source = _source()
    parent = os.getpid()

    def prepare(path: Path) -> Prepared:
        if os.getpid() != parent and path == paths[-3]:
            raise RuntimeError("the child breaks down")
        return source.prepare(path)

    with caplog.at_level(logging.WARNING):
        parallel = [(path, _comparable(prepared)) for path, prepared in prefetched(paths, prepare)]
    assert parallel == [(path, _comparable(_source().prepare(path))) for path in paths]
    assert "the prefetching child delivered" in caplog.text


def test_stopping_early_stops_the_child(tmp_path: Path) -> None:
    paths = _folder(tmp_path)
    results = prefetched(paths, _source().prepare)
    assert next(results)[0] == paths[0]
    results.close()  # e.g. `cpx translate` on an unreadable file: the child is killed and reaped


def test_a_few_big_files_are_shared_by_size(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(prefetch, "MIN_FILES", 1000)
    monkeypatch.setattr(prefetch, "MIN_BYTES", 200)
    monkeypatch.setattr(prefetch, "CHUNK_BYTES", 100)
    big = "---\n".join(SERVICE % f"s{i}" for i in range(6))
    for name, text in (("a", big), ("b", SERVICE % "x"), ("c", big), ("d", big)):
        (tmp_path / f"{name}.yaml").write_text(text)
    paths = expand([tmp_path])
    parent = os.getpid()
    source = _source()

    def prepare(path: Path) -> tuple[bool, Any]:
        return os.getpid() == parent, _comparable(source.prepare(path))

    results = list(prefetched(paths, prepare, own_share=0.4))
    assert [path for path, _ in results] == paths
    assert [here for _, (here, _) in results] == [True, True, False, False]  # 2 of 3 big ones: the child's
    assert [p for _, (_, p) in results] == [_comparable(_source().prepare(path)) for path in paths]


def test_too_few_small_files_stay_here(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(prefetch, "MIN_FILES", 1000)
    paths = _folder(tmp_path)
    parent = os.getpid()
    assert all(pid == parent for _, pid in prefetched(paths, lambda path: os.getpid()))


@pytest.mark.parametrize(
    ("sizes", "share", "split"),
    [([10, 10, 10, 10, 10], 0.4, 2), ([100, 1, 1, 1], 0.4, 1), ([1, 1, 1, 100], 0.4, 3), ([5, 5], 0.0, 1)],
)
def test_split_by_size(sizes: list[int], share: float, split: int) -> None:
    assert prefetch._split_by_size(sizes, share) == split
