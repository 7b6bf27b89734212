"""The DAG container that processors fill on every build.

Listeners hold virtual hosts; virtual hosts hold routes keyed by their match conditions (a later
processor's route with identical matches replaces an earlier one, as in Contour).  The containers
are mutable while a build runs and are never changed after the builder hands the DAG to observers.
Accessors follow Contour: ``get_*`` returns None when absent, ``ensure_*`` gets or creates.

The builder seals the DAG once the processors are done (:meth:`DAG.seal`); from then on walks
such as :meth:`DAG.clusters` are computed once and shared by every cache that asks.

Virtual hosts are frozen when the DAG is sealed, and a processor may freeze the ones it keeps
between builds and install them again as they are (:meth:`DAG.add_virtual_hosts`): an unchanged
host is then the very same object build after build, which the caches skip by identity, so one
changed host among 10k costs one host's work (docs/design/0021).  The DAG's accessors
(``ensure_*``, ``get_*``, :meth:`DAG.virtual_hosts`) hand a processor a private copy of a frozen
host (copy on write); a frozen host's routes refuse changes.
"""

from __future__ import annotations

import enum
import itertools
import operator
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn, Self, TypeVar

import attrs

from cpx.dag.attachments import NO_ATTACHMENTS, Attachments
from cpx.dag.nodes import (
    AuthorityCheck,
    Cluster,
    CORSPolicy,
    CustomNode,
    DownstreamValidation,
    IPFilter,
    LocalRateLimit,
    Route,
    Secret,
    ServicePort,
    TCPProxy,
    TLSParams,
)
from cpx.dag.registry import Registries
from cpx.objects import ObjectKey


class Protocol(enum.Enum):
    HTTP = "HTTP"
    HTTPS = "HTTPS"
    # Plain TCP: every connection goes to the listener's ``tcp_proxy`` (no virtual hosts).
    TCP = "TCP"


class FrozenRoutes(dict[str, Route]):
    """The routes of a frozen virtual host: a dict to read, refusing every change."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "the virtual host is frozen (kept between builds or sealed): change a copy from the DAG's "
            "accessors (ensure_virtual_host, get_virtual_host, virtual_hosts) instead"
        )

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _refuse

    def __reduce__(self) -> tuple[type[dict[str, Route]], tuple[dict[str, Route]]]:
        return (dict, (dict(self),))  # copies (copy.deepcopy, pickle) are plain, mutable dicts


@attrs.define(eq=False)
class VirtualHost:
    """A set of routes served for one host name (``*`` for any)."""

    name: str
    routes: dict[str, Route] = attrs.field(factory=dict)
    # Virtual-host-wide policies (HTTPProxy); routes may override the IP filter and rate limit.
    cors: CORSPolicy | None = None
    local_rate_limit: LocalRateLimit | None = None
    ip_filter: IPFilter | None = None
    # Plugins' typed data, read by their HTTP filters' per-virtual-host configs.
    attachments: Attachments = NO_ATTACHMENTS
    # A wildcard name (``*.foo.com``) matches one DNS label, as Kubernetes Ingress and HTTPProxy
    # hosts do (Contour adds an ``:authority`` regex to each route); False: one or more labels,
    # Envoy's own wildcard domains (Gateway API hostnames).
    single_label_wildcard: bool = True
    # Served even without routes, every request answered 404 by Envoy: a catch-all host that
    # must still exist (a Gateway API HTTPS listener without hostname answers any SNI).
    serve_without_routes: bool = False
    # Set by freeze(): whether it can be served and the clusters it uses, computed once.
    _frozen: bool = attrs.field(default=False, init=False, repr=False)
    _valid: bool = attrs.field(default=False, init=False, repr=False)
    _cluster_refs: tuple[Cluster, ...] = attrs.field(default=(), init=False, repr=False)

    def policies(self) -> tuple[object, ...]:
        """Everything besides the name that per-virtual-host filter configs may read: translation
        memoises a virtual host's own entry on it."""
        return (self.cors, self.local_rate_limit, self.ip_filter, self.attachments)

    def add_route(self, route: Route) -> None:
        self.routes[route.match_key()] = route

    def valid(self) -> bool:
        return self._valid if self._frozen else self.serves_http()

    def serves_http(self) -> bool:
        """Whether Envoy gets an HTTP virtual host for it: it has routes, or is kept without."""
        return bool(self.routes) or self.serve_without_routes

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> Self:
        """Make this virtual host immutable, so that a processor can keep it and install it in later
        builds as it is (:meth:`DAG.add_virtual_hosts`); returns it.  Its routes refuse changes from
        now on, and nothing may set its attributes."""
        if not self._frozen:
            self.routes = FrozenRoutes(self.routes)
            self._valid = self.valid()
            self._cluster_refs = tuple(self._clusters())
            self._frozen = True
        return self

    def thawed(self) -> Self:
        """A private, mutable copy (sharing the frozen route values)."""
        return attrs.evolve(self, routes=dict(self.routes))

    def _clusters(self) -> Iterator[Cluster]:
        for route in self.routes.values():
            yield from route.clusters
            for mirror in route.mirrors:
                yield mirror.cluster


