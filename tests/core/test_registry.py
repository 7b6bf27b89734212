"""DAG registries: values one processor publishes by source object for later processors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from cpx import GroupVersionKind, Lookups, ObjectKey, Phase, ProcessorSpec, SourceView, WatchSpec, hookimpl
from cpx.dag import DAG, EXTENSION_UPSTREAMS, ExtensionUpstream, Registries, RegistryKey
from cpx.testing import translate_yaml

REF = ObjectKey("example.com", "Upstream", "ns", "auth")
THING = GroupVersionKind(group="example.com", version="v1", kind="Upstream", plural="upstreams")


@attrs.define
class FakeSource:
    got: list[ObjectKey] = attrs.field(factory=list)
    depended: list[Any] = attrs.field(factory=list)

    def get(self, key: ObjectKey) -> None:
        self.got.append(key)

    def depend_on(self, lookups: Any) -> None:
        self.depended.append(lookups)


def test_a_lookup_reads_the_object_and_what_its_publisher_read() -> None:
    registries = Registries()
    reads = Lookups(keys={ObjectKey("", "Service", "ns", "svc")})
    value = ExtensionUpstream(cluster_name="extension/ns/auth")
    registries.publish(EXTENSION_UPSTREAMS, REF, value, reads=reads)
    source = FakeSource()
    assert registries.lookup(EXTENSION_UPSTREAMS, REF, source) == value
    assert source.got == [REF]
    assert source.depended == [reads]


def test_a_missing_object_is_still_a_read() -> None:
    source = FakeSource()
    assert Registries().lookup(EXTENSION_UPSTREAMS, REF, source) is None
    assert source.got == [REF]  # its later creation re-processes the referrer


def test_values_are_type_checked() -> None:
    with pytest.raises(TypeError, match="takes ExtensionUpstream, not str"):
        Registries().publish(EXTENSION_UPSTREAMS, REF, "x")  # type: ignore[misc]


def test_equal_keys_declared_apart_name_one_registry() -> None:
    registries = Registries()
    mine = RegistryKey("extension-upstreams", ExtensionUpstream)  # another plugin's own declaration
    registries.publish(mine, REF, ExtensionUpstream(cluster_name="c"))
    assert registries.entries(EXTENSION_UPSTREAMS) == {REF: ExtensionUpstream(cluster_name="c")}


@attrs.define
class Publisher:
    config: Any

    def run(self, dag: DAG, source: SourceView) -> None:
        for obj in source.list(THING):
            key = ObjectKey.of(obj)
            with source.recording() as reads:
                source.get(key)
                source.get(ObjectKey("", "Service", key.namespace, obj["spec"]["service"]))
            dag.registries.publish(
                EXTENSION_UPSTREAMS, key, ExtensionUpstream(cluster_name=key.name), reads=reads
            )


@attrs.define
class Reader:
    config: Any

    def run(self, dag: DAG, source: SourceView) -> None:
        with source.recording() as reads:
            found = dag.registries.lookup(EXTENSION_UPSTREAMS, REF, source)
        SEEN.append(
            (dag.registries.published_by_any(EXTENSION_UPSTREAMS), found, frozenset(reads.all_keys()))
        )


SEEN: list[tuple[bool, ExtensionUpstream | None, frozenset[ObjectKey]]] = []


class PublisherPlugin:
    @hookimpl
    def cpx_watches(self) -> Iterator[WatchSpec]:
        yield WatchSpec(gvk=THING)

    @hookimpl
    def cpx_dag_processors(self) -> Iterator[ProcessorSpec]:
        yield ProcessorSpec(
            name="publisher", factory=Publisher, phase=Phase.LISTENERS, publishes=(EXTENSION_UPSTREAMS.name,)
        )


class ReaderPlugin:
    @hookimpl
    def cpx_dag_processors(self) -> Iterator[ProcessorSpec]:
        yield ProcessorSpec(name="reader", factory=Reader, phase=Phase.ROUTES)


OBJECTS = """
apiVersion: example.com/v1
kind: Upstream
metadata: {name: auth, namespace: ns}
spec: {service: svc}
"""


def test_through_the_builder_a_later_processor_reads_what_an_earlier_one_published() -> None:
    SEEN.clear()
    translate_yaml(OBJECTS, [], modules=[("publisher", PublisherPlugin()), ("reader", ReaderPlugin())])
    [(declared, found, reads)] = SEEN
    assert declared
    assert found == ExtensionUpstream(cluster_name="auth")
    assert reads == {REF, ObjectKey("", "Service", "ns", "svc")}


def test_without_the_publisher_the_registry_is_not_published_by_any() -> None:
    SEEN.clear()
    translate_yaml("", [], modules=[("reader", ReaderPlugin())])
    [(declared, found, reads)] = SEEN
    assert (declared, found, reads) == (False, None, frozenset({REF}))


def test_a_declared_registry_counts_even_when_empty() -> None:
    SEEN.clear()
    translate_yaml("", [], modules=[("publisher", PublisherPlugin()), ("reader", ReaderPlugin())])
    [(declared, found, _reads)] = SEEN
    assert (declared, found) == (True, None)
