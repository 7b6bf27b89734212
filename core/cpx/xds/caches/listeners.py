"""The LDS cache: one Envoy listener per DAG listener (Contour's ``internal/xdscache/v3/listener.go``).

- A listener with plain virtual hosts gets one filter chain: an HTTP connection manager whose
  routes come from Scoped RDS, one RouteConfiguration per exact host (:mod:`cpx.xds.envoy.scoped`),
  or, with ``--route-shape single``, from one RouteConfiguration (``ingress_http``) as in Contour.
- A listener with secure virtual hosts inspects TLS and gets one filter chain per virtual host,
  selected by SNI, each with its own connection manager (RDS ``https/<fqdn>``), whose HTTP filters
  may depend on that host (the builtin 421 check does); TLS passthrough and TCP-proxy virtual hosts get a
  tcp_proxy chain instead, and virtual hosts with a fallback certificate share one chain without
  SNI match (RDS ``ingress_fallbackcert``).
- A TCP listener (``Protocol.TCP``) gets one chain, matching every connection: a tcp_proxy to its
  ``tcp_proxy`` clusters.
- A plugin's own listener node is built whole by the listener kind that claims its type
  (:mod:`cpx.xds.caches.kinds`), once per distinct node.

Every connection manager carries the HTTP filters plugins contribute (:mod:`cpx.xds.httpfilters`)
for its :class:`~cpx.records.FilterSite`.  Each filter chain is memoised by the frozen values it is
built from, and each listener is assembled from cached serialised chains, so 10k secure virtual
hosts are not rebuilt on every change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
from envoy.config.listener.v3 import listener_components_pb2 as listener_components
from envoy.config.listener.v3 import listener_pb2 as listener_v3

from cpx.config import Config
from cpx.dag.attachments import NO_ATTACHMENTS, Attachments
from cpx.dag.dag import DAG, Listener, Protocol, SecureVirtualHost
from cpx.dag.nodes import AuthorityCheck, DownstreamValidation, Secret, TCPProxy, TLSParams
from cpx.isolation import Fault
from cpx.objects import ObjectKey
from cpx.records import FilterSite, ListenerKindSpec
from cpx.xds import resource
from cpx.xds.caches.kinds import Built, KindTranslator
from cpx.xds.caches.routes import FALLBACK_ROUTE_CONFIG
from cpx.xds.constraints.notes import violation_note
from cpx.xds.constraints.validate import resource_violations, violations
from cpx.xds.contributions import Contributions
from cpx.xds.envoy.common import embedded
from cpx.xds.envoy.listener import (
    FALLBACK_CHAIN,
    HTTPSettings,
    downstream_tls,
    filter_chain,
    http_connection_manager,
    listener_filters,
    listener_head,
    tcp_proxy_filter,
)
from cpx.xds.httpfilters import HttpFilters, connection_manager_filters
from cpx.xds.resource import Resource, content_version

_FILTER_CHAINS_FIELD = 3  # Listener.filter_chains


@attrs.frozen(kw_only=True, cache_hash=True)
class _SecureChain:
    """Everything one SNI filter chain is built from: the memo key of its serialised bytes."""

    stat_prefix: str
    fqdn: str
    route_config: str
    secret: Secret | None
    tls: TLSParams
    tcp_proxy: TCPProxy | None
    authority_check: AuthorityCheck | None = None
    attachments: Attachments = NO_ATTACHMENTS
    validation: DownstreamValidation | None = None
    dag_attachments: Attachments = NO_ATTACHMENTS

    @classmethod
    def of(cls, listener: Listener, vhost: SecureVirtualHost, dag_attachments: Attachments) -> _SecureChain:
        return cls(
            stat_prefix=listener.name,
            fqdn=vhost.name,
            route_config=listener.secure_route_config_name(vhost.name),
            # Passthrough: no TLS termination, so no certificate even if one is attached.
            secret=None if vhost.passthrough else vhost.secret,
            tls=vhost.tls,
            tcp_proxy=vhost.tcp_proxy,
            authority_check=vhost.authority_check,
            attachments=vhost.attachments,
            # Passthrough: the backend, not Envoy, sees the client's certificate.
            validation=None if vhost.passthrough else vhost.downstream_validation,
            dag_attachments=dag_attachments,
        )

    def sort_key(self) -> tuple[bool, str]:
        # Contour's filterChainSorter: SNI chains by name; a chain without server names goes last.
        return (self.fqdn == "*", self.fqdn)

    def build(self, settings: HTTPSettings, http_filters: HttpFilters) -> listener_components.FilterChain:
        alpn: tuple[str, ...] = ()
        if self.tcp_proxy is not None:
            # No ALPN for TCP proxying: the backend's ServerHello decides the protocol.
            filters = [tcp_proxy_filter(self.stat_prefix, self.tcp_proxy, settings)]
        else:
            # The connection manager keeps the listener's stat prefix (dashboards rely on it).
            secure = self.secret is not None
            site = FilterSite(
                listener=self.stat_prefix,
                virtual_host=self.fqdn,
                secure=secure,
                authority_check=self.authority_check,
                attachments=self.attachments,
                dag_attachments=self.dag_attachments,
            )
            chosen = connection_manager_filters(http_filters, site)
            forward = None if self.validation is None else self.validation.forward_client_certificate
            manager = http_connection_manager(
                self.route_config, self.stat_prefix, settings, chosen, forward_client_certificate=forward
            )
            filters = [manager]
            alpn = settings.alpn
        socket = None
        if self.secret is not None:
            socket = downstream_tls(self.secret, self.tls, settings, alpn, self.validation)
        # "*" has no SNI to match on: such a chain takes any TLS connection (Contour's FilterChainTLS).
        if self.fqdn == "*":
            return filter_chain(filters, transport_protocol="tls", transport_socket=socket)
        return filter_chain(filters, server_names=[self.fqdn], transport_socket=socket)


@attrs.frozen(kw_only=True, cache_hash=True)
class _FallbackChain:
    stat_prefix: str
    route_config: str
    secret: Secret
    dag_attachments: Attachments = NO_ATTACHMENTS

    def sort_key(self) -> tuple[bool, str]:
        return (True, "")

    def build(self, settings: HTTPSettings, http_filters: HttpFilters) -> listener_components.FilterChain:
        # No virtual host: this chain serves every virtual host with a fallback certificate.
        site = FilterSite(
            listener=self.stat_prefix, virtual_host=None, secure=True, dag_attachments=self.dag_attachments
        )
        chosen = connection_manager_filters(http_filters, site)
        manager = http_connection_manager(self.route_config, self.stat_prefix, settings, chosen)
        # Contour uses only the configured minimum TLS version for the fallback certificate.
        socket = downstream_tls(self.secret, TLSParams(), settings, settings.alpn)
        return filter_chain([manager], transport_protocol="tls", transport_socket=socket, name=FALLBACK_CHAIN)


@attrs.frozen(kw_only=True, cache_hash=True)
class _HTTPChain:
    stat_prefix: str
    route_config: str
    # Plain HTTP next to TLS chains on one listener must not catch TLS connections.
    raw_only: bool = False
    scoped: bool = False  # routes per exact host through Scoped RDS (cpx.xds.envoy.scoped)
    attachments: Attachments = NO_ATTACHMENTS  # the listener's
    dag_attachments: Attachments = NO_ATTACHMENTS

    def build(self, settings: HTTPSettings, http_filters: HttpFilters) -> listener_components.FilterChain:
        site = FilterSite(
            listener=self.stat_prefix,
            virtual_host=None,
            secure=False,
            attachments=self.attachments,
            dag_attachments=self.dag_attachments,
        )
        chosen = connection_manager_filters(http_filters, site)
        manager = http_connection_manager(
            self.route_config, self.stat_prefix, settings, chosen, scoped=self.scoped
        )
        return filter_chain([manager], transport_protocol="raw_buffer" if self.raw_only else "")


@attrs.frozen(kw_only=True, cache_hash=True)
class _TCPChain:
    """A TCP listener's one chain: every connection to its clusters, nothing inspected."""

    stat_prefix: str
    tcp_proxy: TCPProxy

    def build(self, settings: HTTPSettings, http_filters: HttpFilters) -> listener_components.FilterChain:
        return filter_chain([tcp_proxy_filter(self.stat_prefix, self.tcp_proxy, settings)])


