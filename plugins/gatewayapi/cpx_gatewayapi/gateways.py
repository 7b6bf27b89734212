"""GatewayClasses and Gateways: which are ours, their listeners in Envoy, and their status.

A GatewayClass is ours when its ``controllerName`` is ours; a Gateway is ours when its class is.
Each listener of an accepted Gateway is served on a DAG listener, one per (bind address, Envoy
port): the bind address is the Gateway's IPAddress in ``spec.addresses`` (else the default
address), the Envoy port Contour's mapping of the listener port (80 -> 8080).  Gateway listeners
on one port share that DAG listener (virtual hosts by hostname), and so does a DAG listener that
already exists there with the same protocol (the core's ``ingress_http`` / ``ingress_https``).

Listeners are checked in spec order, Gateways oldest first; each against those before it (the
first one wins, as in Contour): another port mapping to the same Envoy port, or a listener of
another protocol there, makes it PortUnavailable; within a Gateway, a listener on the same port
with a protocol that cannot share it is a ProtocolConflict, one with the same hostname a
HostnameConflict.  See docs/design/0022-gateway-api.md.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from cpx import ObjectKey, SourceView, blame, parse_status_addresses
from cpx.dag import DAG, AuthorityCheck, DownstreamValidation, Secret

from cpx_gatewayapi import conditions as cond
from cpx_gatewayapi import frontend_tls
from cpx_gatewayapi import listeners as ls
from cpx_gatewayapi.features import supported_features
from cpx_gatewayapi.gateway_tls import CertificateProblem, resolve_certificate
from cpx_gatewayapi.kinds import GATEWAY, GATEWAY_CLASS, GROUP
from cpx_gatewayapi.model import (
    Attachments,
    GatewayListener,
    ListenerStatus,
    Resolution,
    ResolvedGateway,
    Verdict,
)
from cpx_gatewayapi.settings import Settings

CLASS_ACCEPTED = Verdict(True, "Accepted", "GatewayClass has been accepted by the controller")
_NO_CONFLICT = Verdict(False, "NoConflicts", "No conflicts")
_REFS_RESOLVED = Verdict(True, "ResolvedRefs", "Listener references resolved")
_LISTENER_ACCEPTED = Verdict(True, "Accepted", "Listener accepted")
_LISTENER_PROGRAMMED = Verdict(True, "Programmed", "Listener programmed")
_INSECURE_FRONTEND = Verdict(
    True,
    "ConfigurationChanged",
    "Client certificate validation is AllowInsecureFallback: connections without a valid client "
    "certificate are accepted",
)


def resolve(dag: DAG, source: SourceView, settings: Settings) -> Resolution:
    """The Gateways of our accepted GatewayClasses, with a DAG listener for each programmable
    listener (``GatewayListener.dag_listener``)."""
    classes = _our_classes(source, settings)
    if not classes:
        return Resolution({})
    class_verdicts = {name: verdict for name, (_key, verdict) in classes.items()}
    ports = _PortTable.of(dag)
    gateways: dict[ObjectKey, ResolvedGateway] = {}
    for obj in ls.ordered_by_age(source.list(GATEWAY)):
        spec = obj.get("spec") or {}
        class_verdict = class_verdicts.get(str(spec.get("gatewayClassName")))
        if class_verdict is None:
            continue  # another controller's Gateway
        key = ObjectKey.of(obj)
        with blame(key):
            gateways[key] = _GatewayResolver(dag, source, settings, ports, key, obj).resolve(class_verdict)
    return Resolution(
        _with_authority_checks(gateways), classes={key: verdict for key, verdict in classes.values()}
    )


def _with_authority_checks(gateways: dict[ObjectKey, ResolvedGateway]) -> dict[ObjectKey, ResolvedGateway]:
    """Each programmed HTTPS listener's 421 rule (gatewayapi.md 4.2): a Host owned by another
    listener on its port (a more specific hostname) is misdirected, another Host it matches is not."""
    on_port: dict[str, set[str | None]] = {}
    for gateway in gateways.values():
        for listener in gateway.listeners:
            if listener.protocol == ls.HTTPS and listener.dag_listener is not None:
                on_port.setdefault(listener.dag_listener, set()).add(listener.hostname)
    if not on_port:
        return gateways
    return {
        key: attrs.evolve(gw, listeners=tuple(_checked(listener, on_port) for listener in gw.listeners))
        for key, gw in gateways.items()
    }


def _checked(listener: GatewayListener, on_port: Mapping[str, set[str | None]]) -> GatewayListener:
    if listener.protocol != ls.HTTPS or listener.dag_listener is None:
        return listener
    own = listener.hostname
    refuse = sorted(
        name
        for name in on_port[listener.dag_listener]
        if name is not None
        and name != own
        and (own is None or (own.startswith("*.") and name.endswith(own[1:])))
    )
    check = AuthorityCheck(accept=own or "*", refuse=tuple(refuse))
    return attrs.evolve(listener, authority_check=check)


def _our_classes(source: SourceView, settings: Settings) -> dict[str, tuple[ObjectKey, Verdict]]:
    """Our GatewayClasses by name, each with its Accepted verdict."""
    out: dict[str, tuple[ObjectKey, Verdict]] = {}
    for obj in source.list(GATEWAY_CLASS):
        spec = obj.get("spec") or {}
        if spec.get("controllerName") != settings.controller_name:
            continue
        verdict = CLASS_ACCEPTED
        if spec.get("parametersRef"):
            verdict = Verdict(
                False, "InvalidParameters", "spec.parametersRef is not supported: cpx has no parameters kind"
            )
        key = ObjectKey.of(obj)
        out[key.name] = (key, verdict)
    return out


@attrs.frozen
class _Claim:
    """Who holds an (address, Envoy port): the Gateway port and protocol family of its first listener."""

    port: int
    family: str


@attrs.define
class _PortTable:
    """The (address, Envoy port) pairs taken so far in this build: by DAG listeners other
    processors made, then by Gateway listeners (whose claim the first one makes)."""

    existing: dict[tuple[str, int], tuple[str, str]]  # -> (DAG listener name, family)
    claims: dict[tuple[str, int], _Claim] = attrs.field(factory=dict)

    @classmethod
    def of(cls, dag: DAG) -> _PortTable:
        existing = {
            (listener.address, listener.port): (listener.name, listener.protocol.value.lower())
            for listener in dag.listeners.values()
        }
        return cls(existing)

    def other_port(self, address: str, envoy_port: int, port: int) -> Verdict | None:
        """PortUnavailable when another Gateway port already maps to this Envoy port."""
        claim = self.claims.get((address, envoy_port))
        if claim is None or claim.port == port:
            return None
        message = f"Envoy port {envoy_port} on {address} already serves Gateway port {claim.port}"
        return Verdict(False, "PortUnavailable", message)

    def other_protocol(self, address: str, envoy_port: int, family: str) -> Verdict | None:
        """PortUnavailable when another Gateway's listener, or another processor's DAG listener,
        of a protocol that cannot share it holds this Envoy port."""
        claim = self.claims.get((address, envoy_port))
        existing = self.existing.get((address, envoy_port))
        taken = claim.family if claim is not None else existing[1] if existing is not None else None
        if taken is None or taken == family:
            return None
        message = f"Envoy port {envoy_port} on {address} already serves another protocol ({taken.upper()})"
        return Verdict(False, "PortUnavailable", message)

    def claim(self, address: str, envoy_port: int, port: int, family: str) -> None:
        self.claims.setdefault((address, envoy_port), _Claim(port, family))

    def existing_listener(self, address: str, envoy_port: int) -> str | None:
        existing = self.existing.get((address, envoy_port))
        return existing[0] if existing is not None else None


@attrs.define
class _GatewayResolver:
    dag: DAG
    source: SourceView
    settings: Settings
    ports: _PortTable
    key: ObjectKey
    obj: Mapping[str, Any]
    # Listeners accepted so far, by Gateway port: (family, hostname).
    taken: dict[int, list[tuple[str, str | None]]] = attrs.field(factory=dict)

    def resolve(self, class_verdict: Verdict) -> ResolvedGateway:
        spec = self.obj.get("spec") or {}
        requested, address_problem = _requested_address(spec.get("addresses"))
        problem = _gateway_problem(class_verdict, spec) or address_problem
        address = requested or self.settings.default_address
        specs = spec.get("listeners")
        listeners = _mark_overlapping_tls(
            [
                self._listener(entry if isinstance(entry, Mapping) else {}, address, serve=problem is None)
                for entry in (specs if isinstance(specs, list) else [])
            ]
        )
        return ResolvedGateway(
            key=self.key,
            generation=cond.generation_of(self.obj),
            controller_name=self.settings.controller_name,
            listeners=listeners,
            problem=problem,
            addresses=() if address_problem else self._status_addresses(requested),
        )

    def _status_addresses(self, requested: str | None) -> tuple[tuple[str, str], ...]:
        if requested is not None:
            return (("IPAddress", requested),)
        try:
            entries = parse_status_addresses(self.settings.status_address)
        except ValueError:
            return ()  # Settings refused it at start-up already
        return typed_addresses(entries)

    def _listener(self, spec: Mapping[str, Any], address: str, *, serve: bool) -> GatewayListener:
        name, protocol = str(spec.get("name") or ""), str(spec.get("protocol") or "")
        port = spec["port"] if isinstance(spec.get("port"), int) else 0
        tls = _mapping(spec, "tls")
        allowed = _mapping(spec, "allowedRoutes")
        kinds, refused_kinds = ls.route_kinds(protocol, allowed.get("kinds"))
        resolved_refs = _REFS_RESOLVED
        if refused_kinds:
            resolved_refs = Verdict(
                False,
                "InvalidRouteKinds",
                f"Route kinds not supported on {protocol} listeners: {', '.join(refused_kinds)}",
            )
        listener = GatewayListener(
            gateway=self.key,
            name=name,
            port=port,
            protocol=protocol,
            hostname=ls.hostname_of(spec),
            tls_mode=str(tls.get("mode") or ls.TERMINATE) if protocol in (ls.HTTPS, ls.TLS) else None,
            kinds=frozenset(kinds),
            admits_namespace=ls.namespace_admission(self.key.namespace, allowed),
            dag_listener=None,
            address=address,
            envoy_port=ls.envoy_port(port),
        )
        if protocol not in ls.PROTOCOLS:
            unsupported = Verdict(False, "UnsupportedProtocol", f"Protocol {protocol!r} is not supported")
            status = ListenerStatus(
                accepted=unsupported,
                programmed=Verdict(False, "Invalid", unsupported.message),
                resolved_refs=resolved_refs,
                conflicted=_NO_CONFLICT,
                supported_kinds=(),
            )
            return attrs.evolve(listener, kinds=frozenset(), status=status)
        family = ls.PORT_FAMILY[protocol]
        # A Gateway served nowhere takes no port from the others.
        accepted, conflicted = self._place(listener, family) if serve else (_LISTENER_ACCEPTED, _NO_CONFLICT)
        secret, programmed, resolved_refs = self._tls(listener, tls, "tls" in spec, resolved_refs)
        validation, accepted, programmed, resolved_refs = self._frontend(
            listener, accepted, programmed, resolved_refs
        )
        if not accepted.ok:
            programmed = Verdict(False, accepted.reason if conflicted.ok else "Invalid", accepted.message)
        elif not serve:
            programmed = Verdict(False, "Invalid", "The Gateway is not accepted")
        status = ListenerStatus(
            accepted=accepted,
            programmed=programmed,
            resolved_refs=resolved_refs,
            conflicted=conflicted,
            supported_kinds=kinds,
        )
        dag_listener = self._dag_listener(listener, family) if programmed.ok else None
        return attrs.evolve(
            listener, dag_listener=dag_listener, secret=secret, client_validation=validation, status=status
        )

    def _place(self, listener: GatewayListener, family: str) -> tuple[Verdict, Verdict]:
        """Accepted and Conflicted for a listener, against the listeners before it."""
        address, envoy, port, hostname = (
            listener.address,
            listener.envoy_port,
            listener.port,
            listener.hostname,
        )
        unavailable = self.ports.other_port(address, envoy, port)
        if unavailable is not None:
            return unavailable, _NO_CONFLICT
        on_port = self.taken.setdefault(port, [])
        for other_family, other_hostname in on_port:
            if other_family != family:
                message = f"Listener on port {port} conflicts with a {other_family.upper()} listener there"
                conflict = Verdict(True, "ProtocolConflict", message)
                return Verdict(False, "ProtocolConflict", message), conflict
            if other_hostname == hostname:
                message = f"Listener hostname {hostname or '(none)'} is already used on port {port}"
                conflict = Verdict(True, "HostnameConflict", message)
                return Verdict(False, "HostnameConflict", message), conflict
        unavailable = self.ports.other_protocol(address, envoy, family)
        if unavailable is not None:
            return unavailable, _NO_CONFLICT
        on_port.append((family, hostname))
        self.ports.claim(address, envoy, port, family)
        return _LISTENER_ACCEPTED, _NO_CONFLICT

    def _tls(
        self, listener: GatewayListener, tls: Mapping[str, Any], has_tls: bool, resolved_refs: Verdict
    ) -> tuple[Secret | None, Verdict, Verdict]:
        """The certificate, Programmed and ResolvedRefs of a listener."""
        protocol, mode = listener.protocol, listener.tls_mode
        if protocol == ls.HTTPS and not has_tls:
            return (
                None,
                Verdict(False, "Invalid", 'Listener.TLS is required when protocol is "HTTPS"'),
                resolved_refs,
            )
        secret: Secret | None = None
        if protocol in (ls.HTTPS, ls.TLS) and mode == ls.TERMINATE:
            found = resolve_certificate(self.source, self.key, tls)
            if isinstance(found, CertificateProblem):
                refs = resolved_refs if not resolved_refs.ok else Verdict(False, found.reason, found.message)
                return None, Verdict(False, "Invalid", found.message), refs
            secret = found
        return secret, _LISTENER_PROGRAMMED, resolved_refs

    def _frontend(
        self, listener: GatewayListener, accepted: Verdict, programmed: Verdict, resolved_refs: Verdict
    ) -> tuple[DownstreamValidation | None, Verdict, Verdict, Verdict]:
        """The client validation of an HTTPS listener (``spec.tls.frontend``), with its Accepted,
        Programmed and ResolvedRefs: without any usable CA it is neither accepted nor served."""
        if listener.protocol != ls.HTTPS or listener.tls_mode != ls.TERMINATE:
            return None, accepted, programmed, resolved_refs
        config = frontend_tls.frontend_config(self.obj, listener.port)
        if config is None:
            return None, accepted, programmed, resolved_refs
        found = frontend_tls.resolve_frontend(self.source, self.key, config)
        if found.problem is not None and resolved_refs.ok:
            resolved_refs = found.problem
        if found.validation is None and found.problem is not None and accepted.ok:
            accepted = frontend_tls.not_accepted(found.problem)
            programmed = Verdict(False, "Invalid", accepted.message)
        return found.validation, accepted, programmed, resolved_refs

    def _dag_listener(self, listener: GatewayListener, family: str) -> str:
        address, envoy = listener.address, listener.envoy_port
        name = self.ports.existing_listener(address, envoy)
        if name is None:
            name = ls.listener_name(family, listener.port, address, self.settings.default_address)
            self.dag.ensure_listener(name, ls.DAG_PROTOCOL[family], address, envoy)
            self.ports.existing[(address, envoy)] = (name, family)
        return name


def typed_addresses(entries: Any) -> tuple[tuple[str, str], ...]:
    """``status.addresses`` (type, value) pairs from load-balancer ingress entries (``ip`` or
    ``hostname``: the flag's, or the Envoy Service's), in order, without repeats."""
    found: dict[tuple[str, str], None] = {}
    for entry in entries if isinstance(entries, list | tuple) else ():
        if isinstance(entry, Mapping) and entry.get("ip"):
            found[("IPAddress", str(entry["ip"]))] = None
        elif isinstance(entry, Mapping) and entry.get("hostname"):
            found[("Hostname", str(entry["hostname"]))] = None
    return tuple(found)


def _mark_overlapping_tls(listeners: list[GatewayListener]) -> tuple[GatewayListener, ...]:
    """OverlappingTLSConfig on every accepted TLS listener (HTTPS, TLS) whose hostnames overlap
    another's on the same port (``*.example.com`` and ``foo.example.com``; no hostname overlaps all):
    the spec's MUST, as clients coalescing connections may then reach the wrong listener."""
    tls = [i for i, lst in enumerate(listeners) if lst.protocol in (ls.HTTPS, ls.TLS) and lst.accepted]
    overlapping = {
        i
        for i in tls
        for j in tls
        if i != j
        and listeners[i].port == listeners[j].port
        and _hostnames_overlap(listeners[i].hostname, listeners[j].hostname)
    }
    for i in overlapping:
        status = listeners[i].status
        assert status is not None
        verdict = Verdict(True, "OverlappingHostnames", "Listener hostname overlaps another TLS listener's")
        listeners[i] = attrs.evolve(listeners[i], status=attrs.evolve(status, overlapping_tls=verdict))
    return tuple(listeners)


