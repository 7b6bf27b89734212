"""A TLSCertificateDelegation's delegations, read leniently (type-confused entries are skipped:
the schema check refuses such objects in standalone mode, the API server in Kubernetes mode)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs

ALL_NAMESPACES = "*"


@attrs.frozen
class Delegation:
    """``spec.delegations[i]``: the Secret (in the delegation's namespace) and where it may be used."""

    index: int
    secret_name: str
    target_namespaces: tuple[str, ...]

    def permits(self, namespace: str) -> bool:
        """Contour's delegationPermitted: ``"*"`` counts only as the list's one entry."""
        if self.target_namespaces == (ALL_NAMESPACES,):
            return True
        return namespace in self.target_namespaces


def delegations(obj: Mapping[str, Any]) -> Iterator[Delegation]:
    spec = obj.get("spec")
    items = spec.get("delegations") if isinstance(spec, Mapping) else None
    if not isinstance(items, list):
        return
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        secret_name, targets = item.get("secretName"), item.get("targetNamespaces")
        if not isinstance(secret_name, str) or not isinstance(targets, list):
            continue
        yield Delegation(index, secret_name, tuple(t for t in targets if isinstance(t, str)))