@attrs.define(eq=False)
class SecureVirtualHost(VirtualHost):
    """A virtual host served over TLS on its own filter chain, selected by SNI."""

    secret: Secret | None = None
    tls: TLSParams = attrs.field(factory=TLSParams)
    # Passthrough or terminated L4 proxying instead of HTTP routes.
    tcp_proxy: TCPProxy | None = None
    passthrough: bool = False
    fallback_certificate: Secret | None = None
    # The 421 check of its SNI chain (None: the Host must be its SNI's host).
    authority_check: AuthorityCheck | None = None
    # Other secure hosts of the listener whose routes its chain serves too (by name): a TLS
    # connection its SNI chose may ask for them (e.g. a catch-all ``*`` host serving named ones).
    serves_hosts_of: tuple[str, ...] = ()
    # Client certificates its SNI chain asks for (and the details its connection manager forwards).
    downstream_validation: DownstreamValidation | None = None

    def referenced_secrets(self) -> tuple[Secret, ...]:
        """Every Secret its chain is built from: certificates (served over SDS) and the client
        validation's CA and CRL (inline)."""
        validation = self.downstream_validation
        found = (
            self.secret,
            self.fallback_certificate,
            *((validation.ca, validation.crl) if validation else ()),
        )
        return tuple(secret for secret in found if secret is not None)

    def through_fallback(self) -> bool:
        """Whether connections without a matching SNI reach it through the fallback certificate's
        chain; never with client validation, which that shared chain could not enforce."""
        return self.fallback_certificate is not None and self.downstream_validation is None

    def valid(self) -> bool:
        if self._frozen:
            return self._valid
        if self.tcp_proxy is not None:
            return self.passthrough or self.secret is not None
        return self.secret is not None and self.serves_http()

    def _clusters(self) -> Iterator[Cluster]:
        yield from super()._clusters()
        if self.tcp_proxy is not None:
            yield from self.tcp_proxy.clusters


_Host = TypeVar("_Host", bound=VirtualHost)


