"""Builders for TLSCertificateDelegation tests: the objects of Contour's documentation examples
and the fallback certificate section of tls-termination.md), as builders the tests share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import yaml

Obj = dict[str, Any]


def delegation(namespace: str, name: str, *entries: tuple[str, Sequence[str]]) -> Obj:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "TLSCertificateDelegation",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "delegations": [
                {"secretName": secret, "targetNamespaces": list(targets)} for secret, targets in entries
            ]
        },
    }


def docs_delegation() -> Obj:
    """tls-delegation.md's TLSCertificateDelegation."""
    return delegation(
        "www-admin",
        "example-com-wildcard",
        ("example-com-wildcard", ["example-com"]),
        ("another-com-wildcard", ["*"]),
    )


def service(namespace: str, name: str = "s1", port: int = 80) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"port": port}]},
    }


def proxy(namespace: str, name: str, fqdn: str, tls: dict[str, Any], service_name: str = "s1") -> Obj:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "virtualhost": {"fqdn": fqdn, "tls": tls},
            "routes": [{"services": [{"name": service_name, "port": 80}]}],
        },
    }


def ingress(
    namespace: str, name: str, host: str, secret_name: str, *, cert_namespace: str | None = None
) -> Obj:
    """tls-delegation.md's Ingress v1 (the tls-cert-namespace annotation when ``cert_namespace``)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if cert_namespace is not None:
        metadata["annotations"] = {"projectcontour.io/tls-cert-namespace": cert_namespace}
    backend = {"service": {"name": "s1", "port": {"number": 80}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": {
            "rules": [
                {"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}
            ],
            "tls": [{"hosts": [host], "secretName": secret_name}],
        },
    }


def dump(objects: Iterable[Obj]) -> str:
    return yaml.safe_dump_all(list(objects))
