"""From a Kubernetes Service and a backend port reference to a DAG :class:`ServicePort`.

What Contour's ``EnsureService`` / ``LookupService`` and the Service annotations do
(``internal/dag/accessors.go``, ``internal/dag/cache.go``, ``internal/annotation/annotations.go``):
resolve the port by number or name, refuse non-TCP ports, read the upstream protocol from
``appProtocol`` or the ``projectcontour.io/upstream-protocol.*`` annotations, the circuit-breaker
annotations, and the ExternalName target (subject to the source cache's
:class:`~cpx.sources.externalname.ExternalNamePolicy`, so the same rule holds for every kind).

Processors call :func:`lookup_service_port` (or :func:`service_port` with a Service they already
have) and put a :class:`ServicePortError`'s message into the referring object's status.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from cpx import objects as k8s
from cpx.dag.nodes import CircuitBreakers, ServicePort, UpstreamProtocol
from cpx.sources.cache import NotFoundError
from cpx.sources.externalname import ExternalNamePolicy
from cpx.sources.view import Lookups, SourceView

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
MAX_UINT32 = 2**32 - 1
_NO_CIRCUIT_BREAKERS = CircuitBreakers()
_REFUSE_EXTERNAL_NAMES = ExternalNamePolicy(enabled=False)


class ServicePortError(ValueError):
    """A backend reference cannot be resolved; the message is meant for the referrer's status."""


def _q(text: str) -> str:
    """Go's %q, which Contour's messages use."""
    return json.dumps(text, ensure_ascii=False)


def lookup_service_port(
    source: SourceView,
    namespace: str,
    name: str,
    port: int | str,
    *,
    warn: Warn | None = None,
) -> ServicePort:
    """Look the Service up (recording the reference for rebuilds) and resolve ``port`` on it.

    An ExternalName Service is checked against ``source.external_names`` (the core's
    ``--enable-external-name-service`` and loopback rule); since DNS answers change without any
    object changing, the lookup is then recorded as volatile (re-checked at every build).
    """
    try:
        service = source.lookup_service(namespace, name)
    except NotFoundError as err:
        raise ServicePortError(str(err)) from None
    if _is_external_name(service):
        source.depend_on(Lookups(volatile=True))
    return service_port(service, port, external_names=source.external_names, warn=warn)


def service_port(
    service: Mapping[str, Any],
    port: int | str,
    *,
    external_names: ExternalNamePolicy = _REFUSE_EXTERNAL_NAMES,
    warn: Warn | None = None,
) -> ServicePort:
    """The DAG view of one port of ``service``.

    ``port`` is a Service port number or a Service port name.  ``warn`` receives remarks about
    ignored annotation values (Contour ignores them silently).  ``external_names`` decides
    whether an ExternalName Service may be used (by default it may not).
    """
    spec = _find_port(service, port)
    meta = k8s.meta(service)
    number = int(spec["port"])
    target = external_name(service, external_names)  # may refuse: before any warning, as ever
    if not meta.get("annotations") and spec.get("appProtocol") is None:
        # What most Services have: nothing that sets a protocol or circuit breakers.
        protocol, breakers = UpstreamProtocol.HTTP1, _NO_CIRCUIT_BREAKERS
    else:
        protocol, breakers = upstream_protocol(service, spec), circuit_breakers(service, warn)
    return ServicePort(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        port=number,
        port_name=str(spec.get("name") or ""),
        # The API server defaults targetPort to port; files read in standalone mode may omit it.
        target_port=spec.get("targetPort", number),
        external_name=target,
        protocol=protocol,
        circuit_breakers=breakers,
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


def _is_external_name(service: Mapping[str, Any]) -> bool:
    spec = service.get("spec") or {}
    return spec.get("type") == "ExternalName" and bool(spec.get("externalName"))


def external_name(
    service: Mapping[str, Any], policy: ExternalNamePolicy = _REFUSE_EXTERNAL_NAMES
) -> str | None:
    """The DNS name of an ExternalName Service (None for other types), if ``policy`` allows it."""
    if not _is_external_name(service):
        return None
    name = str(service["spec"]["externalName"])
    refusal = policy.refusal(_service_ref(service), name)
    if refusal is not None:
        raise ServicePortError(refusal)
    return name


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
