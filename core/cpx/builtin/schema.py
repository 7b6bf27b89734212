"""What the API server's schema would refuse in the core's kinds (standalone mode has no API server).

Only the fields cpx reads are checked, with messages in the API server's style
(``spec.ports[0].port: Invalid value: 0: must be between 1 and 65535``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")


def _port_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _check_port_name(where: str, name: Any, problems: list[str]) -> None:
    if name is None:
        return
    if not isinstance(name, str) or len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
        problems.append(f"{where}.name: Invalid value: {name!r}: must be a DNS-1123 label")


def validate_service(obj: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return ["spec: Required value"]
    kind = spec.get("type", "ClusterIP")
    if kind not in _SERVICE_TYPES:
        problems.append(
            f"spec.type: Unsupported value: {kind!r}: supported values: {', '.join(_SERVICE_TYPES)}"
        )
    if kind == "ExternalName" and not spec.get("externalName"):
        problems.append("spec.externalName: Required value")
    ports = spec.get("ports")
    if ports is None and kind != "ExternalName":
        problems.append("spec.ports: Required value")
    if ports is not None and not isinstance(ports, list):
        return [*problems, "spec.ports: Invalid value: must be a list"]
    names = [p.get("name") for p in ports or () if isinstance(p, Mapping)]
    for i, port in enumerate(ports or ()):
        where = f"spec.ports[{i}]"
        if not isinstance(port, Mapping):
            problems.append(f"{where}: Invalid value: must be an object")
            continue
        if not _port_number(port.get("port")):
            problems.append(f"{where}.port: Invalid value: {port.get('port')!r}: must be between 1 and 65535")
        _check_port_name(where, port.get("name"), problems)
        if len(ports or ()) > 1 and not port.get("name"):
            problems.append(f"{where}.name: Required value: when more than one port is defined")
        target = port.get("targetPort")
        if target is not None and not (_port_number(target) or (isinstance(target, str) and target)):
            problems.append(f"{where}.targetPort: Invalid value: {target!r}")
        if port.get("protocol", "TCP") not in _PROTOCOLS:
            problems.append(f"{where}.protocol: Unsupported value: {port.get('protocol')!r}")
    if len({n for n in names if n}) != len([n for n in names if n]):
        problems.append("spec.ports: Duplicate value: port names must be unique")
    return problems


def validate_endpoint_slice(obj: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    address_type = obj.get("addressType")
    if address_type not in _ADDRESS_TYPES:
        problems.append(
            f"addressType: Unsupported value: {address_type!r}: supported values: {', '.join(_ADDRESS_TYPES)}"
        )
    for i, port in enumerate(obj.get("ports") or ()):
        where = f"ports[{i}]"
        if not isinstance(port, Mapping):
            problems.append(f"{where}: Invalid value: must be an object")
            continue
        if port.get("port") is not None and not _port_number(port.get("port")):
            problems.append(f"{where}.port: Invalid value: {port.get('port')!r}: must be between 1 and 65535")
        _check_port_name(where, port.get("name"), problems)
    endpoints = obj.get("endpoints")
    if endpoints is None:
        problems.append("endpoints: Required value")
    for i, endpoint in enumerate(endpoints or ()):
        addresses = endpoint.get("addresses") if isinstance(endpoint, Mapping) else None
        if not isinstance(addresses, list) or not addresses:
            problems.append(f"endpoints[{i}].addresses: Required value: must contain at least 1 address")
    return problems


def validate_secret(obj: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    data = obj.get("data") or {}
    if not isinstance(data, Mapping):
        return ["data: Invalid value: must be a map of base64 strings"]
    for key, value in data.items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            problems.append(f"data[{key}]: Invalid value: illegal base64 data")
    return problems
