"""Fixtures for the ingress plugin's tests: object factories, TLS Secrets and a DAG build helper."""

from __future__ import annotations

import base64
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cpx import (
    Config,
    KubeObject,
    ObjectKey,
    WatchSpec,
    ingress_class_accepts,
)
from cpx.dag import DAG
from cpx.testing import (
    Builder,
    ListenerProcessor,
    SecretPolicy,
    SourceCache,
    same_namespace_only,
    self_signed,
)
from cpx_ingress.kinds import INGRESS
from cpx_ingress.processor import IngressProcessor

Build = Callable[..., DAG]


# -- Kubernetes objects ---------------------------------------------------------------------------
def ingress(
    name: str = "web",
    namespace: str = "default",
    *,
    rules: Iterable[Mapping[str, Any]] = (),
    tls: Iterable[Mapping[str, Any]] = (),
    default_backend: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    class_name: str | None = None,
) -> KubeObject:
    spec: dict[str, Any] = {}
    if rules:
        spec["rules"] = list(rules)
    if tls:
        spec["tls"] = list(tls)
    if default_backend is not None:
        spec["defaultBackend"] = default_backend
    if class_name is not None:
        spec["ingressClassName"] = class_name
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


def backend(service: str = "web", port: int | str = 80) -> dict[str, Any]:
    ref = {"name": port} if isinstance(port, str) else {"number": port}
    return {"service": {"name": service, "port": ref}}


def path(
    value: str | None = "/", service: str = "web", port: int | str = 80, path_type: str | None = "Prefix"
) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": backend(service, port)}
    if value is not None:
        out["path"] = value
    if path_type is not None:
        out["pathType"] = path_type
    return out


def rule(host: str | None, *paths: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"http": {"paths": list(paths) or [path()]}}
    if host is not None:
        out["host"] = host
    return out


def service(
    name: str = "web",
    namespace: str = "default",
    ports: Iterable[tuple[str, int]] = (("http", 80),),
    annotations: Mapping[str, str] | None = None,
) -> KubeObject:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"ports": [{"name": n, "port": p, "protocol": "TCP", "targetPort": p} for n, p in ports]},
    }


@pytest.fixture
def k8s() -> types.SimpleNamespace:
    """Factories for the objects the tests feed the source cache."""
    return types.SimpleNamespace(ingress=ingress, backend=backend, path=path, rule=rule, service=service)


# -- TLS material -------------------------------------------------------------------------------
def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="session")
def tls_material() -> dict[str, bytes]:
    """A certificate for example.com and *.example.com, its key, and a key that does not match."""
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    return {
        "cert": self_signed(key, ["example.com", "*.example.com", "secure.example.com"]).cert_pem,
        "key": _key_pem(key),
        "other_key": _key_pem(other),
    }


@pytest.fixture
def tls_secret(tls_material: dict[str, bytes]) -> Callable[..., KubeObject]:
    def make(
        name: str = "tls",
        namespace: str = "default",
        *,
        type_: str = "kubernetes.io/tls",
        matching: bool = True,
    ) -> KubeObject:
        key = tls_material["key"] if matching else tls_material["other_key"]
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": type_,
            "metadata": {"name": name, "namespace": namespace},
            "data": {
                "tls.crt": base64.b64encode(tls_material["cert"]).decode(),
                "tls.key": base64.b64encode(key).decode(),
            },
        }

    return make


# -- building -------------------------------------------------------------------------------------
def make_source(
    objects: Iterable[KubeObject], config: Config, secret_policy: SecretPolicy = same_namespace_only
) -> SourceCache:
    """A source cache holding the objects, with Ingresses filtered by class as the pipeline does."""
    spec = WatchSpec(gvk=INGRESS, accept=ingress_class_accepts)
    source = SourceCache(watches={INGRESS.group_kind: spec}, secret_policy=secret_policy)
    for obj in objects:
        if ObjectKey.of(obj).group_kind == INGRESS.group_kind and not ingress_class_accepts(obj, config):
            continue
        source.insert(obj)
    return source


@pytest.fixture
def build() -> Build:
    """build(*objects, options={...}, secret_policy=..., processor=...) -> the pruned DAG."""

    def run(
        *objects: KubeObject,
        options: Mapping[str, Any] | None = None,
        secret_policy: SecretPolicy = same_namespace_only,
        processor: IngressProcessor | None = None,
    ) -> DAG:
        config = Config(options=dict(options or {}))
        source = make_source(objects, config, secret_policy)
        ingress_processor = processor or IngressProcessor.from_config(config)
        builder = Builder([("listeners", ListenerProcessor(config)), ("ingress", ingress_processor)])
        return builder.build(source)

    return run