def _hostnames_overlap(a: str | None, b: str | None) -> bool:
    if a is None or b is None or a == b:
        return True
    return (a.startswith("*.") and b.endswith(a[1:])) or (b.startswith("*.") and a.endswith(b[1:]))


def _gateway_problem(class_verdict: Verdict, spec: Mapping[str, Any]) -> Verdict | None:
    """Why the Gateway cannot be accepted whatever its listeners and addresses, if it cannot."""
    if not class_verdict.ok:
        return Verdict(False, "Invalid", f"GatewayClass is not accepted: {class_verdict.message}")
    infrastructure = spec.get("infrastructure")
    if isinstance(infrastructure, Mapping) and infrastructure.get("parametersRef"):
        message = "spec.infrastructure.parametersRef is not supported: cpx has no parameters kind"
        return Verdict(False, "InvalidParameters", message)
    return None


# A problem with the Gateway's addresses that leaves it Accepted, but served nowhere.
ADDRESS_NOT_USABLE = "AddressNotUsable"


def _requested_address(addresses: Any) -> tuple[str | None, Verdict | None]:
    """The IPAddress to bind (the first with a value), or why the addresses cannot be served."""
    requested = None
    for item in addresses if isinstance(addresses, list) else []:
        entry = item if isinstance(item, Mapping) else {}
        kind = entry.get("type") or "IPAddress"
        value = entry.get("value")
        if kind != "IPAddress":
            return None, Verdict(False, "UnsupportedAddress", f"Address type {kind!r} is not supported")
        if not value:
            continue  # an address to assign: the default one
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return None, Verdict(False, ADDRESS_NOT_USABLE, f"Address {value!r} is not an IP address")
        requested = requested or str(value)
    return requested, None


