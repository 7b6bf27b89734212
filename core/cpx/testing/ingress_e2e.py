"""Extra builders for the Ingress plugin's end-to-end tests, on top of :mod:`cpx.testing.cpxproc`.

``cpxproc.ingress`` builds one pathType per Ingress; the Ingress tests need mixed pathTypes per
rule, ``spec.defaultBackend`` and per-entry TLS, hence :func:`ingress` / :func:`ingress_rule` /
:func:`ingress_path` here. :func:`eventually` polls until a check stops failing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


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


def eventually(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.05) -> T:
    """Call ``check`` until it returns without raising AssertionError or OSError; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, OSError):
            if time.monotonic() > deadline:
                raise
        time.sleep(interval)
