"""One change re-builds only the roots whose result can change; the others are replayed.

Counts the roots each build built (``HTTPProxyProcessor.built``) on a long-lived source and
processor; test_incremental_fuzz checks that the replayed results are right.
"""

from __future__ import annotations

from typing import Any

from cpx import Config, KubeObject, WatchSpec, ingress_class_accepts
from cpx.dag import DAG
from cpx.testing import Builder, ListenerProcessor, SourceCache

from cpx_httpproxy import testing as hp
from cpx_httpproxy.kinds import HTTP_LISTENER, HTTPPROXY
from cpx_httpproxy.processor import HTTPProxyProcessor

ROOTS = 6


def service(name: str, port: int = 80) -> KubeObject:
    spec = {"ports": [{"name": "http", "port": port}]}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def plain_root(index: int, **fields: Any) -> KubeObject:
    return hp.root(
        f"r{index}", f"r{index}.example.com", hp.route(services=[hp.service(f"s{index}")]), **fields
    )


class Stack:
    """A source and a processor that live across builds, as in ``cpx serve``."""

    def __init__(self, *objects: KubeObject) -> None:
        watch = WatchSpec(gvk=HTTPPROXY, accept=ingress_class_accepts)
        self.source = SourceCache(watches={HTTPPROXY.group_kind: watch})
        config = Config()
        self.processor = HTTPProxyProcessor.from_config(config)
        self.builder = Builder([("listeners", ListenerProcessor(config)), ("httpproxy", self.processor)])
        for obj in (*objects, *(service(f"s{i}") for i in range(ROOTS))):
            self.source.insert(obj)
        self.build()

    def build(self, *changes: KubeObject) -> DAG:
        for obj in changes:
            self.source.insert(obj)
        return self.builder.build(self.source)


def hosts(dag: DAG) -> list[str]:
    return sorted(dag.listeners[HTTP_LISTENER].virtual_hosts)


def test_the_first_build_builds_every_root_and_an_unchanged_source_none() -> None:
    stack = Stack(*(plain_root(i) for i in range(ROOTS)))
    assert stack.processor.built == ROOTS
    assert hosts(stack.build()) == [f"r{i}.example.com" for i in range(ROOTS)]
    assert stack.processor.built == 0


def test_a_changed_root_rebuilds_only_itself() -> None:
    stack = Stack(*(plain_root(i) for i in range(ROOTS)))
    dag = stack.build(
        hp.root("r2", "r2.example.com", hp.route(hp.prefix("/v2"), services=[hp.service("s2")]))
    )
    assert stack.processor.built == 1
    assert list(dag.listeners[HTTP_LISTENER].virtual_hosts["r2.example.com"].routes) != []
    assert len(hosts(dag)) == ROOTS


def test_a_changed_child_rebuilds_the_roots_including_it() -> None:
    including = [plain_root(i, includes=[hp.include("shared", hp.prefix("/shared"))]) for i in (0, 1)]
    child = hp.child("shared", hp.route(services=[hp.service("s5")]))
    stack = Stack(*including, *(plain_root(i) for i in range(2, ROOTS)), child)
    stack.build(hp.child("shared", hp.route(services=[hp.service("s4")])))
    assert stack.processor.built == 2


def test_a_missing_include_appearing_rebuilds_its_includer() -> None:
    stack = Stack(plain_root(0, includes=[hp.include("later", hp.prefix("/later"))]), plain_root(1))
    stack.build(hp.child("later", hp.route(services=[hp.service("s1")])))
    assert stack.processor.built == 1


def test_a_resolved_fqdn_conflict_rebuilds_both_roots() -> None:
    twin = hp.root("twin", "r0.example.com", hp.route(services=[hp.service("s0")]))
    stack = Stack(*(plain_root(i) for i in range(ROOTS)), twin)
    assert stack.processor.built == ROOTS - 1  # r0 and twin claim the same fqdn: neither is built
    stack.build(hp.root("twin", "twin.example.com", hp.route(services=[hp.service("s0")])))
    assert stack.processor.built == 2


def test_a_changed_service_rebuilds_the_roots_reading_it() -> None:
    stack = Stack(*(plain_root(i) for i in range(ROOTS)))
    stack.build(service("s3", port=81))
    assert stack.processor.built == 1