# -- status ----------------------------------------------------------------------------------------


def report(
    dag: DAG, source: SourceView, resolution: Resolution, attachments: Attachments, settings: Settings
) -> None:
    """GatewayClass and Gateway statuses (``dag.set_status``), attachedRoutes from ``attachments``."""
    for key, verdict in resolution.classes.items():
        obj = source.get(key)
        if obj is not None:
            dag.set_status(key, _class_status(obj, verdict))
    for gateway in resolution:
        obj = source.get(gateway.key)
        if obj is not None:
            dag.set_status(gateway.key, _gateway_status(obj, gateway, attachments))


def _class_status(obj: Mapping[str, Any], verdict: Verdict) -> dict[str, Any]:
    generation = cond.generation_of(obj)
    previous = cond.current_status(obj).get("conditions") or []
    return {
        "conditions": [
            _condition("Accepted", verdict, generation, previous),
            cond.condition(
                "SupportedVersion",
                True,
                "SupportedVersion",
                "Gateway API v1 (standard channel) is supported",
                generation,
                previous,
            ),
        ],
        "supportedFeatures": supported_features(),
    }


def _gateway_status(
    obj: Mapping[str, Any], gateway: ResolvedGateway, attachments: Attachments
) -> dict[str, Any]:
    generation = gateway.generation
    current = cond.current_status(obj)
    previous = current.get("conditions") or []
    return {
        "conditions": [
            _condition("Accepted", _gateway_accepted(gateway), generation, previous),
            _condition("Programmed", _gateway_programmed(gateway), generation, previous),
            *(
                [_condition("InsecureFrontendValidationMode", _INSECURE_FRONTEND, generation, previous)]
                if frontend_tls.insecure_fallback(obj)
                else []
            ),
        ],
        "addresses": [{"type": kind, "value": value} for kind, value in gateway.addresses],
        "listeners": [
            _listener_status(listener, generation, current, attachments) for listener in gateway.listeners
        ],
    }


