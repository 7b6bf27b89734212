"""Property test of incremental Gateway API translation through the whole pipeline.

A long-lived :class:`~cpx.snapshot.SnapshotHandler` (gatewayapi and httpproxy plugins) is fed random
sequences of Gateway, HTTPRoute, GRPCRoute, Service, Secret, ReferenceGrant, Namespace and HTTPProxy changes
over a small universe of names: routes sharing hosts (conflicting matches, precedence by age),
several Gateways and listeners (HTTP and HTTPS with missing, invalid or valid certificates,
hostnames, allowedRoutes by namespace label), cross-namespace backends with
and without grants, Services coming and going, and a Gateway on the core's listener whose hosts an
HTTPProxy may serve too.  After every batch its snapshot and statuses must equal those of a fresh
pipeline built from the same objects: any difference is a stale memoised plan or host.  Status
times are left out of the comparison (a fresh build stamps "now" where the long-lived one keeps the
earlier time).
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

NAMESPACES = ("a", "b")
GATEWAYS = {"g1": "127.0.0.11", "g2": "127.0.0.12", "shared": None}  # None: the core's address
ROUTE_NAMES = ("r1", "r2", "r3", "r4")
SERVICE_NAMES = ("s1", "s2")
SECRET_NAMES = ("t1", "t2")
HOSTNAMES = ("foo.example.com", "bar.example.com", "*.example.com")
PATHS = ("/", "/api")
# Older than every HTTPRoute, between their two ages, newer than all.
GRPCROUTE_AGES = {
    "grpc0": "2025-12-31T00:00:00Z",
    "grpc1": "2026-01-01T12:00:00Z",
    "grpc2": "2026-01-03T00:00:00Z",
}
GROUP = "gateway.networking.k8s.io"
CLASS = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "GatewayClass",
    "metadata": {"name": "contour"},
    "spec": {"controllerName": "projectcontour.io/gateway-controller"},
}


@functools.cache
def tls_material() -> dict[str, Any]:
    """One valid TLS Secret (issuing certificates is slow: once per process)."""
    return make_tls_secret("x", "x", ["foo.example.com", "bar.example.com"])[0]


namespaces = st.sampled_from(NAMESPACES)
rare = st.integers(0, 9).map(lambda n: n == 7)


@st.composite
def listeners(draw: st.DrawFn, index: int) -> dict[str, Any]:
    listener: dict[str, Any] = {"name": f"l{index}", "port": 80, "protocol": "HTTP"}
    if draw(st.integers(0, 2)) == 0:  # HTTPS, with a missing, invalid or valid certificate
        ref = {"kind": "Secret", "group": "", "name": draw(st.sampled_from((*SECRET_NAMES, "missing")))}
        tls = {"mode": "Terminate", "certificateRefs": [ref]}
        listener.update({"port": 443, "protocol": "HTTPS", "tls": tls})
    hostname = draw(st.sampled_from((None, *HOSTNAMES)))
    if hostname is not None:
        listener["hostname"] = hostname
    origin = draw(st.sampled_from(("Same", "All", "Selector")))
    namespaces_rule: dict[str, Any] = {"from": origin}
    if origin == "Selector":
        namespaces_rule["selector"] = {"matchLabels": {"team": "x"}}
    listener["allowedRoutes"] = {"namespaces": namespaces_rule}
    return listener


@st.composite
def gateways(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(GATEWAYS)))
    count = draw(st.integers(1, 2))
    spec: dict[str, Any] = {
        "gatewayClassName": "contour",
        "listeners": [draw(listeners(i)) for i in range(count)],
    }
    if GATEWAYS[name] is not None:
        spec["addresses"] = [{"type": "IPAddress", "value": GATEWAYS[name]}]
    obj = {"apiVersion": f"{GROUP}/v1", "kind": "Gateway", "metadata": {"generation": 1}, "spec": spec}
    return "a", name, obj


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    backend: dict[str, Any] = {"name": draw(st.sampled_from((*SERVICE_NAMES, "s3"))), "port": 80}
    if draw(rare):
        backend["namespace"] = draw(namespaces)
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": draw(st.sampled_from(PATHS))}}],
        "backendRefs": [backend],
    }
    return rule


@st.composite
def httproutes(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    parents = []
    for gateway in draw(st.lists(st.sampled_from(sorted(GATEWAYS)), min_size=1, max_size=2, unique=True)):
        ref: dict[str, Any] = {"name": gateway, "namespace": "a"}
        if draw(rare):
            ref["sectionName"] = draw(st.sampled_from(("l0", "l1")))
        parents.append(ref)
    spec: dict[str, Any] = {
        "parentRefs": parents,
        "hostnames": draw(st.lists(st.sampled_from(HOSTNAMES), max_size=2, unique=True)),
        "rules": draw(st.lists(rules(), min_size=1, max_size=2)),
    }
    created = draw(st.sampled_from(("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")))
    meta = {"generation": 1, "creationTimestamp": created}
    obj = {"apiVersion": f"{GROUP}/v1", "kind": "HTTPRoute", "metadata": meta, "spec": spec}
    return draw(namespaces), draw(st.sampled_from(ROUTE_NAMES)), obj


@st.composite
def grpcroutes(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """A GRPCRoute on the same hosts: not merged with HTTPRoutes (copies of their frozen hosts); older
    or newer than they are, so that it takes their hosts or leaves them.  Each name has its own
    creationTimestamp, as in a cluster (the source, like Contour's, ignores a change of it alone)."""
    spec: dict[str, Any] = {
        "parentRefs": [{"name": draw(st.sampled_from(sorted(GATEWAYS))), "namespace": "a"}],
        "hostnames": draw(st.lists(st.sampled_from(HOSTNAMES), max_size=1)),
        "rules": [{"backendRefs": [{"name": draw(st.sampled_from(SERVICE_NAMES)), "port": 80}]}],
    }
    name, created = draw(st.sampled_from(sorted(GRPCROUTE_AGES.items())))
    meta = {"generation": 1, "creationTimestamp": created}
    obj = {"apiVersion": f"{GROUP}/v1", "kind": "GRPCRoute", "metadata": meta, "spec": spec}
    return draw(namespaces), name, obj


@st.composite
def services(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    ports = [{"port": p, "name": f"p{p}"} for p in draw(st.lists(st.sampled_from((80, 81)), min_size=1))]
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {}, "spec": {"ports": ports}}
    return draw(namespaces), draw(st.sampled_from(SERVICE_NAMES)), obj


@st.composite
def grants(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    namespace = draw(namespaces)
    spec = {
        "from": [{"group": GROUP, "kind": "HTTPRoute", "namespace": draw(namespaces)}],
        "to": [{"group": "", "kind": "Service"}],
    }
    obj = {"apiVersion": f"{GROUP}/v1beta1", "kind": "ReferenceGrant", "metadata": {}, "spec": spec}
    return namespace, "grant", obj


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


@st.composite
def proxies(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    prefix = draw(st.sampled_from(PATHS))
    route = {"conditions": [{"prefix": prefix}], "services": [{"name": "s1", "port": 80}]}
    spec = {"virtualhost": {"fqdn": draw(st.sampled_from(HOSTNAMES[:2]))}, "routes": [route]}
    obj = {"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": {}, "spec": spec}
    return "a", "proxy", obj


# (delete?, (namespace, name, object)), or None: the end of a batch (rebuild and compare).
steps = st.one_of(
    *(
        st.tuples(rare, s)
        for s in (
            httproutes(),
            httproutes(),
            httproutes(),
            gateways(),
            grpcroutes(),
            services(),
            secrets(),
            grants(),
            namespace_objects(),
            proxies(),
        )
    ),
    st.none(),
)


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
        _HOST = PluginHost.load(["gatewayapi", "httpproxy"])
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
        self.apply(False, "", "contour", CLASS)
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
