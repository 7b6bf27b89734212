"""Property test of incremental HTTPProxy translation through the whole pipeline.

A long-lived :class:`~cpx.snapshot.SnapshotHandler` is fed random sequences of HTTPProxy, Service,
Secret, Namespace and ExtensionService changes over a small universe of names (roots with conflicting FQDNs,
includes across namespaces, include cycles, roots including roots, TLS with missing, invalid or
cross-namespace Secrets, TCP proxy includes, Services appearing and disappearing, roots authorized
by ExtensionServices that come, go and turn invalid as their Services do).  After every
batch its snapshot and statuses must equal those of a fresh pipeline built from the same objects:
any difference is a stale memoised root.  Status times are left out of the comparison (a fresh
build stamps "now" where the long-lived one keeps the earlier time).
"""

from __future__ import annotations

import copy
import functools
import itertools
from typing import Any

import pytest
from cpx import Config, KubeObject, ObjectKey
from cpx.testing import PluginHost, SnapshotHandler, make_tls_secret
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpx_httpproxy import testing as hp

NAMESPACES = ("a", "b")
PROXY_NAMES = ("p1", "p2", "p3", "p4")
SERVICE_NAMES = ("s1", "s2")
SECRET_NAMES = ("t1", "t2")
FQDNS = ("foo.example.com", "FOO.example.com", "bar.example.com")
PREFIXES = ("/", "/api", "/app")


@functools.cache
def tls_material() -> dict[str, Any]:
    """One valid TLS Secret (issuing certificates is slow: once per process)."""
    return make_tls_secret("x", "x", ["foo.example.com", "bar.example.com"])[0]


# -- strategies ------------------------------------------------------------------------------------
namespaces = st.sampled_from(NAMESPACES)
rare = st.integers(0, 9).map(lambda n: n == 7)


@st.composite
def routes(draw: st.DrawFn) -> dict[str, Any]:
    service = hp.service(draw(st.sampled_from((*SERVICE_NAMES, "s3"))), draw(st.sampled_from((80, 81))))
    return hp.route(hp.prefix(draw(st.sampled_from(PREFIXES))), services=[service])


@st.composite
def includes(draw: st.DrawFn) -> dict[str, Any]:
    conditions = [hp.prefix(draw(st.sampled_from(PREFIXES[1:])))] if draw(st.booleans()) else []
    namespace = draw(st.sampled_from((None, *NAMESPACES)))
    return hp.include(draw(st.sampled_from(PROXY_NAMES)), *conditions, namespace=namespace)


