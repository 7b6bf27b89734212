"""Property test of incremental translation through the whole pipeline.

A long-lived :class:`~cpx.snapshot.SnapshotHandler` is driven as the event handler drives it (upsert or
delete, rebuild only when something relevant changed, the EDS fast path for EndpointSlice-only
batches) through random sequences of Ingress, Service, Secret and EndpointSlice changes over a
small universe of names.  After every batch its snapshot (Envoy JSON and per-type versions) and
statuses must equal those of a fresh pipeline built from the same objects: any difference is
stale configuration served by a memo (the Ingress processor's, or the RDS/CDS/EDS caches').
"""

from __future__ import annotations

import copy
import functools
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpx import Config, KubeObject, ObjectKey
from cpx.testing import PluginHost, SnapshotHandler, make_ca_secret, make_tls_secret

NAMESPACES = ("a", "b", "c")
INGRESS_NAMES = ("i1", "i2", "i3")
SERVICE_NAMES = ("s1", "s2")
SECRET_NAMES = ("t1", "t2")
HOSTS = ("", "foo.example.com", "bar.example.com", "*.example.com")
TLS_HOSTS = ("foo.example.com", "bar.example.com", "*.example.com")
PATHS = ("/", "/api", "/api/", "/app", "/r[0-9]+", "/bad(")
PATH_TYPES = ("Prefix", "Exact", "ImplementationSpecific")
PORT_NAMES = ("http", "grpc", "")
ANNOTATIONS = {
    "projectcontour.io/response-timeout": ("5s", "infinity", "bogus"),
    "projectcontour.io/request-timeout": ("1s",),
    "projectcontour.io/websocket-routes": ("/", "/api, /app"),
    "ingress.kubernetes.io/force-ssl-redirect": ("true", "false"),
    "kubernetes.io/ingress.allow-http": ("false",),
    "projectcontour.io/num-retries": ("3",),
    "projectcontour.io/retry-on": ("5xx",),
    "projectcontour.io/tls-minimum-protocol-version": ("1.3", "1.1"),
    "projectcontour.io/tls-cert-namespace": NAMESPACES,
    # With no class configured only "contour" (or none) is ours: "other" makes the Ingress go away.
    "kubernetes.io/ingress.class": ("contour", "other"),
}


@functools.cache
def tls_material() -> tuple[dict[str, Any], ...]:
    """A few valid TLS Secrets and a CA-only one (issuing certificates is slow: once per process)."""
    hosts = (["foo.example.com"], ["bar.example.com", "*.example.com"], ["other.example.org"])
    return (*(make_tls_secret("x", "x", h)[0] for h in hosts), make_ca_secret("x", "x"))


# -- strategies ------------------------------------------------------------------------------------
namespaces = st.sampled_from(NAMESPACES)


@st.composite
def backends(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 30)) == 17:
        return {"resource": {"kind": "Bucket", "name": "x"}}
    port: dict[str, Any]
    if draw(st.booleans()):
        port = {"number": draw(st.sampled_from((80, 80, 81, 8443)))}
    else:
        port = {"name": draw(st.sampled_from(("http", "http", "grpc", "nope")))}
    return {"service": {"name": draw(st.sampled_from((*SERVICE_NAMES, *SERVICE_NAMES, "s3"))), "port": port}}


