"""From a Kubernetes Service and a backend port reference to a DAG :class:`ServicePort`.

What Contour's ``EnsureService`` / ``LookupService`` and the Service annotations do
(``internal/dag/accessors.go``, ``internal/dag/cache.go``, ``internal/annotation/annotations.go``):
resolve the port by number or name, refuse non-TCP ports, read the upstream protocol from
``appProtocol`` or the ``projectcontour.io/upstream-protocol.*`` annotations, the circuit-breaker
annotations, and the ExternalName target (refusing anything that points back at Envoy's host).

Processors call :func:`lookup_service_port` (or :func:`service_port` with a Service they already
have) and put a :class:`ServicePortError`'s message into the referring object's status.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Callable, Mapping
from typing import Any

from cpx import objects as k8s
from cpx.dag.nodes import CircuitBreakers, ServicePort, UpstreamProtocol
from cpx.source import NotFoundError, SourceCache

Warn = Callable[[str], None]

ANNOTATION_PREFIX = "projectcontour.io/"
# Annotation suffix -> CircuitBreakers field.
CIRCUIT_BREAKER_ANNOTATIONS = {
    "max-connections": "max_connections",
    "max-pending-requests": "max_pending_requests",
    "max-requests": "max_requests",
    "max-retries": "max_retries",
    "per-host-max-connections": "per_host_max_connections",
}
# Contour reads these in this order, so a port listed under several annotations gets the last one.
UPSTREAM_PROTOCOL_ANNOTATIONS = (
    ("projectcontour.io/upstream-protocol.h2", UpstreamProtocol.H2),
    ("projectcontour.io/upstream-protocol.h2c", UpstreamProtocol.H2C),
    ("projectcontour.io/upstream-protocol.tls", UpstreamProtocol.TLS),
)
# `spec.ports[].appProtocol` values Contour understands; any other value means plain HTTP/1.1.
APP_PROTOCOLS = {
    "kubernetes.io/h2c": UpstreamProtocol.H2C,
    "kubernetes.io/ws": UpstreamProtocol.HTTP1,
    "http": UpstreamProtocol.HTTP1,
    "https": UpstreamProtocol.TLS,
}
# Contour's blocklist plus the other names resolvers map to the loopback interface.
LOCALHOST_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "local.projectcontour.io", "ip6-localhost", "ip6-loopback"}
)
MAX_UINT32 = 2**32 - 1
_NO_CIRCUIT_BREAKERS = CircuitBreakers()


class ServicePortError(ValueError):
    """A backend reference cannot be resolved; the message is meant for the referrer's status."""


def _q(text: str) -> str:
    """Go's %q, which Contour's messages use."""
    return json.dumps(text, ensure_ascii=False)


def lookup_service_port(
    source: SourceCache,
    namespace: str,
    name: str,
    port: int | str,
    *,
    allow_external_name: bool = True,
    warn: Warn | None = None,
) -> ServicePort:
    """Look the Service up (recording the reference for rebuilds) and resolve ``port`` on it."""
    try:
        service = source.lookup_service(namespace, name)
    except NotFoundError as err:
        raise ServicePortError(str(err)) from None
    return service_port(service, port, allow_external_name=allow_external_name, warn=warn)


def service_port(
    service: Mapping[str, Any],
    port: int | str,
    *,
    allow_external_name: bool = True,
    warn: Warn | None = None,
) -> ServicePort:
    """The DAG view of one port of ``service``.

    ``port`` is a Service port number or a Service port name.  ``warn`` receives remarks about
    ignored annotation values (Contour ignores them silently).  ``allow_external_name`` is
    Contour's ``enableExternalNameService``.
    """
    spec = _find_port(service, port)
    return ServicePort(
        namespace=k8s.namespace_of(service),
        name=k8s.name_of(service),
        port=int(spec["port"]),
        port_name=str(spec.get("name") or ""),
        # The API server defaults targetPort to port; files read in standalone mode may omit it.
        target_port=spec.get("targetPort", int(spec["port"])),
        external_name=external_name(service, allow=allow_external_name),
        protocol=upstream_protocol(service, spec),
        circuit_breakers=circuit_breakers(service, warn),
    )


