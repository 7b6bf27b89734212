"""Delegations feed the incremental HTTPProxy and Ingress processors: a change to one (added,
edited, deleted) changes the referrers' result at the next build of a long-lived pipeline.

A targeted test follows Contour's documented example through delete and re-create; a property
test feeds random sequences of delegation, HTTPProxy, Ingress and Secret changes and compares the
long-lived pipeline with a fresh one built from the same objects after every batch.
"""

from __future__ import annotations

import copy
import functools
import itertools
from typing import Any

from cpx import Config, KubeObject, ObjectKey
from cpx.testing import PluginHost, SnapshotHandler, make_tls_secret
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpx_tlsdelegation.testing import delegation, docs_delegation, ingress, proxy, service

PLUGINS = ["ingress", "httpproxy", "tlsdelegation"]
NAMESPACES = ("a", "b", "certs")
SECRETS = ("wild", "other")


@functools.cache
def host() -> PluginHost:
    return PluginHost.load(PLUGINS)


@functools.cache
def tls_secret(namespace: str, name: str) -> KubeObject:
    return make_tls_secret(namespace, name, ["foo.example.com", "bar.example.com"])[0]


def pipeline() -> SnapshotHandler:
    return SnapshotHandler.create(host(), Config())


def served(handler: SnapshotHandler) -> set[str]:
    handler.rebuild()
    assert handler.dag is not None
    listener = handler.dag.listeners.get("ingress_https")
    return set(listener.secure_virtual_hosts) if listener is not None else set()


def test_deleting_the_delegation_stops_the_use_at_the_next_build() -> None:
    handler = pipeline()
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    web = ingress("example-com", "web", "web.bar.com", "example-com-wildcard", cert_namespace="www-admin")
    objects = [tls_secret("www-admin", "example-com-wildcard"), service("example-com"), www, web]
    for obj in objects:
        handler.upsert(copy.deepcopy(obj), validate=True)
    assert served(handler) == set()
    handler.upsert(docs_delegation(), validate=True)
    assert served(handler) == {"foo2.bar.com", "web.bar.com"}
    handler.delete(docs_delegation())
    assert served(handler) == set()
    status = handler.statuses()[ObjectKey.of(www)].to_dict()
    assert status["currentStatus"] == "invalid"
    handler.upsert(docs_delegation(), validate=True)
    assert served(handler) == {"foo2.bar.com", "web.bar.com"}
    # Narrowed to another namespace: an edit counts as much as a deletion.
    narrowed = delegation("www-admin", "example-com-wildcard", ("example-com-wildcard", ["elsewhere"]))
    handler.upsert(narrowed, validate=True)
    assert served(handler) == set()


# -- the property test ------------------------------------------------------------------------------
namespaces = st.sampled_from(NAMESPACES)
referrer_namespaces = st.sampled_from(NAMESPACES[:2])
# Mostly the Secrets of "certs", the namespace delegations mostly live in.
secret_refs = st.sampled_from(("certs/wild", "certs/other", "a/wild", "wild"))


@st.composite
def delegations(draw: st.DrawFn) -> KubeObject:
    targets = st.lists(st.sampled_from((*NAMESPACES, "*")), max_size=2)
    entries = draw(st.lists(st.tuples(st.sampled_from(SECRETS), targets), max_size=2))
    namespace = draw(st.sampled_from(("certs", "certs", "a")))
    return delegation(namespace, draw(st.sampled_from(("d1", "d2"))), *entries)


@st.composite
def proxies(draw: st.DrawFn) -> KubeObject:
    fqdn = draw(st.sampled_from(("foo.example.com", "bar.example.com")))
    name = draw(st.sampled_from(("p1", "p2")))
    return proxy(draw(referrer_namespaces), name, fqdn, {"secretName": draw(secret_refs)})


@st.composite
def ingresses(draw: st.DrawFn) -> KubeObject:
    cert_namespace = draw(st.sampled_from((None, *NAMESPACES)))
    secret = draw(st.sampled_from(SECRETS))
    return ingress(draw(referrer_namespaces), "i1", "ing.example.com", secret, cert_namespace=cert_namespace)


@st.composite
def secrets(draw: st.DrawFn) -> KubeObject:
    return tls_secret(draw(namespaces), draw(st.sampled_from(SECRETS)))


# (delete?, object), or None: the end of a batch (rebuild and compare).
steps = st.one_of(
    *(st.tuples(st.booleans(), s) for s in (delegations(), delegations(), proxies(), ingresses(), secrets())),
    st.none(),
)


def observe(handler: SnapshotHandler) -> dict[str, Any]:
    assert handler.snapshot is not None
    statuses = {str(k): v.to_dict() for k, v in handler.statuses().items()}
    for status in statuses.values():
        for condition in status.get("conditions", []):
            condition.pop("lastTransitionTime", None)
    return {"json": handler.snapshot.to_json(), "statuses": statuses}


class Driver:
    def __init__(self) -> None:
        self.handler = pipeline()
        self.objects: dict[ObjectKey, KubeObject] = {}
        self.versions = itertools.count(1)
        for namespace in NAMESPACES:
            self.apply(False, service(namespace))
            for name in SECRETS:
                self.apply(False, tls_secret(namespace, name))
        self.handler.rebuild()

    def apply(self, delete: bool, template: KubeObject) -> None:
        obj = copy.deepcopy(template)
        obj["metadata"]["resourceVersion"] = str(next(self.versions))
        key = ObjectKey.of(obj)
        old = self.objects.pop(key, None)
        if delete:
            self.handler.delete(copy.deepcopy(old if old is not None else obj))
        else:
            self.objects[key] = obj
            self.handler.upsert(copy.deepcopy(obj), validate=True)

    def check(self) -> None:
        self.handler.rebuild()
        fresh = pipeline()
        for obj in self.objects.values():
            fresh.upsert(copy.deepcopy(obj), validate=True)
        fresh.rebuild()
        assert observe(self.handler) == observe(fresh)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(st.lists(steps, min_size=10, max_size=40))
def test_incremental_pipeline_matches_fresh(ops: list[Any]) -> None:
    driver = Driver()
    for op in ops:
        if op is None:
            driver.check()
        else:
            driver.apply(*op)
    driver.check()
