"""Kubernetes objects as cpx holds them: plain dicts in wire shape, keyed by :class:`ObjectKey`.

The core names only the kinds it needs itself (Service, EndpointSlice, Secret, Namespace);
plugins bring their own :class:`~cpx.records.GroupVersionKind` records.
"""

from __future__ import annotations

import functools
import json
import re
import sys
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


@attrs.frozen(order=True, cache_hash=True)  # keys of every table: hashed once, not per lookup
class ObjectKey:
    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectKey:
        meta = obj.get("metadata") or {}
        fields = (
            str(obj.get("apiVersion", "")),
            str(obj.get("kind", "")),
            str(meta.get("namespace") or ""),
            str(meta.get("name", "")),
        )
        # Loading a file asks for each object's key several times in a row (admission, the file's
        # table, the source cache): making a frozen attrs instance costs 4x looking up the one
        # just made, which also shares its cached hash.  Only recent keys are kept (~0.5 MB): enough
        # for `cpx serve`'s event handler, which applies a few hundred objects after they are loaded.
        key = _RECENT_KEYS.get(fields)
        if key is None:
            if len(_RECENT_KEYS) >= _RECENT_KEYS_LIMIT:
                _RECENT_KEYS.clear()
            api_version, kind, namespace, name = fields
            # The group is interned: otherwise every key holds its own copy (~4 MB at 10k routes).
            group = sys.intern(api_version.rpartition("/")[0])
            key = _RECENT_KEYS[fields] = cls(group, kind, namespace, name)
        return key

    @property
    def group_kind(self) -> tuple[str, str]:
        return (self.group, self.kind)

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


_RECENT_KEYS: dict[tuple[str, str, str, str], ObjectKey] = {}
_RECENT_KEYS_LIMIT = 4096


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    value = meta(obj).get("annotations")
    if value is None:  # most objects: without the Mapping ABC's check, slow for a non-mapping
        return {}
    return value if isinstance(value, Mapping) else {}


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


# -- names, checked as the API server does (apimachinery's IsDNS1123Subdomain and friends) ----------
@attrs.frozen
class NameRule:
    pattern: re.Pattern[str]
    max_length: int
    description: str  # the API server's wording

    def problem(self, field: str, value: str) -> str | None:
        """None when ``value`` follows the rule, else the API server's message for ``field``."""
        if len(value) > self.max_length:
            shown = json.dumps(value[:40])
            return f"{field}: Invalid value: {shown}...: must be no more than {self.max_length} characters"
        if self.pattern.fullmatch(value):
            return None
        return (
            f"{field}: Invalid value: {json.dumps(value)}: {self.description} "
            f"(regex used for validation is {self.pattern.pattern!r})"
        )


DNS1123_LABEL = NameRule(
    re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"),
    63,
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character",
)
DNS1123_SUBDOMAIN = NameRule(
    re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"),
    253,
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character",
)
DNS1035_LABEL = NameRule(
    re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?"),
    63,
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character",
)
# Most kinds' names are subdomains (custom resources' always); these core kinds are stricter.
_NAME_RULES = {SERVICE.group_kind: DNS1035_LABEL, NAMESPACE.group_kind: DNS1123_LABEL}


def crd_manifest(
    gvk: GroupVersionKind,
    openapi_schema: Mapping[str, Any],
    *,
    short_names: tuple[str, ...] = (),
    printer_columns: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of a plugin's kind: one served and
    stored version with a status subresource.  Keys are in controller-gen's (sorted) order."""
    version: dict[str, Any] = {
        "name": gvk.version,
        "schema": {"openAPIV3Schema": openapi_schema},
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
    }
    if printer_columns:
        version = {"additionalPrinterColumns": printer_columns, **version}
    names: dict[str, Any] = {"kind": gvk.kind, "listKind": f"{gvk.kind}List", "plural": gvk.plural}
    if short_names:
        names["shortNames"] = list(short_names)
    names["singular"] = gvk.kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{gvk.plural}.{gvk.group}"},
        "spec": {
            "group": gvk.group,
            "names": names,
            "scope": "Namespaced" if gvk.namespaced else "Cluster",
            "versions": [version],
        },
    }


def metadata_problems(obj: Mapping[str, Any], key: ObjectKey | None = None) -> list[str]:
    """What the API server would say about the object's ``metadata.name`` and ``namespace``
    (``key``: ``ObjectKey.of(obj)``, when the caller has it already)."""
    key = key if key is not None else ObjectKey.of(obj)
    rule = _NAME_RULES.get((key.group, key.kind), DNS1123_SUBDOMAIN)
    found = rule.problem("metadata.name", key.name)
    namespace = _namespace_problem(key.namespace) if key.namespace else None
    if found is None and namespace is None:
        return []  # nearly every object: asked for each one loaded
    return [p for p in (found, namespace) if p]


# A load's objects are in a few namespaces: each is checked once.
_namespace_problem = functools.lru_cache(maxsize=1024)(
    functools.partial(DNS1123_LABEL.problem, "metadata.namespace")
)


# Parsed objects whose nesting their parser already bounded (cpx.sources.manifests' fast path), so
# that the depth check of their admission need not walk them again (~7% of preparing a file).  By
# id, as a dict cannot be weakly referenced: the entry holds the object, so its id is not reused
# meanwhile.  Each entry answers once; objects never checked (refused documents) go when it fills.
_NESTING_BOUNDS: dict[int, tuple[Any, int]] = {}
_NESTING_BOUNDS_LIMIT = 4096


def mark_nesting_bound(obj: Any, depth: int) -> None:
    """Record that no list or map in ``obj`` lies ``depth`` levels down (``obj`` itself is level 0)."""
    if len(_NESTING_BOUNDS) >= _NESTING_BOUNDS_LIMIT:
        _NESTING_BOUNDS.clear()
    _NESTING_BOUNDS[id(obj)] = (obj, depth)


def take_nesting_bound(obj: Any) -> int | None:
    """The bound :func:`mark_nesting_bound` recorded for ``obj`` (then forgotten), or None."""
    entry = _NESTING_BOUNDS.pop(id(obj), None)
    return entry[1] if entry is not None and entry[0] is obj else None
