"""Builders of networking.k8s.io/v1 Ingress objects for tests (any package's), as wire dicts.

Mixed pathTypes per rule, ``spec.defaultBackend`` and per-entry TLS: :func:`ingress` /
:func:`ingress_rule` / :func:`ingress_path`; :func:`valid_ingress` is one host served by one Service.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def ingress_backend(service_name: str, port: int | str = 80) -> dict[str, Any]:
    """An IngressBackend for a Service port (a number, or a port name)."""
    ref = {"number": port} if isinstance(port, int) else {"name": port}
    return {"service": {"name": service_name, "port": ref}}


def ingress_path(path: str, path_type: str, service_name: str, port: int | str = 80) -> dict[str, Any]:
    return {"path": path, "pathType": path_type, "backend": ingress_backend(service_name, port)}


def ingress_rule(host: str | None, *paths: Mapping[str, Any]) -> dict[str, Any]:
    """An IngressRule; ``host`` None means any host."""
    rule: dict[str, Any] = {"http": {"paths": [dict(p) for p in paths]}}
    return {"host": host, **rule} if host else rule


def ingress(
    name: str,
    *,
    rules: Iterable[Mapping[str, Any]] = (),
    tls: Iterable[Mapping[str, Any]] = (),
    default_backend: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    """A networking.k8s.io/v1 Ingress from rules, ``spec.tls`` entries and a default backend."""
    spec: dict[str, Any] = {}
    if default_backend is not None:
        spec["defaultBackend"] = dict(default_backend)
    if rules:
        spec["rules"] = [dict(r) for r in rules]
    if tls:
        spec["tls"] = [dict(t) for t in tls]
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


def valid_ingress(name: str, host: str, *, service: str, namespace: str = "default") -> dict[str, Any]:
    """An Ingress serving every path of ``host`` from port 80 of ``service``."""
    return ingress(
        name, rules=[ingress_rule(host, ingress_path("/", "Prefix", service))], namespace=namespace
    )