@attrs.define(eq=False)
class Listener:
    """An Envoy listener: the static ``ingress_http``/``ingress_https`` or one a plugin adds."""

    name: str
    protocol: Protocol
    address: str
    port: int
    virtual_hosts: dict[str, VirtualHost] = attrs.field(factory=dict)
    secure_virtual_hosts: dict[str, SecureVirtualHost] = attrs.field(factory=dict)
    # A TCP listener's one destination (Protocol.TCP): every connection is proxied to these
    # clusters, with no TLS or HTTP inspection; such a listener serves no virtual hosts.
    tcp_proxy: TCPProxy | None = None
    # Plugins' data for the listener's plain HTTP chain (read by HTTP filters from
    # FilterSite.attachments, as SNI chains read their virtual host's), e.g. a global ext_authz.
    attachments: Attachments = NO_ATTACHMENTS

    def serves(self) -> bool:
        """Whether Envoy gets this listener: it has something to serve."""
        if self.protocol is Protocol.TCP:
            return self.tcp_proxy is not None
        return bool(self.virtual_hosts or self.secure_virtual_hosts)

    # The RouteConfiguration names, Contour's: `ingress_http` (the listener's name) and
    # `https/<fqdn>` on the static listeners; `<listener>/https/<fqdn>` on the others, so that two
    # listeners serving one host never share a name, nor a secure host the scoped shape's plain
    # `<listener>/<fqdn>` (design 0018).
    def http_route_config_name(self) -> str:
        return self.name

    def secure_route_config_name(self, fqdn: str) -> str:
        return f"https/{fqdn}" if self.name == "ingress_https" else f"{self.name}/https/{fqdn}"


@attrs.frozen(kw_only=True)
class Note:
    """A problem (or remark) about one source object, shown in status and logs."""

    type: str  # e.g. "ServiceError", "TLSError", "RegexError"
    reason: str
    message: str
    severity: str = "error"  # "error" | "warning"


