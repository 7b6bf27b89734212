"""ReferenceGrants: may an object in one namespace refer to an object in another?

A grant lives in the target's namespace.  A reference is permitted when some ``spec.from`` entry
equals the referrer's (group, kind, namespace) and some ``spec.to`` entry equals the target's
(group, kind) with no name or the target's name.  Same-namespace references need no grant.  The
lookups are recorded, so a build that used a grant is redone when the grant changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from cpx import SourceView

from cpx_gatewayapi.kinds import REFERENCE_GRANT


@attrs.frozen(kw_only=True)
class Reference:
    from_group: str  # "" for the core group
    from_kind: str
    from_namespace: str
    to_group: str
    to_kind: str
    to_namespace: str
    to_name: str


def permitted(source: SourceView, ref: Reference) -> bool:
    if ref.from_namespace == ref.to_namespace:
        return True
    for grant in source.list(REFERENCE_GRANT):
        meta = grant.get("metadata") or {}
        if meta.get("namespace") != ref.to_namespace:
            continue
        spec = grant.get("spec") or {}
        if any(_from_matches(entry, ref) for entry in _entries(spec, "from")) and any(
            _to_matches(entry, ref) for entry in _entries(spec, "to")
        ):
            return True
    return False


def _entries(spec: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
    value = spec.get(field)
    return [e for e in value if isinstance(e, Mapping)] if isinstance(value, list) else []


def _from_matches(entry: Mapping[str, Any], ref: Reference) -> bool:
    return (
        (entry.get("group") or "") == ref.from_group
        and entry.get("kind") == ref.from_kind
        and entry.get("namespace") == ref.from_namespace
    )


def _to_matches(entry: Mapping[str, Any], ref: Reference) -> bool:
    name = entry.get("name")
    return (
        (entry.get("group") or "") == ref.to_group
        and entry.get("kind") == ref.to_kind
        and (not name or name == ref.to_name)
    )
