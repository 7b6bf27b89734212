"""Gateway listener rules that need no build state: Envoy ports and listener names, the route kinds
a protocol admits, and ``allowedRoutes.namespaces``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cpx.dag import Protocol

from cpx_gatewayapi.kinds import GROUP
from cpx_gatewayapi.model import GRPCROUTE_KIND, HTTPROUTE_KIND, TCPROUTE_KIND, TLSROUTE_KIND

HTTP, HTTPS, TLS, TCP = "HTTP", "HTTPS", "TLS", "TCP"
PROTOCOLS = (HTTP, HTTPS, TLS, TCP)
TERMINATE, PASSTHROUGH = "Terminate", "Passthrough"

# The route kinds each protocol can carry (Contour's, except TCPRoute on TLS listeners, which the
# conformance suite expects refused with InvalidRouteKinds); the defaults when allowedRoutes.kinds
# is empty.  In this order in supportedKinds.
ROUTE_KINDS: Mapping[str, tuple[str, ...]] = {
    HTTP: (HTTPROUTE_KIND, GRPCROUTE_KIND),
    HTTPS: (HTTPROUTE_KIND, GRPCROUTE_KIND),
    TLS: (TLSROUTE_KIND,),
    TCP: (TCPROUTE_KIND,),
}

# Protocols that can share one Envoy port (one listener): HTTP alone; HTTPS and TLS by SNI; TCP alone.
PORT_FAMILY = {HTTP: "http", HTTPS: "https", TLS: "https", TCP: "tcp"}
DAG_PROTOCOL = {"http": Protocol.HTTP, "https": Protocol.HTTPS, "tcp": Protocol.TCP}

# The label every Namespace carries (set by the API server; not always written in manifests).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def envoy_port(port: int) -> int:
    """Contour's toContainerPort: +8000, wrapped above 65535, moved past the privileged ports."""
    mapped = port + 8000
    if mapped > 65535:
        mapped -= 65535
    if mapped <= 1023:
        mapped += 1023
    return mapped


def listener_name(family: str, port: int, address: str, default_address: str) -> str:
    """Contour's ``http-80`` / ``https-443``, with the bind address when it is not the default one."""
    name = f"{family}-{port}"
    if address == default_address:
        return name
    return f"{name}-{address.replace('.', '_').replace(':', '_')}"


def route_kinds(protocol: str, allowed: Any) -> tuple[tuple[str, ...], list[str]]:
    """The listener's supportedKinds and the ``allowedRoutes.kinds`` entries it cannot carry (shown)."""
    valid = ROUTE_KINDS.get(protocol, ())
    if not isinstance(allowed, list) or not allowed:
        return valid, []
    kinds: list[str] = []
    refused: list[str] = []
    for item in allowed:
        entry = item if isinstance(item, Mapping) else {}
        group, kind = entry.get("group", GROUP), str(entry.get("kind") or "")
        if group == GROUP and kind in valid:
            if kind not in kinds:
                kinds.append(kind)
        else:
            refused.append(f"{group}/{kind}" if group else kind)
    return tuple(k for k in valid if k in kinds), refused


NamespacePredicate = Callable[[str, Mapping[str, str]], bool]


def namespace_admission(gateway_namespace: str, allowed_routes: Any) -> NamespacePredicate:
    """``allowedRoutes.namespaces``: Same (the default), All, or Selector on the namespace's labels."""
    namespaces = allowed_routes.get("namespaces") if isinstance(allowed_routes, Mapping) else None
    namespaces = namespaces if isinstance(namespaces, Mapping) else {}
    origin = namespaces.get("from") or "Same"
    if origin == "All":
        return lambda _name, _labels: True
    if origin == "Selector":
        selector = namespaces.get("selector")
        return lambda name, labels: selector_matches(selector, {NAMESPACE_NAME_LABEL: name, **labels})
    if origin == "Same":
        return lambda name, _labels: name == gateway_namespace
    return lambda _name, _labels: False


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels and matchExpressions all hold.  An invalid selector
    (unknown operator, values where none belong) matches nothing, as LabelSelectorAsSelector fails."""
    if not isinstance(selector, Mapping):
        return False
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        return False
    if any(labels.get(key) != value for key, value in match_labels.items()):
        return False
    expressions = selector.get("matchExpressions") or []
    return isinstance(expressions, list) and all(_expression_holds(e, labels) for e in expressions)


def _expression_holds(expression: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(values, list):
        return False
    if operator == "In":
        return bool(values) and labels.get(str(key)) in values
    if operator == "NotIn":
        return bool(values) and labels.get(str(key)) not in values
    if operator == "Exists":
        return not values and key in labels
    if operator == "DoesNotExist":
        return not values and key not in labels
    return False


def hostname_of(listener: Mapping[str, Any]) -> str | None:
    value = listener.get("hostname")
    return value if isinstance(value, str) and value else None


def ordered_by_age(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Oldest first, then by namespace/name: who keeps a contested port (as Contour orders routes)."""

    def age(obj: Mapping[str, Any]) -> tuple[str, str, str]:
        meta = obj.get("metadata") or {}
        return (str(meta.get("creationTimestamp") or ""), str(meta.get("namespace")), str(meta.get("name")))

    return sorted(objects, key=age)
