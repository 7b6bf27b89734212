"""What the API server's schema (CRD OpenAPI and CEL rules) refuses, for GatewayClass, Gateway and
ReferenceGrant: such objects never reach the processor (``WatchSpec.validate``).

The rules are those of the v1 standard-channel CRDs (``apis/v1/*_types.go`` of
kubernetes-sigs/gateway-api) for the fields this plugin reads, with the API server's wording::

    spec.listeners[0].port: Invalid value: 0: spec.listeners[0].port in body should be greater \
than or equal to 1
    spec.listeners: Invalid value: "array": Listener name must be unique within the Gateway

Any JSON value gets an answer, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from cpx import capped, json_type, metadata_problems, must_be, shown

# Patterns of apis/v1/shared_types.go.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
HOSTNAME = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
GROUP_PATTERN = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
KIND = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
CONTROLLER = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"
)
PROTOCOL = (
    r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$|[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9]+$"
)
ADDRESS_TYPE = (
    r"^Hostname|IPAddress|NamedAddress|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$"
)

# The Listener CEL rules of apis/v1/gateway_types.go, with their messages.
TLS_FORBIDDEN = "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"
HTTPS_TERMINATE = "tls mode must be Terminate for protocol HTTPS"
TLS_MODE_REQUIRED = "tls mode must be set for protocol TLS"
HOSTNAME_FORBIDDEN = "hostname must not be specified for protocols ['TCP', 'UDP']"
UNIQUE_NAMES = "Listener name must be unique within the Gateway"
UNIQUE_COMBINATION = "Combination of port, protocol and hostname must be unique for each listener"
TERMINATE_NEEDS_CERTIFICATES = "certificateRefs or options must be specified when mode is Terminate"


@attrs.define
class _Checks:
    """Problems found so far, and the checks of one field each (an absent field passes unless required)."""

    problems: list[str] = attrs.field(factory=list)

    def typed(self, path: str, value: Any, expected: str, *, required: bool = False) -> bool:
        """Whether ``value`` is there and of the JSON type; a problem when it is of another type."""
        if value is None:
            if required:
                self.problems.append(f"{path}: Required value")
            return False
        if json_type(value) != expected:
            self.problems.append(must_be(path, value, expected))
            return False
        return True

    def string(
        self,
        path: str,
        value: Any,
        *,
        required: bool = False,
        min_length: int = 0,
        max_length: int | None = None,
        pattern: str | None = None,
        enum: Sequence[str] = (),
    ) -> None:
        if not self.typed(path, value, "string", required=required):
            return
        if enum and value not in enum:
            allowed = ", ".join(shown(e) for e in enum)
            self.problems.append(f"{path}: Unsupported value: {shown(value)}: supported values: {allowed}")
        elif max_length is not None and len(value) > max_length:
            self.problems.append(f"{path}: Too long: may not be more than {max_length} bytes")
        elif len(value) < min_length:
            detail = f"should be at least {min_length} chars long"
            self.problems.append(f"{path}: Invalid value: {shown(value)}: {path} in body {detail}")
        elif pattern is not None and not _compiled(pattern).search(value):
            self.problems.append(
                f"{path}: Invalid value: {shown(value)}: {path} in body should match '{pattern}'"
            )

    def integer(self, path: str, value: Any, *, required: bool = False, low: int, high: int) -> None:
        if not self.typed(path, value, "integer", required=required):
            return
        for bound, ok, words in ((low, value >= low, "greater"), (high, value <= high, "less")):
            if not ok:
                detail = f"should be {words} than or equal to {bound}"
                self.problems.append(f"{path}: Invalid value: {value}: {path} in body {detail}")

    def array(
        self, path: str, value: Any, *, required: bool = False, min_items: int = 0, max_items: int
    ) -> list[Any]:
        if not self.typed(path, value, "array", required=required):
            return []
        if len(value) > max_items:
            self.problems.append(f"{path}: Too many: {len(value)}: must have at most {max_items} items")
        elif len(value) < min_items:
            detail = f"should have at least {min_items} items"
            self.problems.append(f"{path}: Invalid value: {len(value)}: {path} in body {detail}")
        return list(value)

    def mapping(self, path: str, value: Any, *, required: bool = False) -> Mapping[str, Any]:
        return value if self.typed(path, value, "object", required=required) else {}

    def rule(self, path: str, holds: bool, message: str, value: Any = "array") -> None:
        if not holds:
            self.problems.append(f"{path}: Invalid value: {shown(value)}: {message}")

    def each(self, path: str, items: list[Any], check: Callable[[str, Mapping[str, Any]], None]) -> None:
        for i, item in enumerate(items):
            where = f"{path}[{i}]"
            if self.typed(where, item, "object", required=True):
                check(where, item)


_patterns: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _patterns.get(pattern)
    if found is None:
        found = _patterns[pattern] = re.compile(pattern)
    return found


def _start(obj: Mapping[str, Any]) -> tuple[_Checks, Mapping[str, Any]]:
    checks = _Checks(metadata_problems(obj))
    return checks, checks.mapping("spec", obj.get("spec"), required=True)


# -- GatewayClass ----------------------------------------------------------------------------------


def validate_gateway_class(obj: Mapping[str, Any]) -> list[str]:
    checks, spec = _start(obj)
    checks.string(
        "spec.controllerName", spec.get("controllerName"), required=True, max_length=253, pattern=CONTROLLER
    )
    checks.string("spec.description", spec.get("description"), max_length=64)
    ref = checks.mapping("spec.parametersRef", spec.get("parametersRef"))
    if ref:
        _object_reference(checks, "spec.parametersRef", ref, kind_required=True)
    return capped(checks.problems)


def _object_reference(checks: _Checks, path: str, ref: Mapping[str, Any], *, kind_required: bool) -> None:
    checks.string(
        f"{path}.group", ref.get("group"), required=kind_required, max_length=253, pattern=GROUP_PATTERN
    )
    checks.string(
        f"{path}.kind", ref.get("kind"), required=kind_required, min_length=1, max_length=63, pattern=KIND
    )
    checks.string(f"{path}.name", ref.get("name"), required=True, min_length=1, max_length=253)
    checks.string(f"{path}.namespace", ref.get("namespace"), min_length=1, max_length=63, pattern=NAMESPACE)


# -- Gateway ---------------------------------------------------------------------------------------


def validate_gateway(obj: Mapping[str, Any]) -> list[str]:
    checks, spec = _start(obj)
    checks.string(
        "spec.gatewayClassName", spec.get("gatewayClassName"), required=True, min_length=1, max_length=253
    )
    listeners = checks.array(
        "spec.listeners", spec.get("listeners"), required=True, min_items=1, max_items=64
    )
    checks.each("spec.listeners", listeners, lambda path, listener: _listener(checks, path, listener))
    if listeners and not checks.problems:
        _listener_rules(checks, listeners)
    addresses = checks.array("spec.addresses", spec.get("addresses"), max_items=16)
    checks.each("spec.addresses", addresses, lambda path, address: _address(checks, path, address))
    if addresses and not checks.problems:
        for type_, message in (
            ("IPAddress", "IPAddress values must be unique"),
            ("Hostname", "Hostname values must be unique"),
        ):
            values = [
                a.get("value")
                for a in addresses
                if (a.get("type") or "IPAddress") == type_ and a.get("value")
            ]
            checks.rule("spec.addresses", len(values) == len(set(values)), message)
    return capped(checks.problems)


def _listener(checks: _Checks, path: str, listener: Mapping[str, Any]) -> None:
    checks.string(
        f"{path}.name",
        listener.get("name"),
        required=True,
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
    )
    checks.string(
        f"{path}.hostname", listener.get("hostname"), min_length=1, max_length=253, pattern=HOSTNAME
    )
    checks.integer(f"{path}.port", listener.get("port"), required=True, low=1, high=65535)
    checks.string(
        f"{path}.protocol",
        listener.get("protocol"),
        required=True,
        min_length=1,
        max_length=255,
        pattern=PROTOCOL,
    )
    tls = checks.mapping(f"{path}.tls", listener.get("tls"))
    if tls:
        checks.string(f"{path}.tls.mode", tls.get("mode"), enum=("Terminate", "Passthrough"))
        refs = checks.array(f"{path}.tls.certificateRefs", tls.get("certificateRefs"), max_items=64)
        checks.each(
            f"{path}.tls.certificateRefs",
            refs,
            lambda where, ref: _object_reference(checks, where, ref, kind_required=False),
        )
        options = checks.mapping(f"{path}.tls.options", tls.get("options"))
        mode = tls.get("mode") or "Terminate"
        checks.rule(
            f"{path}.tls",
            mode != "Terminate" or bool(refs) or bool(options),
            TERMINATE_NEEDS_CERTIFICATES,
            "object",
        )
    allowed = checks.mapping(f"{path}.allowedRoutes", listener.get("allowedRoutes"))
    namespaces = checks.mapping(f"{path}.allowedRoutes.namespaces", allowed.get("namespaces"))
    checks.string(
        f"{path}.allowedRoutes.namespaces.from", namespaces.get("from"), enum=("All", "Selector", "Same")
    )
    checks.mapping(f"{path}.allowedRoutes.namespaces.selector", namespaces.get("selector"))
    kinds = checks.array(f"{path}.allowedRoutes.kinds", allowed.get("kinds"), max_items=8)
    checks.each(
        f"{path}.allowedRoutes.kinds", kinds, lambda where, kind: _route_group_kind(checks, where, kind)
    )


def _route_group_kind(checks: _Checks, path: str, kind: Mapping[str, Any]) -> None:
    checks.string(f"{path}.group", kind.get("group"), max_length=253, pattern=GROUP_PATTERN)
    checks.string(f"{path}.kind", kind.get("kind"), required=True, min_length=1, max_length=63, pattern=KIND)


def _listener_rules(checks: _Checks, listeners: list[Mapping[str, Any]]) -> None:
    """The CEL rules on ``spec.listeners`` (their fields are well typed by now)."""
    path = "spec.listeners"
    checks.rule(
        path,
        all(not ("tls" in ln and ln["protocol"] in ("HTTP", "TCP", "UDP")) for ln in listeners),
        TLS_FORBIDDEN,
    )
    checks.rule(
        path,
        all(
            ln["protocol"] != "HTTPS" or (ln.get("tls") or {}).get("mode", "Terminate") in ("", "Terminate")
            for ln in listeners
        ),
        HTTPS_TERMINATE,
    )
    checks.rule(
        path,
        all(ln["protocol"] != "TLS" or (ln.get("tls") or {}).get("mode") for ln in listeners),
        TLS_MODE_REQUIRED,
    )
    checks.rule(
        path,
        all(not (ln["protocol"] in ("TCP", "UDP") and ln.get("hostname")) for ln in listeners),
        HOSTNAME_FORBIDDEN,
    )
    names = [ln["name"] for ln in listeners]
    checks.rule(path, len(names) == len(set(names)), UNIQUE_NAMES)
    combos = [(ln["port"], ln["protocol"], ln.get("hostname")) for ln in listeners]
    checks.rule(path, len(combos) == len(set(combos)), UNIQUE_COMBINATION)


def _address(checks: _Checks, path: str, address: Mapping[str, Any]) -> None:
    type_ = address.get("type")
    checks.string(f"{path}.type", type_, min_length=1, max_length=253, pattern=ADDRESS_TYPE)
    value = address.get("value")
    checks.string(f"{path}.value", value, max_length=253)
    if type_ == "Hostname" and isinstance(value, str) and value:
        message = f"Hostname value must be empty or contain only valid characters (matching {HOSTNAME})"
        checks.rule(path, bool(_compiled(HOSTNAME).search(value)), message, "object")


# -- ReferenceGrant --------------------------------------------------------------------------------


def validate_reference_grant(obj: Mapping[str, Any]) -> list[str]:
    checks, spec = _start(obj)
    sources = checks.array("spec.from", spec.get("from"), required=True, min_items=1, max_items=16)
    checks.each("spec.from", sources, lambda path, entry: _grant_from(checks, path, entry))
    targets = checks.array("spec.to", spec.get("to"), required=True, min_items=1, max_items=16)
    checks.each("spec.to", targets, lambda path, entry: _grant_to(checks, path, entry))
    return capped(checks.problems)


def _grant_from(checks: _Checks, path: str, entry: Mapping[str, Any]) -> None:
    checks.string(f"{path}.group", entry.get("group"), required=True, max_length=253, pattern=GROUP_PATTERN)
    checks.string(f"{path}.kind", entry.get("kind"), required=True, min_length=1, max_length=63, pattern=KIND)
    checks.string(
        f"{path}.namespace",
        entry.get("namespace"),
        required=True,
        min_length=1,
        max_length=63,
        pattern=NAMESPACE,
    )


def _grant_to(checks: _Checks, path: str, entry: Mapping[str, Any]) -> None:
    checks.string(f"{path}.group", entry.get("group"), required=True, max_length=253, pattern=GROUP_PATTERN)
    checks.string(f"{path}.kind", entry.get("kind"), required=True, min_length=1, max_length=63, pattern=KIND)
    checks.string(f"{path}.name", entry.get("name"), min_length=1, max_length=253)