_Chain = _SecureChain | _FallbackChain | _HTTPChain | _TCPChain


class ListenerCache:
    """A :class:`~cpx.records.CheckingCache`: each new filter chain is checked as it is built, and
    the rules across chains (overlapping matches, ...) on a skeleton of their matches.

    Its connection managers carry the HTTP filters bound with :meth:`bind_contributions` (none
    before: the snapshot handler binds what the enabled plugins contribute)."""

    type_url = resource.LISTENER

    def __init__(self, config: Config) -> None:
        self.config = config
        self.settings = HTTPSettings.from_config(config)
        self._listener_fields = self.settings.limits.listener_fields()
        self.scoped = config.route_shape == "scoped"
        self._resources: dict[str, Resource] = {}
        # Per chain: its Listener.filter_chains entry, and the entry of its name and match only.
        self._chains: dict[_Chain, tuple[bytes, bytes]] = {}
        self._skeletons: dict[str, tuple[_Chain, ...]] = {}
        self._faults: list[Fault] = []
        self._kinds: KindTranslator[ListenerKindSpec] = KindTranslator(self.type_url, _listener_shape)
        # Where each plugin listener of the last build was served: it keeps that address.
        self._served_at: dict[str, tuple[str, int]] = {}
        self._http_filters: HttpFilters = ()

    def bind_contributions(self, contributions: Contributions) -> None:
        self._kinds.bind(contributions.listener_kinds)
        self._http_filters = contributions.http_filters
        self._chains = {}  # built with other filters

    def contents(self) -> Mapping[str, Resource]:
        return self._resources

    def faults(self) -> list[Fault]:
        """Filter chains of the last DAG that Envoy would reject (left out of their listener)."""
        return self._faults

    def on_change(self, dag: DAG) -> None:
        custom = self._custom_listeners(dag)
        previous, self._chains, self._faults = self._chains, {}, []
        resources, skeletons = {}, {}
        for name in sorted(dag.listeners):
            listener = dag.listeners[name]
            chains = _chains(listener, self.scoped, dag.attachments)
            if not chains:
                continue  # Envoy refuses a listener without filter chains
            body, kept = self._assemble(listener, chains, previous)
            skeletons[name] = kept
            before = self._skeletons.get(name)
            if before != kept and not self._check_skeleton(listener, kept, before):
                skeletons.pop(name)  # checked again next time
            old = self._resources.get(name)
            resources[name] = old if old is not None and old.body == body else self._resource(name, body)
        if custom:
            resources.update((res.name, res) for _, res, _ in custom)
            resources = {name: resources[name] for name in sorted(resources)}
        self._resources, self._skeletons = resources, skeletons

    def _custom_listeners(self, dag: DAG) -> list[Built]:
        """Plugins' own listeners, less those binding an address another listener binds: Envoy
        would refuse the whole update.  The core's listeners keep their addresses, then those a
        plugin listener already served in the last build (a newcomer cannot take an address
        over), then the order the nodes were added decides."""
        bound = {(listener.address, listener.port): listener.name for listener in dag.listeners.values()}
        built = self._kinds.translate(dag.listener_nodes())
        built.sort(key=lambda b: self._served_at.get(b[0].name) != _address(b[2]))
        kept: list[Built] = []
        for node, res, message in built:
            key = _address(message)
            taken = bound.get(key) or next(
                (name for (host, port), name in bound.items() if port == key[1] and _wildcard(host, key[0])),
                None,
            )
            if taken is not None:
                why = f"address {key[0]}:{key[1]} of listener {node.name!r} is bound by {taken!r}"
                self._kinds.conflict(node, "AddressConflict", why)
                continue
            bound[key] = node.name
            kept.append((node, res, message))
        self._served_at = {node.name: _address(message) for node, _, message in kept}
        return kept

    def _resource(self, name: str, body: bytes) -> Resource:
        return Resource(name, self.type_url, body, content_version(body))

    def _assemble(
        self, listener: Listener, chains: list[_Chain], previous: dict[_Chain, tuple[bytes, bytes]]
    ) -> tuple[bytes, tuple[_Chain, ...]]:
        """Listener bytes in field order: name and address, the chains, then the listener
        filters; and the chains kept (a new chain Envoy would reject is left out, as a fault)."""
        parts = [self._head(listener)]
        kept: list[_Chain] = []
        for chain in chains:
            # Cached as a complete Listener.filter_chains field, ready to concatenate.
            entries = self._chains.get(chain) or previous.get(chain)
            if entries is None:
                message = chain.build(self.settings, self._http_filters)
                problems = violations(message)
                if problems:
                    note = violation_note(
                        f"filter chain {_chain_name(chain)!r} of listener {listener.name!r}",
                        problems,
                        "Listener",
                    )
                    self._faults.append(Fault(note=note, origins=_chain_origins(listener, chain)))
                    continue
                match = listener_components.FilterChain(
                    name=message.name, filter_chain_match=message.filter_chain_match
                )
                entries = (
                    embedded(_FILTER_CHAINS_FIELD, message.SerializeToString(deterministic=True)),
                    embedded(_FILTER_CHAINS_FIELD, match.SerializeToString(deterministic=True)),
                )
            self._chains[chain] = entries
            parts.append(entries[0])
            kept.append(chain)
        parts.append(self._tail(listener))
        return b"".join(parts), tuple(kept)

    def _head(self, listener: Listener) -> bytes:
        head = listener_head(listener.name, listener.address, listener.port)
        head.MergeFrom(self._listener_fields)
        data: bytes = head.SerializeToString(deterministic=True)
        return data

    @staticmethod
    def _tail(listener: Listener) -> bytes:
        tls = bool(listener.secure_virtual_hosts)
        tail = listener_v3.Listener(listener_filters=listener_filters(tls))
        data: bytes = tail.SerializeToString(deterministic=True)
        return data

    def _check_skeleton(
        self, listener: Listener, kept: tuple[_Chain, ...], before: tuple[_Chain, ...] | None
    ) -> bool:
        """The listener's own fields and the rules across its chains, on their matches only.

        After the first time, only new chains and those they could clash with (the same server
        name in any case, chains without one) go into the skeleton: a new TLS host costs the same
        among 10 or 10k.
        """
        if before is not None:
            new = {_chain_name(c).lower() for c in set(kept) - set(before)}
            kept = tuple(c for c in kept if not isinstance(c, _SecureChain) or c.fqdn.lower() in new | {"*"})
        body = b"".join((self._head(listener), *(self._chains[c][1] for c in kept), self._tail(listener)))
        problems = resource_violations(self.type_url, body)
        if not problems:
            return True
        named = {int(i) for v in problems for i in _CHAIN_INDEX.findall(v.path)[:1]}
        origins: frozenset[ObjectKey] = frozenset()
        for i in named:
            origins |= _chain_origins(listener, kept[i])
        note = violation_note(f"listener {listener.name!r}", problems, "Listener")
        self._faults.append(Fault(note=note, origins=origins))
        return False