@attrs.define(eq=False)
class DAG:
    listeners: dict[str, Listener] = attrs.field(factory=dict)
    # Plugins' data for the whole build (e.g. an HTTP filter's settings that an object, not an
    # option, decides), handed to every connection manager's filters as FilterSite.dag_attachments.
    attachments: Attachments = NO_ATTACHMENTS
    # Plugins' own nodes, translated by the kind that claims their type (cpx.records.*KindSpec).
    _listener_nodes: dict[str, CustomNode] = attrs.field(factory=dict, init=False, repr=False)
    _cluster_nodes: dict[str, CustomNode] = attrs.field(factory=dict, init=False, repr=False)
    # Computed status per source object (the object's status subresource content) and notes.
    statuses: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict)
    notes: dict[ObjectKey, list[Note]] = attrs.field(factory=dict)
    # Values processors publish by source object for later ones (cpx.dag.registry).
    registries: Registries = attrs.field(factory=Registries)
    # Set by seal(): the DAG no longer changes, so walks over it can be memoised.
    _sealed: bool = attrs.field(default=False, init=False, repr=False)
    _frozen_hosts: bool = attrs.field(default=False, init=False, repr=False)  # added, maybe frozen
    # Set by prune (every host left is frozen); any accessor that may add a mutable host clears it.
    _all_frozen: bool = attrs.field(default=False, init=False, repr=False)
    _cluster_walk: tuple[tuple[Cluster, ...], ...] | None = attrs.field(default=None, init=False, repr=False)
    _unique_clusters: tuple[Cluster, ...] | None = attrs.field(default=None, init=False, repr=False)
    _cluster_set: frozenset[Cluster] | None = attrs.field(default=None, init=False, repr=False)

    def seal(self) -> None:
        """Declare the DAG finished (the builder calls this after prune); nothing may change it,
        and every virtual host is frozen."""
        if not self._all_frozen:
            for vhost in [vhost for vhost in self._all_virtual_hosts() if not vhost._frozen]:
                vhost.freeze()
        self._sealed = True

    @property
    def sealed(self) -> bool:
        return self._sealed

    # -- listeners ---------------------------------------------------------------------------
    def get_listener(self, name: str) -> Listener | None:
        return self.listeners.get(name)

    def ensure_listener(self, name: str, protocol: Protocol, address: str, port: int) -> Listener:
        listener = self.listeners.get(name)
        if listener is None:
            listener = self.listeners[name] = Listener(name, protocol, address, port)
        return listener

    def _listener(self, name: str) -> Listener:
        try:
            return self.listeners[name]
        except KeyError:
            raise KeyError(f"no listener {name!r} in the DAG (is its processor enabled?)") from None

    # -- plugins' own nodes ------------------------------------------------------------------------
    def add_listener_node(self, node: CustomNode) -> None:
        """Add a listener its plugin's kind builds whole (see :class:`cpx.records.ListenerKindSpec`)."""
        self._add_node(self._listener_nodes, node, "Listener")

    def add_cluster_node(self, node: CustomNode) -> None:
        """Add a cluster a plugin's cluster kind builds (see :class:`cpx.records.ClusterKindSpec`)."""
        self._add_node(self._cluster_nodes, node, "Cluster")

    def listener_nodes(self) -> tuple[CustomNode, ...]:
        """The plugins' own listener nodes, in the order they were added (one per name)."""
        return tuple(self._listener_nodes.values())

    def cluster_nodes(self) -> tuple[CustomNode, ...]:
        """The plugins' own cluster nodes, in the order they were added (one per name)."""
        return tuple(self._cluster_nodes.values())

    def _add_node(self, nodes: dict[str, CustomNode], node: CustomNode, kind: str) -> None:
        first = nodes.setdefault(node.name, node)
        if first != node:
            # The first one stays: one object cannot take another's resource name over.
            self._note_node(
                node, kind, f"{kind.lower()} name {node.name!r} is already used by another object"
            )

    def _note_node(self, node: CustomNode, kind: str, message: str) -> None:
        if node.origin is not None:
            self.add_note(node.origin, Note(type=f"{kind}Error", reason="NameConflict", message=message))

    # -- virtual hosts -----------------------------------------------------------------------
    def virtual_hosts(self, fqdn: str | None = None) -> Iterator[VirtualHost]:
        """Every virtual host of every listener, plain and secure (only those named ``fqdn`` if
        given): what a policy processor walks to decorate routes built by other plugins.  Each is
        the processor's to change (a frozen one is replaced by a copy first)."""
        self._all_frozen = False
        for listener in list(self.listeners.values()):
            yield from _writable_hosts(listener.virtual_hosts, fqdn)
            yield from _writable_hosts(listener.secure_virtual_hosts, fqdn)

    def get_virtual_host(self, listener: str, fqdn: str) -> VirtualHost | None:
        self._all_frozen = False
        hosts = self._listener(listener).virtual_hosts
        return _writable(hosts, fqdn) if fqdn in hosts else None

    def ensure_virtual_host(self, listener: str, fqdn: str) -> VirtualHost:
        self._all_frozen = False
        hosts = self._listener(listener).virtual_hosts
        if fqdn not in hosts:
            hosts[fqdn] = VirtualHost(fqdn)
        return _writable(hosts, fqdn)

    def get_secure_virtual_host(self, listener: str, fqdn: str) -> SecureVirtualHost | None:
        self._all_frozen = False
        hosts = self._listener(listener).secure_virtual_hosts
        return _writable(hosts, fqdn) if fqdn in hosts else None

    def ensure_secure_virtual_host(self, listener: str, fqdn: str) -> SecureVirtualHost:
        self._all_frozen = False
        hosts = self._listener(listener).secure_virtual_hosts
        if fqdn not in hosts:
            hosts[fqdn] = SecureVirtualHost(fqdn)
        return _writable(hosts, fqdn)

    def thaw(self) -> None:
        """Replace every frozen virtual host by a private, mutable copy (before a processor that
        may edit hosts it reached without the accessors runs: see ProcessorSpec.accessors_only)."""
        self._all_frozen = False
        if not self._frozen_hosts:
            return
        for listener in self.listeners.values():
            _thaw_all(listener.virtual_hosts)
            _thaw_all(listener.secure_virtual_hosts)
        self._frozen_hosts = False

    def add_virtual_hosts(self, listener: str, hosts: Mapping[str, VirtualHost]) -> None:
        """Install plain virtual hosts by name, typically frozen ones a processor keeps from build
        to build (:meth:`VirtualHost.freeze`): installed as they are, they cost the caches nothing
        while they stay the same objects.  A name the listener already has is an error: merge into
        that host through :meth:`ensure_virtual_host` instead."""
        self._all_frozen = False
        _add_hosts(self._listener(listener).virtual_hosts, hosts, listener)
        self._frozen_hosts = True

    def add_secure_virtual_hosts(self, listener: str, hosts: Mapping[str, SecureVirtualHost]) -> None:
        """:meth:`add_virtual_hosts` for secure virtual hosts."""
        self._all_frozen = False
        _add_hosts(self._listener(listener).secure_virtual_hosts, hosts, listener)
        self._frozen_hosts = True

    # -- status --------------------------------------------------------------------------------
    def add_note(self, key: ObjectKey, note: Note) -> None:
        self.notes.setdefault(key, []).append(note)

    def set_status(self, key: ObjectKey, status: dict[str, Any]) -> None:
        self.statuses[key] = status

    # -- walking -------------------------------------------------------------------------------
    def clusters(self) -> Iterator[Cluster]:
        """Every cluster a route, mirror or TCP proxy references (with repeats)."""
        return itertools.chain.from_iterable(self.cluster_walk())

    def cluster_walk(self) -> tuple[tuple[Cluster, ...], ...]:
        """:meth:`clusters` per virtual host, in order (memoised once sealed).  Two builds whose
        hosts are the very same (frozen) objects give equal walks, compared at the cost of one
        identity check per host: cheaper than hashing every node to compare :meth:`cluster_set`."""
        if self._cluster_walk is not None:
            return self._cluster_walk
        vhosts = self._all_virtual_hosts()
        if self._sealed:  # every host is frozen and knows its clusters
            walk = tuple([vhost._cluster_refs for vhost in vhosts])
        else:
            walk = tuple(tuple(vhost._clusters()) for vhost in vhosts)
        tcp = tuple(proxy.clusters for proxy in self._tcp_proxies())
        if tcp:
            walk += tcp
        if self._sealed:
            self._cluster_walk = walk
        return walk

    def unique_clusters(self) -> tuple[Cluster, ...]:
        """:meth:`clusters` without repeats, in first-seen order (memoised once sealed)."""
        if self._unique_clusters is not None:
            return self._unique_clusters
        unique = tuple(dict.fromkeys(self.clusters()))
        if self._sealed:
            self._unique_clusters = unique
        return unique

    def cluster_set(self) -> frozenset[Cluster]:
        """The distinct clusters, for order-insensitive comparison between builds (memoised).

        Unchanged nodes are usually the very same objects from build to build, so comparing two
        builds' sets costs little more than identity checks.
        """
        if self._cluster_set is not None:
            return self._cluster_set
        found = frozenset(self.unique_clusters())
        if self._sealed:
            self._cluster_set = found
        return found

    def _all_virtual_hosts(self) -> Iterator[VirtualHost]:
        return itertools.chain.from_iterable(
            itertools.chain(listener.virtual_hosts.values(), listener.secure_virtual_hosts.values())
            for listener in self.listeners.values()
        )

    def _tcp_proxies(self) -> list[TCPProxy]:
        """The TCP listeners' destinations (their clusters are in the walk after the hosts')."""
        return [listener.tcp_proxy for listener in self.listeners.values() if listener.tcp_proxy is not None]

    def service_ports(self) -> set[ServicePort]:
        """Every Service port whose endpoints Envoy needs (EDS)."""
        return {c.upstream for c in self.unique_clusters() if c.upstream.external_name is None}

    def secrets(self) -> set[Secret]:
        found: set[Secret] = set()
        for listener in self.listeners.values():
            for vhost in listener.secure_virtual_hosts.values():
                for secret in (vhost.secret, vhost.fallback_certificate):
                    if secret is not None:
                        found.add(secret)
        return found

    def prune(self, previous: DAG | None = None) -> None:
        """Drop what cannot be served: vhosts without routes, secure vhosts without a secret.
        Every virtual host left is frozen: nothing changes a sealed DAG.  The ``previous`` build's
        pruned DAG, when given, spares looking again at the hosts that are the same objects."""
        for name in list(self.listeners):
            listener = self.listeners[name]
            if listener.protocol is Protocol.TCP:
                listener.virtual_hosts, listener.secure_virtual_hosts = {}, {}  # never served there
            old = previous.listeners.get(name) if previous is not None and previous._sealed else None
            if old is None:
                listener.virtual_hosts = _valid_sorted(listener.virtual_hosts)
                listener.secure_virtual_hosts = _valid_sorted(listener.secure_virtual_hosts)
            else:
                listener.virtual_hosts = _valid_sorted(listener.virtual_hosts, old.virtual_hosts)
                listener.secure_virtual_hosts = _valid_sorted(
                    listener.secure_virtual_hosts, old.secure_virtual_hosts
                )
            if not listener.serves():
                del self.listeners[name]
        self._all_frozen = True
        for name in [n for n in self._listener_nodes if n in self.listeners]:
            node = self._listener_nodes.pop(name)
            self._note_node(node, "Listener", f"listener name {name!r} is already used by a core listener")


