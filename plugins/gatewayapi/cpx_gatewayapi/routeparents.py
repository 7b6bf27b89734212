"""Which listeners of a Gateway one parentRef of a route attaches to, or why none: the
gateway.networking.k8s.io route status steps (NoMatchingParent, NotAllowedByListeners,
NoMatchingListenerHostname)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from cpx import SourceView

from cpx_gatewayapi import hostnames
from cpx_gatewayapi.kinds import GROUP
from cpx_gatewayapi.model import GatewayListener, Resolution, ResolvedGateway

ACCEPTED = "Accepted"
NO_MATCHING_PARENT = "NoMatchingParent"
NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
# Contour's reason for a parent Gateway that is not accepted (the spec names none).
INVALID_GATEWAY = "InvalidGateway"


@attrs.frozen(kw_only=True)
class Attached:
    """What one parentRef came to: the listeners and each one's effective hostnames, or why not."""

    ref: Mapping[str, Any]
    gateway: ResolvedGateway
    listeners: tuple[tuple[GatewayListener, tuple[str, ...]], ...] = ()
    reason: str = ACCEPTED


def attach(
    kind: str,
    ref: Mapping[str, Any],
    gateway: ResolvedGateway,
    namespace: str,
    labels: Mapping[str, str],
    route_hostnames: Sequence[str],
) -> Attached:
    if not gateway.accepted:
        return Attached(ref=ref, gateway=gateway, reason=INVALID_GATEWAY)
    section, port = ref.get("sectionName"), ref.get("port")
    selected = [
        listener
        for listener in gateway.listeners
        if (section is None or listener.name == section) and (port is None or listener.port == port)
    ]
    if not selected:
        return Attached(ref=ref, gateway=gateway, reason=NO_MATCHING_PARENT)
    admitted = [
        listener
        for listener in selected
        # Conflicted or unsupported listeners take no routes; others do, programmed or not.
        if listener.accepted and kind in listener.kinds and listener.admits_namespace(namespace, labels)
    ]
    if not admitted:
        return Attached(ref=ref, gateway=gateway, reason=NOT_ALLOWED_BY_LISTENERS)
    found = []
    for listener in admitted:
        hosts = hostnames.intersect(listener.hostname, route_hostnames)
        if hosts:
            found.append((listener, tuple(hosts)))
    if not found:
        return Attached(ref=ref, gateway=gateway, reason=NO_MATCHING_LISTENER_HOSTNAME)
    return Attached(ref=ref, gateway=gateway, listeners=tuple(found))


def parents(
    spec: Mapping[str, Any], namespace: str, resolution: Resolution
) -> Iterator[tuple[Mapping[str, Any], ResolvedGateway]]:
    """The parentRefs naming one of our Gateways, each with it."""
    for ref in spec.get("parentRefs") or ():
        if not isinstance(ref, Mapping):
            continue
        if (ref.get("group") or GROUP) != GROUP or (ref.get("kind") or "Gateway") != "Gateway":
            continue
        gateway = resolution.gateway(str(ref.get("namespace") or namespace), str(ref.get("name") or ""))
        if gateway is not None:
            yield ref, gateway


def namespace_labels(source: SourceView, namespace: str) -> Mapping[str, str]:
    found = source.lookup_namespace(namespace)
    labels = dict(((found or {}).get("metadata") or {}).get("labels") or {})
    labels.setdefault("kubernetes.io/metadata.name", namespace)  # the API server always sets it
    return labels


def port_hostnames(resolution: Resolution) -> dict[str, list[str | None]]:
    """Per DAG listener, the hostnames of the programmed Gateway listeners it serves: who owns a
    name on a port (listener isolation)."""
    found: dict[str, list[str | None]] = {}
    for gateway in resolution:
        for listener in gateway.listeners:
            if listener.dag_listener is not None:
                found.setdefault(listener.dag_listener, []).append(listener.hostname)
    return found


def age(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """Sort key, oldest first, then by namespace/name: the spec's order of precedence among routes."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("namespace")), str(meta.get("name")))