_CHAIN_INDEX = re.compile(r"^filter_chains\[(\d+)\]")


def _chain_name(chain: _Chain) -> str:
    return chain.fqdn if isinstance(chain, _SecureChain) else chain.stat_prefix


def _chain_origins(listener: Listener, chain: _Chain) -> frozenset[ObjectKey]:
    """The objects a chain came from: its virtual host's routes and TLS Secrets."""
    if not isinstance(chain, _SecureChain):
        return frozenset()
    vhost = listener.secure_virtual_hosts.get(chain.fqdn)
    if vhost is None:
        return frozenset()
    found = {r.origin for r in vhost.routes.values() if r.origin is not None}
    for secret in vhost.referenced_secrets():
        found.add(ObjectKey("", "Secret", secret.namespace, secret.name))
    return frozenset(found)


def _chains(listener: Listener, scoped: bool, dag_attachments: Attachments) -> list[_Chain]:
    if listener.protocol is Protocol.TCP:
        proxy = listener.tcp_proxy
        return [] if proxy is None else [_TCPChain(stat_prefix=listener.name, tcp_proxy=proxy)]
    chains: list[_Chain] = []
    secure = [
        _SecureChain.of(listener, v, dag_attachments)
        for v in listener.secure_virtual_hosts.values()
        if _servable(v)
    ]
    if listener.virtual_hosts:
        chains.append(
            _HTTPChain(
                stat_prefix=listener.name,
                route_config=listener.http_route_config_name(),
                raw_only=bool(secure),
                scoped=scoped,
                attachments=listener.attachments,
                dag_attachments=dag_attachments,
            )
        )
    secure.sort(key=_SecureChain.sort_key)
    tls_chains: list[_SecureChain | _FallbackChain] = list(secure)
    fallback = _fallback_chain(listener, dag_attachments)
    if fallback is not None:
        tls_chains.append(fallback)
    chains.extend(tls_chains)
    return chains


