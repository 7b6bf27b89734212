"""The checks the API server makes on a networking.k8s.io/v1 Ingress (for standalone mode).

Follows ``pkg/apis/networking/validation`` (ValidateIngressCreate) and its messages, so that a
manifest cpx refuses is one ``kubectl apply`` would refuse too.  Problems read like
``spec.rules[0].http.paths[1].pathType: Unsupported value: "Foo": supported values: ...``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from cpx import capped, json_type, metadata_problems, must_be, shown

PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_WILDCARD_SUBDOMAIN = re.compile(rf"\*\.{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_PORT_NAME = re.compile(r"[-a-z0-9]+")
_ANNOTATION_CLASS = "kubernetes.io/ingress.class"


def _required(field: str, detail: str = "") -> str:
    return f"{field}: Required value" + (f": {detail}" if detail else "")


def _invalid(field: str, value: Any, detail: str) -> str:
    return f"{field}: Invalid value: {shown(value)}: {detail}"


def _string(value: Any, field: str, problems: list[str]) -> str | None:
    """The value when it is a string; otherwise a type problem (None counts as absent)."""
    if value is None or isinstance(value, str):
        return value
    problems.append(must_be(field, value, "string"))
    return None


def _subdomain_problems(value: str) -> list[str]:
    out = []
    if len(value) > 253:
        out.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        out.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return out


def _host_problems(value: str) -> list[str]:
    if "*" in value:
        if len(value) > 253 or not _WILDCARD_SUBDOMAIN.fullmatch(value):
            return ["a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain"]
        return []
    return _subdomain_problems(value)


def _port_name_problems(value: str) -> list[str]:
    out = []
    if len(value) > 15:
        out.append("must be no more than 15 characters")
    if not _PORT_NAME.fullmatch(value):
        out.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        out.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", value):
        out.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        out.append("must not begin or end with a hyphen")
    return out


def _mapping(value: Any, field: str, problems: list[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(must_be(field, value, "object"))
        return {}
    return value


def _list(value: Any, field: str, problems: list[str]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(must_be(field, value, "array"))
        return []
    return value


def _backend(backend: Any, field: str, problems: list[str]) -> None:
    backend = _mapping(backend, field, problems)
    service, resource = backend.get("service"), backend.get("resource")
    if service is not None and resource is not None:
        problems.append(_invalid(field, "", "cannot set both resource and service backends"))
    elif resource is not None:
        resource = _mapping(resource, f"{field}.resource", problems)
        for key in ("kind", "name"):
            if not resource.get(key):
                problems.append(_required(f"{field}.resource.{key}", f"{key} is required"))
    elif service is not None:
        _service_backend(service, field, problems)
    else:
        problems.append(_invalid(field, "", "resource or service backend is required"))


def _service_backend(service: Any, field: str, problems: list[str]) -> None:
    service = _mapping(service, f"{field}.service", problems)
    name = service.get("name")
    if not name:
        problems.append(_required(f"{field}.service.name"))
    elif not isinstance(name, str) or len(name) > 63 or not _DNS1035_LABEL.fullmatch(name):
        problems.append(
            _invalid(
                f"{field}.service.name",
                name,
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
            )
        )
    _service_port(service.get("port"), field, problems)


def _service_port(port: Any, field: str, problems: list[str]) -> None:
    port = _mapping(port, f"{field}.service.port", problems)
    port_name = _string(port.get("name"), f"{field}.service.port.name", problems)
    port_number = port.get("number")
    if port_name and port_number:
        problems.append(_invalid(field, "", "cannot set both port name & port number"))
    elif port_name:
        for msg in _port_name_problems(port_name):
            problems.append(_invalid(f"{field}.service.port.name", port_name, msg))
    elif port_number is not None and json_type(port_number) != "integer":
        problems.append(must_be(f"{field}.service.port.number", port_number, "integer"))
    elif port_number:
        is_int = isinstance(port_number, int) and not isinstance(port_number, bool)
        if not is_int or not 0 < port_number < 65536:
            message = "must be between 1 and 65535, inclusive"
            problems.append(_invalid(f"{field}.service.port.number", port_number, message))
    else:
        problems.append(_required(field, "port name or number is required"))


def _path(path: Any, field: str, problems: list[str]) -> None:
    path = _mapping(path, field, problems)
    path_type = _string(path.get("pathType"), f"{field}.pathType", problems)
    value = _string(path.get("path"), f"{field}.path", problems) or ""
    if path_type is None:
        if path.get("pathType") is None:
            problems.append(_required(f"{field}.pathType", "pathType must be specified"))
        return
    if path_type in ("Exact", "Prefix"):
        if not value.startswith("/"):
            problems.append(_invalid(f"{field}.path", value, "must be an absolute path"))
        for seq in _INVALID_PATH_SEQUENCES:
            if seq in value:
                problems.append(_invalid(f"{field}.path", value, f"must not contain '{seq}'"))
        for suffix in _INVALID_PATH_SUFFIXES:
            if value.endswith(suffix):
                problems.append(_invalid(f"{field}.path", value, f"cannot end with '{suffix}'"))
    elif path_type == "ImplementationSpecific":
        if value and not value.startswith("/"):
            problems.append(_invalid(f"{field}.path", value, "must be an absolute path"))
    else:
        supported = ", ".join(f'"{t}"' for t in PATH_TYPES)
        problems.append(
            f"{field}.pathType: Unsupported value: {shown(path_type)}: supported values: {supported}"
        )
    _backend(path.get("backend"), f"{field}.backend", problems)


# -- the fast path: whether a path (or backend) of the usual shape passes, in one call without
# building any field name; one that may not is checked again by _path, which words why.


def _path_passes(path: Any) -> bool:
    """True only where :func:`_path` finds no problem."""
    if type(path) is not dict:
        return False
    path_type, value = path.get("pathType"), path.get("path")
    if path_type in ("Exact", "Prefix"):  # (not a set: the value may be unhashable)
        # ("/." stands for "/./", "/../" and the suffixes, "%2" for "%2f" and "%2F": a valid path
        # holding one of them, e.g. "/.well-known", only takes the slow way.)
        if type(value) is not str or value[:1] != "/" or "//" in value or "/." in value or "%2" in value:
            return False
    elif path_type == "ImplementationSpecific":
        if value is not None and (type(value) is not str or (value and value[0] != "/")):
            return False
    else:
        return False
    return _backend_passes(path.get("backend"))


def _backend_passes(backend: Any) -> bool:
    """True only where :func:`_backend` finds no problem: a Service backend with a port number."""
    if type(backend) is not dict or backend.get("resource") is not None:
        return False
    service = backend.get("service")
    if type(service) is not dict:
        return False
    name, port = service.get("name"), service.get("port")
    if type(name) is not str or len(name) > 63 or not _DNS1035_LABEL.fullmatch(name):
        return False
    if type(port) is not dict:
        return False
    number = port.get("number")
    return type(number) is int and 0 < number < 65536 and port.get("name") is None


def _is_ip(host: str) -> bool:
    # An IPv4 address holds only digits and dots, an IPv6 one a colon: any other host is not one,
    # and need not raise (and catch) two ValueErrors in ipaddress.
    if ":" not in host and host.strip("0123456789."):
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _rule(rule: Any, field: str, problems: list[str]) -> None:
    rule = _mapping(rule, field, problems)
    host = _string(rule.get("host"), f"{field}.host", problems) or ""
    if host:
        if _is_ip(host):
            problems.append(_invalid(f"{field}.host", host, "must be a DNS name, not an IP address"))
        for msg in _host_problems(host):
            problems.append(_invalid(f"{field}.host", host, msg))
    if rule.get("http") is None:
        return  # http is optional: a rule with only a host routes nothing
    http = _mapping(rule["http"], f"{field}.http", problems)
    paths = _list(http.get("paths"), f"{field}.http.paths", problems)
    if not paths:
        problems.append(_required(f"{field}.http.paths"))
    for i, path in enumerate(paths):
        if not _path_passes(path):
            _path(path, f"{field}.http.paths[{i}]", problems)


def _tls(tls: Any, field: str, problems: list[str]) -> None:
    tls = _mapping(tls, field, problems)
    for i, host in enumerate(_list(tls.get("hosts"), f"{field}.hosts", problems)):
        if not isinstance(host, str):
            problems.append(must_be(f"{field}.hosts[{i}]", host, "string"))
            continue
        for msg in _host_problems(host):
            problems.append(_invalid(f"{field}.hosts[{i}]", host, msg))
    secret = _string(tls.get("secretName"), f"{field}.secretName", problems)
    if secret:
        for msg in _subdomain_problems(secret):
            problems.append(_invalid(f"{field}.secretName", secret, msg))


def validate(obj: Mapping[str, Any]) -> list[str]:
    """WatchSpec.validate: the problems the API server would refuse this Ingress for."""
    problems = metadata_problems(obj)
    if problems:
        return problems  # nothing below can trust metadata, nor the object itself
    meta = _mapping(obj.get("metadata"), "metadata", problems)
    name = meta.get("name")
    if not name:
        problems.append(_required("metadata.name"))
    else:
        for msg in _subdomain_problems(name):
            problems.append(_invalid("metadata.name", name, msg))
    spec = _mapping(obj.get("spec"), "spec", problems)
    rules = _list(spec.get("rules"), "spec.rules", problems)
    if not rules and spec.get("defaultBackend") is None:
        problems.append(_invalid("spec", rules, "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None and not _backend_passes(spec["defaultBackend"]):
        _backend(spec["defaultBackend"], "spec.defaultBackend", problems)
    for i, rule in enumerate(rules):
        _rule(rule, f"spec.rules[{i}]", problems)
    for i, tls in enumerate(_list(spec.get("tls"), "spec.tls", problems)):
        _tls(tls, f"spec.tls[{i}]", problems)
    class_name = _string(spec.get("ingressClassName"), "spec.ingressClassName", problems)
    if class_name is not None:
        for msg in _subdomain_problems(class_name):
            problems.append(_invalid("spec.ingressClassName", class_name, msg))
        annotations = meta.get("annotations")
        if isinstance(annotations, Mapping) and _ANNOTATION_CLASS in annotations:
            problems.append(
                _invalid(
                    f"annotations.{_ANNOTATION_CLASS}",
                    annotations[_ANNOTATION_CLASS],
                    "can not be set when the class field is also set",
                )
            )
    return capped(problems)
