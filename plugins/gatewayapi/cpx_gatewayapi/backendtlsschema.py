"""What the API server's schema (with its CEL rules) refuses for BackendTLSPolicies (v1), in its
wording: 1-16 targetRefs, a ``validation`` with a ``hostname``, ``caCertificateRefs`` (up to 8)
XOR ``wellKnownCACertificates``, subjectAltNames whose type names the field it sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpx import capped, metadata_problems, must_be, shown

from cpx_gatewayapi.routeschema import HOSTNAME_PATTERN, _enum, _string, entries

MAX_TARGETS = 16
MAX_CA_REFS = 8
MAX_SANS = 5
_SAN_FIELDS = {"Hostname": "hostname", "URI": "uri"}


def validate_backend_tls_policy(obj: Mapping[str, Any]) -> list[str]:
    problems = metadata_problems(obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        problems.append("spec: Required value" if spec is None else must_be("spec", spec, "object"))
        return capped(problems)
    targets = entries(spec, "targetRefs", "spec", MAX_TARGETS, problems)
    if not targets:
        problems.append("spec.targetRefs: Required value")
    for i, ref in enumerate(targets):
        for field in ("group", "kind", "name"):
            _string(ref, field, f"spec.targetRefs[{i}]", problems, required=True)
        _string(ref, "sectionName", f"spec.targetRefs[{i}]", problems)
    validation = spec.get("validation")
    if not isinstance(validation, Mapping):
        problems.append(
            "spec.validation: Required value"
            if validation is None
            else must_be("spec.validation", validation, "object")
        )
        return capped(problems)
    _validation(validation, problems)
    return capped(problems)


def _validation(validation: Mapping[str, Any], problems: list[str]) -> None:
    path = "spec.validation"
    hostname = _string(validation, "hostname", path, problems, required=True)
    if hostname is not None and (hostname.startswith("*") or not HOSTNAME_PATTERN.match(hostname)):
        problems.append(f"{path}.hostname: Invalid value: {shown(hostname)}: must be a valid hostname")
    refs = entries(validation, "caCertificateRefs", path, MAX_CA_REFS, problems)
    for i, ref in enumerate(refs):
        for field in ("group", "kind", "name"):
            _string(ref, field, f"{path}.caCertificateRefs[{i}]", problems, required=True)
    well_known = _string(validation, "wellKnownCACertificates", path, problems)
    if bool(refs) == bool(well_known):
        problems.append(
            f"{path}: Invalid value: must specify either CACertificateRefs or WellKnownCACertificates"
        )
    for i, san in enumerate(entries(validation, "subjectAltNames", path, MAX_SANS, problems)):
        where = f"{path}.subjectAltNames[{i}]"
        kind = _enum(san, "type", where, tuple(_SAN_FIELDS), problems)
        if kind in _SAN_FIELDS and not san.get(_SAN_FIELDS[kind]):
            problems.append(f"{where}: Invalid value: {_SAN_FIELDS[kind]} must be specified for type {kind}")
