"""What the API server's schema would refuse in the core's kinds (standalone mode has no API server).

First the JSON types of every field cpx reads (:mod:`cpx.builtin.typecheck`, the types of the
Kubernetes OpenAPI definitions), then, on well-typed objects only, the value rules of the fields
cpx reads, with messages in the API server's style
(``spec.ports[0].port: Invalid value: 0: must be between 1 and 65535``).  Any JSON value gets an
answer, never an exception.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from cpx.builtin.typecheck import (
    BOOLEAN,
    INT_OR_STRING,
    INTEGER,
    STRING,
    STRING_LIST,
    STRING_MAP,
    Schema,
    capped,
    key_shown,
    object_problems,
    shown,
)

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# ValidateEndpointSlice's limits.
_MAX_ENDPOINTS = 1000
_MAX_ADDRESSES = 100
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")

SERVICE_SCHEMA: Schema = {
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "type": STRING,
                "externalName": STRING,
                "clusterIP": STRING,
                "clusterIPs": STRING_LIST,
                "selector": STRING_MAP,
                "ports": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": STRING,
                            "port": INTEGER,
                            "targetPort": INT_OR_STRING,
                            "nodePort": INTEGER,
                            "protocol": STRING,
                            "appProtocol": STRING,
                        },
                    },
                },
            },
        }
    }
}
ENDPOINT_SLICE_SCHEMA: Schema = {
    "properties": {
        "addressType": STRING,
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": STRING, "port": INTEGER, "protocol": STRING, "appProtocol": STRING},
            },
        },
        "endpoints": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "addresses": STRING_LIST,
                    "conditions": {
                        "type": "object",
                        "properties": {"ready": BOOLEAN, "serving": BOOLEAN, "terminating": BOOLEAN},
                    },
                    "hostname": STRING,
                    "nodeName": STRING,
                    "zone": STRING,
                },
            },
        },
    }
}
SECRET_SCHEMA: Schema = {
    "properties": {"type": STRING, "data": STRING_MAP, "stringData": STRING_MAP, "immutable": BOOLEAN}
}
NAMESPACE_SCHEMA: Schema = {
    "properties": {"spec": {"type": "object", "properties": {"finalizers": STRING_LIST}}}
}


def _port_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _check_port_name(where: str, name: str | None, problems: list[str]) -> None:
    if name is None:
        return
    if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
        problems.append(f"{where}.name: Invalid value: {shown(name)}: must be a DNS-1123 label")


def validate_service(obj: Mapping[str, Any]) -> list[str]:
    problems = object_problems(obj, SERVICE_SCHEMA)
    if problems:
        return problems
    spec = obj.get("spec")
    if spec is None:
        return ["spec: Required value"]
    kind = spec.get("type") or "ClusterIP"
    if kind not in _SERVICE_TYPES:
        problems.append(
            f"spec.type: Unsupported value: {shown(kind)}: supported values: {', '.join(_SERVICE_TYPES)}"
        )
    if kind == "ExternalName" and not spec.get("externalName"):
        problems.append("spec.externalName: Required value")
    ports: list[Any] | None = spec.get("ports")
    if ports is None and kind != "ExternalName":
        problems.append("spec.ports: Required value")
    for i, port in enumerate(ports or ()):
        where = f"spec.ports[{i}]"
        if not _port_number(port.get("port")):
            problems.append(
                f"{where}.port: Invalid value: {shown(port.get('port'))}: must be between 1 and 65535"
            )
        _check_port_name(where, port.get("name"), problems)
        if len(ports or ()) > 1 and not port.get("name"):
            problems.append(f"{where}.name: Required value: when more than one port is defined")
        target = port.get("targetPort")
        if target is not None and not (_port_number(target) or (isinstance(target, str) and target)):
            problems.append(f"{where}.targetPort: Invalid value: {shown(target)}")
        if (port.get("protocol") or "TCP") not in _PROTOCOLS:
            problems.append(f"{where}.protocol: Unsupported value: {shown(port.get('protocol'))}")
    names = [p.get("name") for p in ports or () if p.get("name")]
    if len(set(names)) != len(names):
        problems.append("spec.ports: Duplicate value: port names must be unique")
    return capped(problems)


def validate_endpoint_slice(obj: Mapping[str, Any]) -> list[str]:
    problems = object_problems(obj, ENDPOINT_SLICE_SCHEMA)
    if problems:
        return problems
    address_type = obj.get("addressType")
    if address_type not in _ADDRESS_TYPES:
        problems.append(
            f"addressType: Unsupported value: {shown(address_type)}: "
            f"supported values: {', '.join(_ADDRESS_TYPES)}"
        )
    for i, port in enumerate(obj.get("ports") or ()):
        where = f"ports[{i}]"
        if port.get("port") is not None and not _port_number(port.get("port")):
            problems.append(
                f"{where}.port: Invalid value: {shown(port.get('port'))}: must be between 1 and 65535"
            )
        _check_port_name(where, port.get("name"), problems)
    endpoints = obj.get("endpoints")
    if endpoints is None:
        problems.append("endpoints: Required value")
    if len(endpoints or ()) > _MAX_ENDPOINTS:
        problems.append(
            f"endpoints: Too many: {len(endpoints or ())}: must have at most {_MAX_ENDPOINTS} items"
        )
    for i, endpoint in enumerate(endpoints or ()):
        addresses = endpoint.get("addresses") or []
        if not addresses:
            problems.append(f"endpoints[{i}].addresses: Required value: must contain at least 1 address")
        elif len(addresses) > _MAX_ADDRESSES:
            where = f"endpoints[{i}].addresses"
            problems.append(f"{where}: Too many: {len(addresses)}: must have at most {_MAX_ADDRESSES} items")
        for j, address in enumerate(addresses[:_MAX_ADDRESSES]):
            detail = _address_problem(address_type, address)
            if detail:
                problems.append(f"endpoints[{i}].addresses[{j}]: Invalid value: {shown(address)}: {detail}")
    return capped(problems)


@functools.lru_cache(maxsize=4096)  # slices of one Service, or of one node, repeat addresses
def _address_problem(address_type: Any, address: str) -> str | None:
    """ValidateEndpointSlice's rule: each address is of the slice's addressType."""
    if address_type == "FQDN":
        if len(address) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(address):
            return "must be a valid DNS-1123 subdomain"
        return None
    kind = ipaddress.IPv4Address if address_type == "IPv4" else ipaddress.IPv6Address
    try:
        kind(address)
    except ValueError:
        return f"must be a valid {address_type} address"
    return None


def validate_secret(obj: Mapping[str, Any]) -> list[str]:
    problems = object_problems(obj, SECRET_SCHEMA)
    if problems:
        return problems
    for key, value in (obj.get("data") or {}).items():
        if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
            problems.append(
                f"data[{key_shown(key)}]: Invalid value: {shown(key)}: a valid config key must consist "
                "of alphanumeric characters, '-', '_' or '.'"
            )
            continue
        try:
            base64.b64decode(value or "", validate=True)
        except (binascii.Error, ValueError):
            problems.append(f"data[{key}]: Invalid value: illegal base64 data")
    return capped(problems)


def validate_namespace(obj: Mapping[str, Any]) -> list[str]:
    return object_problems(obj, NAMESPACE_SCHEMA)
