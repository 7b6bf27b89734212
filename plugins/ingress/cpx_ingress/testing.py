"""Builders of networking.k8s.io/v1 Ingress objects for tests (any package's), as wire dicts.

Mixed pathTypes per rule, ``spec.defaultBackend`` and per-entry TLS: :func:`ingress` /
:func:`ingress_rule` / :func:`ingress_path`; :func:`simple_ingress` from ``(host, path, service)``
triples; :func:`valid_ingress` is one host served by one Service.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
    ingress_class: str | None = None,
) -> dict[str, Any]:
    """A networking.k8s.io/v1 Ingress from rules, ``spec.tls`` entries and a default backend."""
    spec: dict[str, Any] = {}
    if default_backend is not None:
        spec["defaultBackend"] = dict(default_backend)
    if rules:
        spec["rules"] = [dict(r) for r in rules]
    if tls:
        spec["tls"] = [dict(t) for t in tls]
    if ingress_class is not None:
        spec["ingressClassName"] = ingress_class
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


def valid_ingress(name: str, host: str, *, service: str, namespace: str = "default") -> dict[str, Any]:
    """An Ingress serving every path of ``host`` from port 80 of ``service``."""
    return ingress(
        name, rules=[ingress_rule(host, ingress_path("/", "Prefix", service))], namespace=namespace
    )


def simple_ingress(
    name: str,
    rules: Iterable[tuple[str | None, str, str]],
    *,
    namespace: str = "default",
    port: int | str = 80,
    path_type: str = "Prefix",
    tls: Mapping[str, Sequence[str]] | None = None,
    annotations: Mapping[str, str] | None = None,
    ingress_class: str | None = None,
) -> dict[str, Any]:
    """An Ingress from ``(host, path, service)`` rules, one pathType (host None: any host), all on ``port``.

    ``tls`` maps Secret names to the hosts they serve.
    """
    by_host: dict[str | None, list[dict[str, Any]]] = {}
    service_port = {"number": port} if isinstance(port, int) else {"name": port}
    for host, path, service_name in rules:
        target = {"service": {"name": service_name, "port": service_port}}
        by_host.setdefault(host, []).append({"path": path, "pathType": path_type, "backend": target})
    spec_rules: list[dict[str, Any]] = []
    for host, paths in by_host.items():
        rule: dict[str, Any] = {"http": {"paths": paths}}
        if host is not None:
            rule = {"host": host, **rule}
        spec_rules.append(rule)
    entries = [{"hosts": list(hosts), "secretName": secret} for secret, hosts in (tls or {}).items()]
    return ingress(
        name,
        rules=spec_rules,
        tls=entries,
        annotations=annotations,
        namespace=namespace,
        ingress_class=ingress_class,
    )