def _service_ref(service: Mapping[str, Any]) -> str:
    return f"{k8s.namespace_of(service)}/{k8s.name_of(service)}"


def _find_port(service: Mapping[str, Any], port: int | str) -> Mapping[str, Any]:
    """Contour's LookupService: first port whose number or name matches; TCP only."""
    text = str(port)
    number = int(text) if text.isascii() and text.isdigit() else None
    for spec in (service.get("spec") or {}).get("ports") or []:
        by_number = number is not None and spec.get("port") == number
        by_name = bool(text) and spec.get("name") == text
        if not (by_number or by_name):
            continue
        protocol = spec.get("protocol") or "TCP"
        if protocol != "TCP":
            raise ServicePortError(f"unsupported service protocol {_q(protocol)}")
        return spec  # type: ignore[no-any-return]
    raise ServicePortError(f"port {_q(text)} on service {_q(_service_ref(service))} not matched")


def external_name(service: Mapping[str, Any], *, allow: bool = True) -> str | None:
    """The DNS name of an ExternalName Service (None for other types), refusing localhost."""
    spec = service.get("spec") or {}
    if spec.get("type") != "ExternalName" or not spec.get("externalName"):
        return None
    name = str(spec["externalName"])
    ref = _service_ref(service)
    if not allow:
        raise ServicePortError(
            f"{ref} is an ExternalName service, these are not currently enabled. "
            "See the config.enableExternalNameService config file setting"
        )
    if points_to_localhost(name):
        raise ServicePortError(
            f"{ref} is an ExternalName service that points to localhost, this is not allowed"
        )
    return name


def points_to_localhost(name: str) -> bool:
    """Whether Envoy would connect to its own host (or link-local metadata services) for ``name``.

    An ExternalName pointing there would let any Service author reach Envoy's admin interface or
    the node's metadata endpoint (GHSA-5ph6-qq5x-7jwc); a DNS lookup per build would be too slow,
    so names and literal addresses are checked instead.
    """
    host = name.strip().lower().rstrip(".").strip("[]")
    if host in LOCALHOST_NAMES or host.endswith(".localhost"):
        return True
    address = _parse_address(host)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_link_local or address.is_unspecified


def _parse_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    # Resolvers also accept the legacy IPv4 spellings (127.1, 2130706433, 0x7f.0.0.1).
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def upstream_protocol(service: Mapping[str, Any], port: Mapping[str, Any]) -> UpstreamProtocol:
    """``appProtocol`` when set (only it), else the upstream-protocol annotations by name or number."""
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        return APP_PROTOCOLS.get(str(app_protocol), UpstreamProtocol.HTTP1)
    annotations = k8s.annotations_of(service)
    if not annotations:
        return UpstreamProtocol.HTTP1
    by_port: dict[str, UpstreamProtocol] = {}
    for key, protocol in UPSTREAM_PROTOCOL_ANNOTATIONS:
        for item in str(annotations.get(key, "")).split(","):
            if item.strip():
                by_port[item.strip()] = protocol
    name = str(port.get("name") or "")
    if name and name in by_port:
        return by_port[name]
    return by_port.get(str(port.get("port")), UpstreamProtocol.HTTP1)


def circuit_breakers(service: Mapping[str, Any], warn: Warn | None = None) -> CircuitBreakers:
    """The ``projectcontour.io/max-*`` annotations; 0, absent or invalid values mean "not set"."""
    annotations = k8s.annotations_of(service)
    if not annotations:
        return _NO_CIRCUIT_BREAKERS
    values: dict[str, int] = {}
    for suffix, field in CIRCUIT_BREAKER_ANNOTATIONS.items():
        key = ANNOTATION_PREFIX + suffix
        if key not in annotations:
            continue
        value = _parse_uint32(str(annotations[key]))
        if value is None:
            if warn is not None:
                warn(
                    f"ignoring annotation {key}: {_q(str(annotations[key]))} on service "
                    f"{_q(_service_ref(service))} is not an unsigned 32-bit integer"
                )
            continue
        if value > 0:
            values[field] = value
    return CircuitBreakers(**values)


def _parse_uint32(text: str) -> int | None:
    """Go's strconv.ParseUint(s, 10, 32): ASCII digits only, within uint32."""
    if not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value <= MAX_UINT32 else None
