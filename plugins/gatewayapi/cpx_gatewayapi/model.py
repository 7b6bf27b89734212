"""What the Gateway side of a build hands to the route side, and what comes back.

``gateways.resolve`` reads GatewayClasses and Gateways and returns a :class:`Resolution`: every
Gateway of one of our classes with each of its spec listeners, valid or not (a route attached to
an invalid listener still counts in ``attachedRoutes``).  The route processors attach routes to
those listeners and return :class:`Attachments`; ``gateways.report`` then writes the GatewayClass
and Gateway statuses.  Records are frozen: a build never edits what another step produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import attrs
from cpx import ObjectKey
from cpx.dag import AuthorityCheck, DownstreamValidation, Secret

from cpx_gatewayapi.kinds import GROUP

# Route kinds, by name (the group is always gateway.networking.k8s.io).
HTTPROUTE_KIND = "HTTPRoute"
GRPCROUTE_KIND = "GRPCRoute"
TLSROUTE_KIND = "TLSRoute"
TCPROUTE_KIND = "TCPRoute"


@attrs.frozen
class Verdict:
    """One status condition's outcome: True/False, its reason and message."""

    ok: bool
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class ListenerStatus:
    """What ``status.listeners[]`` says of one listener, apart from attachedRoutes."""

    accepted: Verdict
    programmed: Verdict
    resolved_refs: Verdict
    conflicted: Verdict  # ok=True: conflicted (reason HostnameConflict / ProtocolConflict)
    supported_kinds: tuple[str, ...]
    # OverlappingTLSConfig, a condition set only when True (another TLS listener on the port
    # matches some of the same hostnames).
    overlapping_tls: Verdict | None = None


@attrs.frozen(kw_only=True)
class GatewayListener:
    """One ``spec.listeners[]`` entry of a Gateway, as the route side needs it."""

    gateway: ObjectKey
    name: str  # the listener's name: what a parentRef's sectionName selects
    port: int  # the Gateway's port: what a parentRef's port selects, and redirects keep
    protocol: str  # HTTP | HTTPS | TLS | TCP (as written)
    hostname: str | None  # None: any host
    tls_mode: str | None  # Terminate | Passthrough (HTTPS/TLS), else None
    # The route kinds admitted (supportedKinds): allowedRoutes.kinds' valid subset, or the
    # protocol's defaults.
    kinds: frozenset[str]
    # Whether a route in a namespace (name, labels) may attach: allowedRoutes.namespaces.
    admits_namespace: Callable[[str, Mapping[str, str]], bool] = attrs.field(eq=False, repr=False)
    # Where Envoy serves it: the DAG listener the routes go on (None when the listener is not
    # programmed: conflicted, unsupported, bad certificate...; routes still attach and count).
    dag_listener: str | None
    address: str
    envoy_port: int
    secret: Secret | None = None  # HTTPS / TLS Terminate: the certificate to serve
    # HTTPS Terminate: the client certificate validation of the Gateway's ``tls.frontend``.
    client_validation: DownstreamValidation | None = None
    # HTTPS: which Hosts a connection whose SNI chose one of its hosts may ask for (421 for the
    # others): its hostname, minus the more specific hostnames of the other listeners on its port.
    authority_check: AuthorityCheck | None = None
    # Its status conditions (None only in records built by hand, e.g. in tests).
    status: ListenerStatus | None = None

    @property
    def programmed(self) -> bool:
        return self.dag_listener is not None

    @property
    def accepted(self) -> bool:
        """Whether routes may attach (conflicted and unsupported listeners take none)."""
        return self.status is None or self.status.accepted.ok


@attrs.frozen(kw_only=True)
class ResolvedGateway:
    """A Gateway of one of our GatewayClasses."""

    key: ObjectKey
    generation: int
    controller_name: str
    listeners: tuple[GatewayListener, ...]  # in spec order, every one of them
    # Why the Gateway as a whole is not accepted (e.g. UnsupportedAddress); None: accepted.
    problem: Verdict | None = None
    # status.addresses: (type, value) pairs.
    addresses: tuple[tuple[str, str], ...] = ()

    @property
    def accepted(self) -> bool:
        return self.problem is None

    def listener(self, name: str) -> GatewayListener | None:
        return next((listener for listener in self.listeners if listener.name == name), None)


@attrs.frozen
class Resolution:
    """Every Gateway this build serves, by key."""

    gateways: Mapping[ObjectKey, ResolvedGateway]
    # Our GatewayClasses and whether each is accepted (the reason why not).
    classes: Mapping[ObjectKey, Verdict] = attrs.field(factory=dict)

    def gateway(self, namespace: str, name: str) -> ResolvedGateway | None:
        return self.gateways.get(ObjectKey(GROUP, "Gateway", namespace, name))

    def __iter__(self) -> Iterator[ResolvedGateway]:
        return iter(self.gateways.values())


@attrs.define
class Attachments:
    """Routes Accepted per Gateway listener: ``status.listeners[].attachedRoutes``."""

    counts: dict[tuple[ObjectKey, str], int] = attrs.field(factory=dict)

    def add(self, listener: GatewayListener) -> None:
        key = (listener.gateway, listener.name)
        self.counts[key] = self.counts.get(key, 0) + 1

    def count(self, listener: GatewayListener) -> int:
        return self.counts.get((listener.gateway, listener.name), 0)