@st.composite
def ingress_paths(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": draw(backends())}
    if draw(st.integers(0, 30)) != 17:  # a missing path is "/" for ImplementationSpecific only
        out["path"] = draw(st.sampled_from(PATHS))
    # A missing pathType fails the schema check: the Ingress is rejected (rarely, on purpose).
    if draw(st.integers(0, 30)) != 17:
        out["pathType"] = draw(st.sampled_from(PATH_TYPES))
    return out


@st.composite
def ingresses(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    spec: dict[str, Any] = {}
    if draw(st.integers(0, 5)) == 3:
        spec["defaultBackend"] = draw(backends())
    rules = []
    # No rules and no defaultBackend fails the schema check (rarely, on purpose).
    for _ in range(draw(st.integers(0 if spec or draw(st.integers(0, 30)) == 17 else 1, 3))):
        rule: dict[str, Any] = {"http": {"paths": draw(st.lists(ingress_paths(), min_size=1, max_size=3))}}
        host = draw(st.sampled_from(HOSTS))
        if host:
            rule["host"] = host
        rules.append(rule)
    if rules:
        spec["rules"] = rules
    tls = []
    for _ in range(draw(st.integers(0, 2))):
        entry: dict[str, Any] = {"hosts": draw(st.lists(st.sampled_from(TLS_HOSTS), max_size=2, unique=True))}
        if draw(st.integers(0, 10)) != 7:
            entry["secretName"] = draw(st.sampled_from((*SECRET_NAMES, "missing")))
        tls.append(entry)
    if tls:
        spec["tls"] = tls
    keys = draw(st.lists(st.sampled_from(sorted(ANNOTATIONS)), max_size=3, unique=True))
    annotations = {k: draw(st.sampled_from(ANNOTATIONS[k])) for k in keys}
    return draw(namespaces), draw(st.sampled_from(INGRESS_NAMES)), {"spec": spec, "annotations": annotations}


@st.composite
def services(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    ports = []
    numbers = draw(st.lists(st.sampled_from((80, 81, 8443)), min_size=1, max_size=2, unique=True))
    # Several ports need distinct names (the schema check), a single one may have none.
    names = (
        ["http", "grpc"] if len(numbers) > 1 and draw(st.booleans()) else [draw(st.sampled_from(PORT_NAMES))]
    )
    for number, name in zip(numbers, names, strict=False):
        port: dict[str, Any] = {"port": number, "targetPort": number + 8000}
        if name:
            port["name"] = name
        ports.append(port)
    spec: dict[str, Any] = {"ports": ports}
    if draw(st.integers(0, 10)) == 7:
        spec = {"type": "ExternalName", "externalName": "ext.example.org", "ports": ports}
    return draw(namespaces), draw(st.sampled_from(SERVICE_NAMES)), {"spec": spec}


@st.composite
def secrets(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    which = draw(st.integers(0, len(tls_material())))
    if which == len(tls_material()):
        body: dict[str, Any] = {
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": "bm9wZQ==", "tls.key": "bm9wZQ=="},
        }
    else:
        material = tls_material()[which]
        body = {"type": material["type"], "data": dict(material["data"])}
    return draw(namespaces), draw(st.sampled_from(SECRET_NAMES)), body


@st.composite
def slices(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    service = draw(st.sampled_from(SERVICE_NAMES))
    endpoints = [
        {"addresses": [f"10.0.{draw(st.integers(0, 3))}.{i}"], "conditions": {"ready": draw(st.booleans())}}
        for i in range(draw(st.integers(0, 3)))
    ]
    ports = [
        {"port": number, **({"name": name} if name else {})}
        for number, name in draw(
            st.lists(
                st.tuples(st.sampled_from((8080, 8081)), st.sampled_from(("http", *PORT_NAMES))),
                min_size=1,
                max_size=2,
            )
        )
    ]
    # Slice names are not tied to the Service: a slice may move from one Service to another.
    name = draw(st.sampled_from(("e1", "e2")))
    body = {"service": service, "endpoints": endpoints, "ports": ports}
    return draw(namespaces), name, body


KINDS = {
    "Ingress": ingresses(),
    "Service": services(),
    "Secret": secrets(),
    "EndpointSlice": slices(),
}

# (kind, delete?, (namespace, name, body)) then a flush marker: the event handler's batches.
steps = st.one_of(
    *(
        st.tuples(st.just(kind), st.integers(0, 4).map(lambda n: n == 3), strategy)
        for kind, strategy in KINDS.items()
    ),
    st.just(("flush", False, ("", "", {}))),
)


# -- objects ---------------------------------------------------------------------------------------
def make(kind: str, namespace: str, name: str, body: dict[str, Any], version: int) -> KubeObject:
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "resourceVersion": str(version)}
    if kind == "Ingress":
        if body["annotations"]:
            meta["annotations"] = dict(body["annotations"])
        return {"apiVersion": "networking.k8s.io/v1", "kind": kind, "metadata": meta, "spec": body["spec"]}
    if kind == "Service":
        return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": body["spec"]}
    if kind == "Secret":
        return {
            "apiVersion": "v1",
            "kind": kind,
            "metadata": meta,
            "type": body["type"],
            "data": body["data"],
        }
    meta["labels"] = {"kubernetes.io/service-name": body["service"]}
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": body["endpoints"],
        "ports": body["ports"],
    }


# A status address makes the processor compute (and memoise) a loadBalancer status per Ingress.
OPTIONS = {"ingress_status_address": "192.0.2.1"}
_HOST: PluginHost | None = None


def host() -> PluginHost:
    global _HOST  # noqa: PLW0603 (loading entry points is the slow part of SnapshotHandler.create)
    if _HOST is None:
        _HOST = PluginHost.load(["ingress"])
    return _HOST


def fresh(objects: dict[ObjectKey, KubeObject]) -> SnapshotHandler:
    pipeline = SnapshotHandler.create(host(), Config(options=OPTIONS))
    for obj in objects.values():
        pipeline.upsert(copy.deepcopy(obj), validate=True)
    pipeline.rebuild()
    return pipeline


def observe(pipeline: SnapshotHandler) -> dict[str, Any]:
    assert pipeline.snapshot is not None
    return {
        "versions": {url: snap.version for url, snap in sorted(pipeline.snapshot.types.items())},
        "json": pipeline.snapshot.to_json(),
        "statuses": {str(k): v.to_dict() for k, v in pipeline.statuses().items()},
    }


class Driver:
    """One long-lived pipeline fed as the event handler feeds it, and the objects it should hold."""

    def __init__(self) -> None:
        self.pipeline = SnapshotHandler.create(host(), Config(options=OPTIONS))
        self.objects: dict[ObjectKey, KubeObject] = {}
        self.versions = itertools.count(1)
        self.dirty = False
        self.endpoint_services: set[tuple[str, str]] = set()
        self.pipeline.rebuild()

    def apply(self, kind: str, delete: bool, namespace: str, name: str, body: dict[str, Any]) -> None:
        obj = make(kind, namespace, name, body, next(self.versions))
        key = ObjectKey.of(obj)
        old = self.objects.get(key)
        if delete:
            self.objects.pop(key, None)
            relevant = self.pipeline.delete(copy.deepcopy(old if old is not None else obj))
        else:
            self.objects[key] = obj
            relevant = self.pipeline.upsert(copy.deepcopy(obj), validate=True)
        if kind == "EndpointSlice":
            # As the event handler does: the Service named by the event's object (for a delete,
            # the object as it was); a relabelled slice's old Service is not named.
            event_obj = old if delete and old is not None else obj
            self.endpoint_services.add(
                (namespace, event_obj["metadata"]["labels"]["kubernetes.io/service-name"])
            )
        self.dirty = self.dirty or relevant

    def flush(self) -> None:
        if self.dirty:
            self.pipeline.rebuild()
        elif self.endpoint_services:
            self.pipeline.endpoints_changed(self.endpoint_services)
        self.dirty = False
        self.endpoint_services = set()

    def check(self) -> None:
        self.flush()
        assert observe(self.pipeline) == observe(fresh(self.objects))


def run(ops: list[tuple[str, bool, tuple[str, str, dict[str, Any]]]]) -> None:
    driver = Driver()
    for kind, delete, (namespace, name, body) in ops:
        if kind == "flush":
            driver.check()
        else:
            driver.apply(kind, delete, namespace, name, body)
    driver.check()


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(st.lists(steps, min_size=15, max_size=60))
def test_incremental_pipeline_matches_fresh(ops: list[Any]) -> None:
    run(ops)


@pytest.fixture(autouse=True)
def _certificates() -> None:
    tls_material()


# -- regressions the property test found ------------------------------------------------------------
def _rule(service: str) -> dict[str, Any]:
    backend = {"service": {"name": service, "port": {"number": 80}}}
    return {"http": {"paths": [{"path": f"/{service}", "pathType": "Prefix", "backend": backend}]}}


def _slice_body(service: str) -> dict[str, Any]:
    return {
        "service": service,
        "endpoints": [{"addresses": ["10.0.0.1"]}],
        "ports": [{"port": 8080, "name": "http"}],
    }


def test_relabelled_slice_leaves_its_old_service_on_the_fast_path() -> None:
    """A slice moved from s1 to s2: its event names s2 only, yet s1's CLA must lose the endpoint."""
    driver = Driver()
    for service in SERVICE_NAMES:
        driver.apply("Service", False, "a", service, {"spec": {"ports": [{"port": 80, "name": "http"}]}})
    driver.apply(
        "Ingress", False, "a", "i1", {"spec": {"rules": [_rule("s1"), _rule("s2")]}, "annotations": {}}
    )
    driver.apply("EndpointSlice", False, "a", "e1", _slice_body("s1"))
    driver.check()
    driver.apply("EndpointSlice", False, "a", "e1", _slice_body("s2"))
    assert not driver.dirty and driver.endpoint_services == {("a", "s2")}  # the EDS fast path
    driver.check()