def _gateway_accepted(gateway: ResolvedGateway) -> Verdict:
    if gateway.problem is not None and gateway.problem.reason != ADDRESS_NOT_USABLE:
        return gateway.problem
    invalid = [listener.name for listener in gateway.listeners if not listener.accepted]
    if not invalid:
        return Verdict(True, "Accepted", "Gateway is accepted")
    valid = len(gateway.listeners) > len(invalid)
    return Verdict(valid, "ListenersNotValid", f"Listeners not valid: {', '.join(invalid)}")


def _gateway_programmed(gateway: ResolvedGateway) -> Verdict:
    if gateway.problem is not None:
        reason = ADDRESS_NOT_USABLE if gateway.problem.reason == ADDRESS_NOT_USABLE else "Invalid"
        return Verdict(False, reason, gateway.problem.message)
    failing = [listener.name for listener in gateway.listeners if not listener.programmed]
    return programmed(bool(gateway.addresses), failing)


# Programmed=False for an accepted Gateway with no address to report (yet): in Kubernetes mode the
# status writer may still give it the Envoy Service's (status.envoy_load_balancer).
ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"


def programmed(has_address: bool, listeners_not_programmed: Sequence[str]) -> Verdict:
    """An accepted Gateway's Programmed: it needs an address and every listener programmed."""
    if not has_address:
        return Verdict(
            False,
            ADDRESS_NOT_ASSIGNED,
            "None of the addresses in Spec.Addresses have been assigned to the Gateway",
        )
    if listeners_not_programmed:
        names = ", ".join(listeners_not_programmed)
        return Verdict(False, "ListenersNotValid", f"Listeners not programmed: {names}")
    return Verdict(True, "Programmed", "Gateway is programmed")