@st.composite
def proxies(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    namespace, name = draw(namespaces), draw(st.sampled_from(PROXY_NAMES))
    route_list = draw(st.lists(routes(), max_size=2))
    include_list = draw(st.lists(includes(), max_size=2))
    tcpproxy = None
    if draw(rare):
        target = {"name": draw(st.sampled_from(PROXY_NAMES)), "namespace": draw(namespaces)}
        tcpproxy = hp.tcpproxy(include=target) if draw(st.booleans()) else hp.tcpproxy(hp.service("s1"))
    if draw(st.booleans()):
        obj = hp.child(name, *route_list, namespace=namespace, includes=include_list, tcpproxy=tcpproxy)
        return namespace, name, obj
    tls = None
    if draw(st.booleans()):
        secret = draw(st.sampled_from((*SECRET_NAMES, "missing", f"{draw(namespaces)}/t1")))
        tls = hp.tls(passthrough=True) if draw(rare) else hp.tls(secret)
    fqdn = draw(st.sampled_from(FQDNS))
    obj = hp.root(
        name, fqdn, *route_list, namespace=namespace, tls=tls, includes=include_list, tcpproxy=tcpproxy
    )
    if draw(st.booleans()):
        ref = {"name": "auth", "namespace": draw(namespaces)}
        obj["spec"]["virtualhost"]["authorization"] = {"extensionRef": ref}
    return namespace, name, obj


@st.composite
def extension_services(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """ExtensionServices of the extsvc plugin, read by authorizing roots through the DAG."""
    target = {"name": draw(st.sampled_from((*SERVICE_NAMES, "s3"))), "port": draw(st.sampled_from((80, 81)))}
    spec = {"services": [target], "protocol": draw(st.sampled_from(("h2", "h2c")))}
    obj = {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {},
        "spec": spec,
    }
    return draw(namespaces), "auth", obj


@st.composite
def services(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    ports = [
        {"port": p, "name": f"p{p}"}
        for p in draw(st.lists(st.sampled_from((80, 81)), min_size=1, unique=True))
    ]
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {}, "spec": {"ports": ports}}
    return draw(namespaces), draw(st.sampled_from(SERVICE_NAMES)), obj


@st.composite
def secrets(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    data = dict(tls_material()["data"])
    if draw(rare):
        data = {"tls.crt": "bm9wZQ==", "tls.key": "bm9wZQ=="}
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {}, "type": "kubernetes.io/tls", "data": data}
    return draw(namespaces), draw(st.sampled_from(SECRET_NAMES)), obj


@st.composite
def namespace_objects(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    labels = {"team": draw(st.sampled_from(("x", "y")))}
    return "", draw(namespaces), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"labels": labels}}


# (delete?, (namespace, name, object)), or None: the end of a batch (rebuild and compare).
steps = st.one_of(
    *(
        st.tuples(rare, s)
        for s in (proxies(), proxies(), services(), secrets(), namespace_objects(), extension_services())
    ),
    st.none(),
)


# -- driving a pipeline ----------------------------------------------------------------------------
def make(namespace: str, name: str, template: dict[str, Any], version: int) -> KubeObject:
    obj = copy.deepcopy(template)
    meta = obj.setdefault("metadata", {})
    meta.update({"name": name, "resourceVersion": str(version)})
    if namespace:
        meta["namespace"] = namespace
    return obj


_HOST: PluginHost | None = None


def host() -> PluginHost:
    global _HOST  # noqa: PLW0603 (loading entry points is the slow part of SnapshotHandler.create)
    if _HOST is None:
        _HOST = PluginHost.load(["httpproxy", "extsvc"])
    return _HOST


def new_pipeline() -> SnapshotHandler:
    return SnapshotHandler.create(host(), Config())


def without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def observe(pipeline: SnapshotHandler) -> dict[str, Any]:
    assert pipeline.snapshot is not None
    return {
        "json": pipeline.snapshot.to_json(),
        "statuses": without_times({str(k): v.to_dict() for k, v in pipeline.statuses().items()}),
    }


class Driver:
    """One long-lived pipeline fed as the event handler feeds it, and the objects it should hold."""

    def __init__(self) -> None:
        self.pipeline = new_pipeline()
        self.objects: dict[ObjectKey, KubeObject] = {}
        self.versions = itertools.count(1)
        self.pipeline.rebuild()

    def apply(self, delete: bool, namespace: str, name: str, template: dict[str, Any]) -> None:
        obj = make(namespace, name, template, next(self.versions))
        key = ObjectKey.of(obj)
        old = self.objects.pop(key, None)
        if delete:
            self.pipeline.delete(copy.deepcopy(old if old is not None else obj))
        else:
            self.objects[key] = obj
            self.pipeline.upsert(copy.deepcopy(obj), validate=True)

    def check(self) -> None:
        self.pipeline.rebuild()
        fresh = new_pipeline()
        for obj in self.objects.values():
            fresh.upsert(copy.deepcopy(obj), validate=True)
        fresh.rebuild()
        assert observe(self.pipeline) == observe(fresh)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(st.lists(steps, min_size=15, max_size=60))
def test_incremental_pipeline_matches_fresh(ops: list[Any]) -> None:
    driver = Driver()
    for op in ops:
        if op is None:
            driver.check()
        else:
            delete, (namespace, name, template) = op
            driver.apply(delete, namespace, name, template)
    driver.check()


@pytest.fixture(autouse=True)
def _certificates() -> None:
    tls_material()


def test_an_extension_services_service_appearing_re_plans_the_roots_it_authorizes() -> None:
    # The root reads the ExtensionService only through the DAG registry: the Service behind it is
    # a dependency the registry lookup declares (what the extsvc processor read for it).
    driver = Driver()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {}, "type": "kubernetes.io/tls"}
    driver.apply(False, "a", "t1", {**secret, "data": dict(tls_material()["data"])})
    backend = {"apiVersion": "v1", "kind": "Service", "metadata": {}, "spec": {"ports": [{"port": 80}]}}
    driver.apply(False, "a", "s1", backend)
    auth = {"services": [{"name": "s2", "port": 80}], "protocol": "h2c"}
    driver.apply(
        False,
        "a",
        "auth",
        {"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "spec": auth},
    )
    proxy = hp.root(
        "p1", "foo.example.com", hp.route(services=[hp.service("s1")]), namespace="a", tls=hp.tls("t1")
    )
    proxy["spec"]["virtualhost"]["authorization"] = {"extensionRef": {"name": "auth"}}
    driver.apply(False, "a", "p1", proxy)
    driver.check()
    statuses = observe(driver.pipeline)["statuses"]
    assert "ExtensionServiceNotFound" in str(statuses)
    driver.apply(False, "a", "s2", backend)  # the authorization server's Service appears
    driver.check()
    assert "ExtensionServiceNotFound" not in str(observe(driver.pipeline)["statuses"])


def test_an_extension_service_created_later_re_plans_the_roots_naming_it() -> None:
    driver = Driver()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {}, "type": "kubernetes.io/tls"}
    driver.apply(False, "a", "t1", {**secret, "data": dict(tls_material()["data"])})
    backend = {"apiVersion": "v1", "kind": "Service", "metadata": {}, "spec": {"ports": [{"port": 80}]}}
    driver.apply(False, "a", "s1", backend)
    proxy = hp.root(
        "p1", "foo.example.com", hp.route(services=[hp.service("s1")]), namespace="a", tls=hp.tls("t1")
    )
    proxy["spec"]["virtualhost"]["authorization"] = {"extensionRef": {"name": "auth"}}
    driver.apply(False, "a", "p1", proxy)
    driver.check()
    auth = {"services": [{"name": "s1", "port": 80}], "protocol": "h2c"}
    driver.apply(
        False,
        "a",
        "auth",
        {"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "spec": auth},
    )
    driver.check()
    assert "ExtensionServiceNotFound" not in str(observe(driver.pipeline)["statuses"])
    driver.apply(
        True,
        "a",
        "auth",
        {"apiVersion": "projectcontour.io/v1alpha1", "kind": "ExtensionService", "spec": auth},
    )
    driver.check()
    assert "ExtensionServiceNotFound" in str(observe(driver.pipeline)["statuses"])
