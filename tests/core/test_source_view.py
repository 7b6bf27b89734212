"""The read-only SourceView: what processors may do with the source, and what the core records."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from cpx import Lookups, ReadIndex, SourceView, blame
from cpx.config import Config
from cpx.dag.builder import Builder
from cpx.dag.dag import DAG
from cpx.objects import ObjectKey
from cpx.records import EndpointsObserver, SourceBound
from cpx.sources.cache import NotFoundError, SourceCache
from cpx.xds.caches.endpoints import EndpointCache
from cpx.xds.caches.listeners import ListenerCache

A = ObjectKey("example.com", "Widget", "default", "a")
B = ObjectKey("example.com", "Widget", "default", "b")


def service(name: str, version: str = "1") -> dict[str, Any]:
    meta = {"namespace": "default", "name": name, "resourceVersion": version}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"ports": [{"port": 80 + int(version)}]},
    }


def svc_key(name: str) -> ObjectKey:
    return ObjectKey("", "Service", "default", name)


class Reader:
    """Translates A (reading Service "sa") and B (reading "sb"), each blamed on its object."""

    def run(self, dag: DAG, source: SourceView) -> None:
        for key, name in ((A, "sa"), (B, "sb")):
            with blame(key):
                source.get(svc_key(name))


class Memo:
    """Computes once per object, then replays: with ``declare`` it re-declares what it read."""

    def __init__(self, *, declare: bool) -> None:
        self.declare = declare
        self.reads = ReadIndex()
        self.single: Lookups | None = None

    def run(self, dag: DAG, source: SourceView) -> None:
        if not len(self.reads):
            with blame(A), source.recording() as lookups, contextlib.suppress(NotFoundError):
                source.lookup_service("default", "sa")  # not there yet: still a dependency
            self.reads.add(A, lookups)
            self.single = lookups
        if self.declare:
            source.depend_on(self.reads)


def build(source: SourceCache, *processors: Any) -> Builder:
    builder = Builder([(type(p).__name__.lower(), p) for p in processors])
    builder.build(source)
    return builder


def test_the_view_has_only_reading_methods_and_nothing_to_assign() -> None:
    source = SourceCache()
    view = source.view
    assert view is source.view  # one per cache: memoising processors compare by identity
    with pytest.raises(AttributeError):
        view.insert(service("x"))  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        view.referenced_services  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match="read-only"):
        view.stash = {}  # type: ignore[attr-defined]
    source.insert(service("x"))
    assert view.get(svc_key("x")) is not None and view.revision == source.revision


def test_a_processor_writing_into_the_view_fails() -> None:
    class Writer:
        def run(self, dag: DAG, source: SourceView) -> None:
            source.referenced_services.add(("default", "x"))  # type: ignore[attr-defined]

    with pytest.raises(AttributeError, match="referenced_services"):
        build(SourceCache(), Writer())


def test_builder_records_each_processors_reads() -> None:
    source = SourceCache()
    builder = build(source, Reader(), Memo(declare=False))
    assert builder.reads["reader"].keys == {svc_key("sa"), svc_key("sb")}
    assert builder.reads["memo"].keys == {svc_key("sa")}
    assert source.references() == {svc_key("sa"), svc_key("sb")}


def test_referencing_names_the_objects_whose_translation_read_a_key() -> None:
    source = SourceCache()
    build(source, Reader())
    assert source.referencing(svc_key("sa")) == {A}
    assert source.referencing(svc_key("sb")) == {B}
    assert source.referencing(svc_key("other")) == frozenset()
    assert source.view.referencing(svc_key("sa")) == {A}


def test_only_a_change_to_what_the_last_build_read_triggers_a_rebuild() -> None:
    source = SourceCache()
    assert source.insert(service("sa")) is False  # nothing built yet: nobody reads it
    build(source, Reader())
    assert source.insert(service("sa", version="2")) is True
    assert source.insert(service("unused")) is False
    assert source.remove(service("unused")) is False
    assert source.remove(service("sb")) is False  # read, but never there: no change at all
    build(source)  # a build that reads nothing forgets the references
    assert source.insert(service("sa", version="3")) is False


def test_depend_on_keeps_memoised_references_alive() -> None:
    for declare in (True, False):
        source = SourceCache()
        memo = Memo(declare=declare)
        build(source, memo)
        build(source, memo)  # replayed: nothing read again
        # Re-declared, the memo's reads count for this build; otherwise they are forgotten.
        assert source.insert(service("sa")) is declare
        assert source.referencing(svc_key("sa")) == ({A} if declare else frozenset())


def test_depend_on_a_single_lookups_counts_for_the_blamed_object() -> None:
    source = SourceCache()
    memo = Memo(declare=False)
    build(source, memo)

    class Replay:
        def run(self, dag: DAG, source: SourceView) -> None:
            assert memo.single is not None
            with blame(B):
                source.depend_on(memo.single)

    build(source, Replay())
    assert source.referencing(svc_key("sa")) == {B}
    assert source.insert(service("sa")) is True


def test_read_index_tracks_readers_and_volatile_results() -> None:
    index = ReadIndex()
    index.add(A, Lookups(keys={svc_key("s1"), svc_key("s2")}))
    index.add(B, Lookups(keys={svc_key("s2")}, volatile=True))
    assert index.referencing(svc_key("s2")) == {A, B}
    assert index.volatile == {B}
    index.add(A, Lookups(keys={svc_key("s3")}))  # recomputed: replaces what A read
    assert index.referencing(svc_key("s1")) == frozenset()
    assert svc_key("s3") in index and svc_key("s1") not in index
    index.discard(B)
    assert index.referencing(svc_key("s2")) == frozenset() and index.volatile == set()


def test_changes_since_names_objects_by_object_key() -> None:
    source = SourceCache()
    source.insert(service("sa"))
    assert source.view.changes_since(0) == [svc_key("sa")]


def test_cache_capabilities_are_declared_protocols() -> None:
    endpoints, listeners = EndpointCache(Config()), ListenerCache(Config())
    assert isinstance(endpoints, SourceBound) and isinstance(endpoints, EndpointsObserver)
    assert not isinstance(listeners, SourceBound) and not isinstance(listeners, EndpointsObserver)