def _listener_status(
    listener: GatewayListener, generation: int, current: Mapping[str, Any], attachments: Attachments
) -> dict[str, Any]:
    status = listener.status
    assert status is not None  # every listener resolve() makes has one
    listed = current.get("listeners")
    before = [
        entry
        for entry in (listed if isinstance(listed, list) else ())
        if isinstance(entry, Mapping) and entry.get("name") == listener.name
    ]
    previous = (before[0].get("conditions") or []) if before else []
    return {
        "name": listener.name,
        "supportedKinds": [{"group": GROUP, "kind": kind} for kind in status.supported_kinds],
        "attachedRoutes": attachments.count(listener),
        "conditions": [
            _condition("Accepted", status.accepted, generation, previous),
            _condition("Programmed", status.programmed, generation, previous),
            _condition("ResolvedRefs", status.resolved_refs, generation, previous),
            _condition("Conflicted", status.conflicted, generation, previous),
            *(
                [_condition("OverlappingTLSConfig", status.overlapping_tls, generation, previous)]
                if status.overlapping_tls is not None
                else []
            ),
        ],
    }


def _condition(type_: str, verdict: Verdict, generation: int, previous: Any) -> dict[str, Any]:
    return cond.condition(type_, verdict.ok, verdict.reason, verdict.message, generation, previous or [])


def _mapping(spec: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    value = spec.get(field)
    return value if isinstance(value, Mapping) else {}