def _servable(vhost: SecureVirtualHost) -> bool:
    """Prune normally drops the others; a chain without TLS must at least proxy TCP."""
    if vhost.tcp_proxy is not None:
        return vhost.passthrough or vhost.secret is not None
    return vhost.secret is not None and vhost.serves_http()


def _fallback_chain(listener: Listener, dag_attachments: Attachments) -> _FallbackChain | None:
    """One chain for all virtual hosts with a fallback certificate (first by name supplies it)."""
    for name in sorted(listener.secure_virtual_hosts):
        vhost = listener.secure_virtual_hosts[name]
        fallback = vhost.fallback_certificate
        if fallback is not None and vhost.through_fallback() and vhost.tcp_proxy is None and _servable(vhost):
            return _FallbackChain(
                stat_prefix=listener.name,
                route_config=FALLBACK_ROUTE_CONFIG,
                secret=fallback,
                dag_attachments=dag_attachments,
            )
    return None


_WILDCARDS = frozenset({"0.0.0.0", "::"})


def _wildcard(host: str, other: str) -> bool:
    """Whether two addresses on one port overlap because either is a wildcard."""
    return host in _WILDCARDS or other in _WILDCARDS


def _address(message: Any) -> tuple[str, int]:
    socket_address = message.address.socket_address
    return (socket_address.address, socket_address.port_value)


def _listener_shape(message: Any) -> list[str]:
    """What a plugin's Listener needs beyond Envoy's declared rules to be served by every Envoy."""
    problems = []
    if not message.HasField("address") or not message.address.HasField("socket_address"):
        problems.append("it has no socket address")
    elif not 0 < message.address.socket_address.port_value <= 65535:
        problems.append(f"port {message.address.socket_address.port_value} is not between 1 and 65535")
    if not message.filter_chains and not message.HasField("default_filter_chain"):
        problems.append("it has no filter chain")
    return problems