def _writable(hosts: dict[str, _Host], name: str) -> _Host:
    """The named host, replaced by a private copy first if it is frozen (copy on write)."""
    vhost = hosts[name]
    if vhost.frozen:
        vhost = vhost.thawed()
        hosts[name] = vhost
    return vhost


def _add_hosts(table: dict[str, _Host], hosts: Mapping[str, _Host], listener: str) -> None:
    taken = table.keys() & hosts.keys()
    if taken:
        raise ValueError(f"listener {listener!r} already has virtual hosts {sorted(taken)}")
    table.update(hosts)


def _thaw_all(hosts: dict[str, _Host]) -> None:
    for name in [name for name, vhost in hosts.items() if vhost.frozen]:
        hosts[name] = hosts[name].thawed()


def _writable_hosts(hosts: dict[str, _Host], fqdn: str | None) -> Iterator[_Host]:
    for name in list(hosts) if fqdn is None else [fqdn] if fqdn in hosts else []:
        yield _writable(hosts, name)


def _valid_sorted(hosts: dict[str, _Host], before: Mapping[str, _Host] | None = None) -> dict[str, _Host]:
    """The valid hosts by name, each frozen.  Hosts a processor kept (frozen, valid, in name
    order) cost a sort of sorted names and two passes; only new hosts are frozen here.

    With ``before`` (the same table of the previous build, pruned) and the same names in the same
    order, only the hosts that are other objects than before's are looked at: the rest is
    compared in C (one changed host among 10k costs a few C passes, not a sort and a Python one).
    """
    if before is not None and len(before) == len(hosts) and list(hosts) == list(before):
        replaced = itertools.compress(hosts.values(), map(operator.is_not, hosts.values(), before.values()))
        if all([vhost._valid for vhost in replaced]):  # only a frozen host is _valid
            return hosts
    names = sorted(hosts)  # sorting the names alone: twice as fast as sorting the items
    # Comprehensions: on attrs instances, faster than map(attrgetter(...)) (design 0021).
    if all([vhost._valid for vhost in hosts.values()]) and names == list(hosts):
        return hosts  # frozen, valid and in order (a processor's kept hosts): as they are
    vhosts = [hosts[name] for name in names]
    for vhost in [vhost for vhost in vhosts if not vhost._frozen]:
        vhost.freeze()
    valid = [vhost._valid for vhost in vhosts]
    return dict(zip(itertools.compress(names, valid), itertools.compress(vhosts, valid), strict=True))
