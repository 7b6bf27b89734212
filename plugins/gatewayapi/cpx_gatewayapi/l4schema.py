"""What the API server's schema refuses for TLSRoutes and TCPRoutes (v1, and the v1alpha2 manifests
the conformance suite still uses for TCPRoute): parentRefs, hostnames (TLSRoute), one rule in v1
(up to 16 in v1alpha2), 1-16 backendRefs per rule, in the API server's wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpx import capped, metadata_problems, must_be, shown

from cpx_gatewayapi.routeschema import (
    HOSTNAME_PATTERN,
    MAX_PARENTS,
    backend_ref_problems,
    entries,
    parent_ref_problems,
)

MAX_L4_HOSTNAMES = 1024
MAX_BACKENDS = 16


def validate_tlsroute(obj: Mapping[str, Any]) -> list[str]:
    return _validate(obj, hostnames=True)


def validate_tcproute(obj: Mapping[str, Any]) -> list[str]:
    return _validate(obj, hostnames=False)


def _validate(obj: Mapping[str, Any], *, hostnames: bool) -> list[str]:
    problems = metadata_problems(obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        problems.append("spec: Required value" if spec is None else must_be("spec", spec, "object"))
        return capped(problems)
    v1 = str(obj.get("apiVersion") or "").endswith("/v1")
    for i, ref in enumerate(entries(spec, "parentRefs", "spec", MAX_PARENTS, problems)):
        parent_ref_problems(ref, f"spec.parentRefs[{i}]", problems)
    if hostnames:
        found = entries(spec, "hostnames", "spec", MAX_L4_HOSTNAMES, problems, "string")
        if v1 and not found:
            problems.append("spec.hostnames: Required value")
        for i, hostname in enumerate(found):
            if not HOSTNAME_PATTERN.match(hostname) or len(hostname) > 253:
                problems.append(
                    f"spec.hostnames[{i}]: Invalid value: {shown(hostname)}: must be a valid hostname"
                )
    rules = entries(spec, "rules", "spec", 1 if v1 else 16, problems)
    if not rules:
        problems.append("spec.rules: Required value")
    for i, rule in enumerate(rules):
        path = f"spec.rules[{i}]"
        refs = entries(rule, "backendRefs", path, MAX_BACKENDS, problems)
        if not refs:
            problems.append(f"{path}.backendRefs: Required value")
        for j, ref in enumerate(refs):
            backend_ref_problems(ref, f"{path}.backendRefs[{j}]", problems)
    return capped(problems)
