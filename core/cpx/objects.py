"""Kubernetes objects as cpx holds them: plain dicts in wire shape, keyed by :class:`ObjectKey`.

The core names only the kinds it needs itself (Service, EndpointSlice, Secret, Namespace);
plugins bring their own :class:`~cpx.records.GroupVersionKind` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

KubeObject = dict[str, Any]


@attrs.frozen(kw_only=True)
class GroupVersionKind:
    group: str  # "" for the core API group
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> tuple[str, str]:
        return (self.group, self.kind)

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


SERVICE = GroupVersionKind(group="", version="v1", kind="Service", plural="services")
SECRET = GroupVersionKind(group="", version="v1", kind="Secret", plural="secrets")
NAMESPACE = GroupVersionKind(group="", version="v1", kind="Namespace", plural="namespaces", namespaced=False)
ENDPOINT_SLICE = GroupVersionKind(
    group="discovery.k8s.io", version="v1", kind="EndpointSlice", plural="endpointslices"
)


@attrs.frozen(order=True)
class ObjectKey:
    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectKey:
        api_version = str(obj.get("apiVersion", ""))
        group = api_version.rpartition("/")[0]
        meta = obj.get("metadata") or {}
        return cls(
            group, str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))
        )

    @property
    def group_kind(self) -> tuple[str, str]:
        return (self.group, self.kind)

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, Mapping) else {}


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")
