"""The frozen records plugins yield from the registration hooks (see :mod:`cpx.hookspecs`).

The core inspects these records to order processors, refuse conflicts and describe plugins in
``cpx plugins list``; no plugin registers itself into global state.
"""

from __future__ import annotations

import enum
import importlib
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from cpx.dag.attachments import NO_ATTACHMENTS, Attachments
from cpx.dag.nodes import AuthorityCheck
from cpx.objects import GroupVersionKind

if TYPE_CHECKING:
    from envoy.config.cluster.v3 import cluster_pb2
    from envoy.config.listener.v3 import listener_pb2
    from google.protobuf.message import Message

    from cpx.config import Config
    from cpx.dag.dag import DAG, Note, VirtualHost
    from cpx.dag.nodes import Cluster, LoadAssignment, Route, Secret, ServicePort
    from cpx.isolation import Fault
    from cpx.sources.view import SourceView
    from cpx.xds.resource import Resource


class Deferred:
    """A record's function named by ``"module:attribute"`` (dots in the attribute for a class's
    method), imported at its first call: a plugin's heavy modules (its model, processor, schema,
    status) then load only when an object of its kinds needs them.

    **Example**::

        WatchSpec(gvk=HTTPPROXY, validate=Deferred("my_plugin.schema:validate"))
    """

    __slots__ = ("_target", "ref")

    def __init__(self, ref: str) -> None:
        module, colon, attribute = ref.partition(":")
        if not (module and colon and attribute):
            raise ValueError(f"expected 'module:attribute', got {ref!r}")
        self.ref = ref
        self._target: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        target = self._target
        if target is None:
            target = self.resolve()
        return target(*args, **kwargs)

    def resolve(self) -> Callable[..., Any]:
        """The function itself (imported now if need be), for callers that keep it."""
        if self._target is None:
            module, _, attribute = self.ref.partition(":")
            self._target = operator.attrgetter(attribute)(importlib.import_module(module))
        return self._target

    def __repr__(self) -> str:
        return f"Deferred({self.ref!r})"


class Processor(Protocol):
    """Adds to the DAG what one kind of source object asks for."""

    def run(self, dag: DAG, source: SourceView) -> None: ...


class Observer(Protocol):
    """Is told about every newly built DAG."""

    def on_change(self, dag: DAG) -> None: ...


class ResourceCache(Observer, Protocol):
    """Holds the xDS resources of one type URL, recomputed from each DAG."""

    type_url: str

    def contents(self) -> Mapping[str, Resource]: ...


@runtime_checkable
class CheckingCache(ResourceCache, Protocol):
    """A resource cache that checks what it builds against Envoy's rules itself, piece by piece
    as it translates (so that the cost follows the change), instead of the pipeline checking its
    whole resources.  ``faults()`` are the pieces of the last DAG it left out, each naming the
    objects it came from (see :mod:`cpx.isolation`)."""

    def faults(self) -> Sequence[Fault]: ...


@runtime_checkable
class SourceBound(Protocol):
    """A resource cache that reads the source itself (e.g. EndpointSlices for EDS): the snapshot
    handler binds it to the source once, before the first DAG."""

    def bind_source(self, source: SourceView) -> None: ...


@runtime_checkable
class EndpointsObserver(Protocol):
    """A resource cache with a fast path for endpoint changes: told which (namespace, service)
    pairs' EndpointSlices changed, it updates itself without a DAG rebuild and answers whether
    its contents changed."""

    def on_endpoints_change(self, source: SourceView, services: Iterable[tuple[str, str]]) -> bool: ...


class Phase(enum.IntEnum):
    """Coarse processor ordering; ``after``/``before`` order processors within and across phases."""

    LISTENERS = 100  # create listeners (static ones, Gateway listeners)
    ROUTES = 200  # kinds that add virtual hosts and routes (Ingress, HTTPProxy, routes)
    POLICIES = 300  # attach policies to what the route processors built
    FINALIZE = 400  # last look before pruning


@attrs.frozen(kw_only=True)
class WatchSpec:
    """A Kubernetes kind a plugin needs watched (and, in standalone mode, read from files).

    **Example**::

        WatchSpec(gvk=INGRESS, accept=class_matches, validate=schema.problems)
    """

    gvk: GroupVersionKind
    # Whether this object is ours at all (e.g. ingress class); rejected objects are not cached.
    accept: Callable[[Mapping[str, Any], Config], bool] | None = None
    # Whether a change to an accepted object needs a DAG rebuild (default: always).
    triggers_rebuild: Callable[[Mapping[str, Any], SourceView], bool] | None = None
    # Schema checks the API server would do (standalone mode has none): returns problems found.
    validate: Callable[[Mapping[str, Any]], list[str]] | None = None
    # Optional: when set, a Kubernetes field selector for list/watch (e.g. to skip Helm Secrets).
    field_selector: str | None = None

    @property
    def name(self) -> str:
        return str(self.gvk)


@attrs.frozen(kw_only=True)
class ProcessorSpec:
    """A DAG processor: ``factory(config)`` builds it once per run; its ``run(dag, source)`` is
    called on every build, in the order of ``phase`` then ``after``/``before`` then name.

    ``accessors_only=True`` declares that it changes virtual hosts only through the DAG's
    accessors (``ensure_*``, ``get_*``, ``virtual_hosts()``, which copy a frozen host on write) or
    not at all.  Without it (what a processor written before frozen hosts may assume), every
    frozen host in the DAG is copied before it runs, so it may edit any host it finds, at the cost
    of that copy in every build and of the caches' identity fast path (docs/design/0021).

    **Example**::

        ProcessorSpec(name="ingress", factory=IngressProcessor, phase=Phase.ROUTES, after=("listeners",))
    """

    name: str
    factory: Callable[[Config], Processor]
    phase: Phase = Phase.ROUTES
    after: tuple[str, ...] = ()
    before: tuple[str, ...] = ()
    description: str = ""
    accessors_only: bool = False
    # Names of the DAG registries it publishes into (cpx.dag.registry): readers can then tell a
    # missing object from a registry no enabled plugin fills.
    publishes: tuple[str, ...] = ()
    # The kinds it translates, when it adds, reads and reports nothing while the source holds no
    # object of any of them: its factory is then called (a Deferred one imports its modules), and
    # the processor run, from the first build with such an object on.  Empty: built at start-up.
    inputs: tuple[GroupVersionKind, ...] = ()


@attrs.frozen(kw_only=True)
class ResourceCacheSpec:
    """An xDS resource cache for one type URL no other plugin serves: ``factory(config)`` builds it
    once; it observes every new DAG and the snapshot handler publishes its ``contents()``.

    **Example**::

        ResourceCacheSpec(name="runtime", type_url=RUNTIME_TYPE_URL, factory=RuntimeCache)
    """

    name: str
    type_url: str
    factory: Callable[[Config], ResourceCache]


@attrs.frozen(kw_only=True)
class StatusWriterSpec:
    """Owns the status subresource of one kind.

    ``merge(current, computed)`` returns the status to write given the object's current status and
    the one the last build computed (the default replaces it); returning None means "no change".
    A status shared with other controllers (Gateway API's) keeps their entries this way: in
    Kubernetes mode the leader writes only the fields the merge changed (a JSON merge patch of the
    status subresource, with the object's resourceVersion as a precondition).

    ``refused(obj, notes)`` is the status of an object cpx left out of the configuration because
    translating it broke something (it raised, or produced what Envoy would reject): the notes
    say what.  Without it such objects get an empty status (their notes still show in logs,
    ``cpx translate`` and the status file).

    ``load_balancer`` opts the kind in to the Envoy Service's address (Contour's
    loadBalancerStatusWriter): given that Service's ``status.loadBalancer`` (a core/v1
    LoadBalancerStatus) and one object's computed status, it returns the status to merge: the
    computed one with the address put in the kind's own shape, e.g.
    ``{**computed, "loadBalancer": service_lb}`` (HTTPProxy; Ingress converts it to a networking/v1
    IngressLoadBalancerStatus), or ``computed`` itself for an object the address is not for (it
    sees the computed status, so it can tell: a Gateway with an address of its own, another
    controller's object with an empty computed status).  It may change other fields the address
    decides (a Gateway's ``Programmed`` condition).  In Kubernetes mode the status updater applies
    it to each computed status before ``merge`` (a raise is a failed write, retried later) and
    rewrites the kind's objects when the address changes; with ``--ingress-status-address`` the
    Service is not watched (the processors put the flag's address in the computed status).

    ``writes=False`` reports the kind's statuses and notes (logs, ``cpx translate``, the standalone
    status file) without ever writing them to the API server: for a kind whose reference
    controller leaves its status alone (so cpx needs no RBAC on its status either).

    **Example**::

        StatusWriterSpec(name="httpproxy", gvk=HTTPPROXY, merge=status.merge, refused=status.refused)
    """

    name: str
    gvk: GroupVersionKind
    merge: Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any] | None] | None = None
    refused: Callable[[Mapping[str, Any], Sequence[Note]], Mapping[str, Any]] | None = None
    load_balancer: Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]] | None = None
    writes: bool = True


@attrs.frozen(kw_only=True)
class OptionSpec:
    """A ``cpx serve`` / ``cpx translate`` option a plugin contributes (value in ``Config.options``).

    ``config_key`` is the option's key in Contour's configuration file (``cpx serve -c``), a
    dotted path such as ``"tls.fallback-certificate"``: the file's value goes through the flag's
    own type check, a flag given on the command line wins, and a Contour ``{namespace, name}``
    reference becomes ``"namespace/name"``.  ``config_convert`` turns a file value the flag
    cannot take as it is (a mapping, a list of records) into the flag's value, e.g. a mapping
    into the YAML/JSON text the flag takes or into ``key=value`` items; a ``ValueError`` refuses
    the file with the key's path and its message.

    **Example**::

        OptionSpec(name="root_namespaces", help="Namespaces of root HTTPProxies", multiple=True)
        OptionSpec(name="fallback_certificate", help="...", config_key="tls.fallback-certificate")
        OptionSpec(name="context", help="key=value ...", multiple=True, config_key="auth.context",
                   config_convert=lambda found: tuple(f"{k}={v}" for k, v in found.items()))
    """

    name: str  # the Python name, e.g. "ingress_class_name"; the flag is --ingress-class-name
    help: str
    default: Any = None
    multiple: bool = False
    type: type = str
    config_key: str | None = None  # Contour's configuration file key, e.g. "disablePermitInsecure"
    config_convert: Callable[[Any], Any] | None = None  # the file's value -> the flag's

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _nothing(node: Any) -> tuple[()]:
    """none (returns ``()``)"""
    return ()


@attrs.frozen(kw_only=True)
class ClusterKindSpec:
    """How to turn a plugin's own cluster node into an Envoy Cluster.

    A processor adds nodes of ``node_type`` (a frozen attrs class with ``name`` and ``origin``,
    see :class:`cpx.dag.nodes.CustomNode`) with ``dag.add_cluster_node(node)``; the CDS cache
    calls ``build(node)`` once per distinct node value and publishes the result under the
    node's name.  ``service_ports(node)`` are the Service ports whose endpoints the cluster reads
    over EDS (one ClusterLoadAssignment per port, named by ``ServicePort.eds_name``: point the
    cluster's ``eds_cluster_config.service_name`` at it); ``secrets(node)`` are the Secrets it
    references over SDS (by ``cpx.xds.naming.secret_name``).  A node that fails to build or
    breaks Envoy's rules is left out and its origin object gets the note.

    **Example**::

        ClusterKindSpec(name="extension", node_type=ExtensionCluster, build=grpc_cluster,
                        service_ports=lambda node: node.upstreams)
    """

    name: str
    node_type: type
    build: Callable[[Any], cluster_pb2.Cluster]  # the whole Cluster, name included
    service_ports: Callable[[Any], Iterable[ServicePort]] = _nothing
    secrets: Callable[[Any], Iterable[Secret]] = _nothing
    # ClusterLoadAssignments merging several Service ports, each one weighted locality (point
    # ``eds_cluster_config.service_name`` at ``LoadAssignment.name``).
    load_assignments: Callable[[Any], Iterable[LoadAssignment]] = _nothing
    description: str = ""


@attrs.frozen(kw_only=True)
class ListenerKindSpec:
    """How to turn a plugin's own listener node into an Envoy Listener.

    A processor adds nodes of ``node_type`` with ``dag.add_listener_node(node)``; the LDS cache
    calls ``build(node)`` once per distinct node value: the whole Listener, its own address,
    port and filter chains.  ``secrets(node)`` are served over SDS; ``clusters(node)`` names the
    clusters its chains reference.  (A listener that only needs the core's standard chains,
    HTTP routes, SNI or tcp_proxy, is simpler: ``dag.ensure_listener(name, protocol, address, port)``.)

    **Example**::

        ListenerKindSpec(name="tcp-echo", node_type=EchoListener, build=echo_listener,
                         clusters=lambda node: (node.cluster,))
    """

    name: str
    node_type: type
    build: Callable[[Any], listener_pb2.Listener]
    secrets: Callable[[Any], Iterable[Secret]] = _nothing
    clusters: Callable[[Any], Iterable[str]] = _nothing  # cluster names it references
    description: str = ""


@attrs.frozen(kw_only=True, cache_hash=True)
class FilterSite:
    """Where a connection manager is being built: which HTTP filters it carries may depend on it.

    **Example**::

        def misdirected_check(site: FilterSite) -> Message | None:
            # Only on SNI chains of a named host: the 421 check compares :authority with the SNI.
            named = site.virtual_host not in (None, "*")
            return lua_421(site.virtual_host) if site.secure and named else None
    """

    listener: str  # the DAG listener's name, e.g. "ingress_https"
    virtual_host: str | None  # the SNI filter chain's fqdn; None for a plain HTTP or the fallback chain
    secure: bool  # TLS-terminating chain
    authority_check: AuthorityCheck | None = None  # the SNI chain's virtual host's (421 rule)
    # The SNI chain's virtual host's attachments, or on a plain HTTP chain the listener's (empty
    # on fallback chains): a filter whose config is per host or per listener (e.g. external
    # authorization, a global one on plain HTTP) reads its data here.
    attachments: Attachments = NO_ATTACHMENTS
    # The DAG's own attachments (DAG.attachments), the same on every chain: a filter whose
    # config depends on an object (e.g. the rate limit service's ExtensionService) reads it here.
    dag_attachments: Attachments = NO_ATTACHMENTS


@attrs.frozen(kw_only=True, cache_hash=True)
class RouteSite:
    """Where a route is being translated: the virtual host it is served on.

    **Example**::

        def rate_limit(route: Route, site: RouteSite) -> Message | None:
            limit = route.local_rate_limit
            return None if limit is None else bucket(limit, stat_prefix="vhost." + site.virtual_host)
    """

    virtual_host: str  # the virtual host's fqdn
    secure: bool  # an HTTPS virtual host (an HTTPS-upgrade route only redirects on the plain one)


@attrs.frozen(kw_only=True, cache_hash=True)  # a memo key of every filter chain and route
class HttpFilterSpec:
    """An Envoy HTTP filter of every HTTP connection manager, and its per-host/per-route configs.

    The functions return plain protobuf messages (the core packs them into ``Any``, memoised by
    identity: return the same object for the same input and never change it afterwards); None
    leaves the filter off that chain, or without config on that virtual host, route or cluster.
    ``per_route_at`` is ``per_route`` for configs that depend on the virtual host the route is
    served on; a spec sets at most one of the two.  Translation is memoised on DAG nodes, so
    these functions must depend only on their arguments (attachments included).

    **Example**::

        HttpFilterSpec(name="envoy.filters.http.header_mutation", config=lambda site: HeaderMutation(),
                       after=("envoy.filters.http.rbac",), per_route=headers_of_route)
    """

    name: str  # Envoy's filter name; also the typed_per_filter_config key
    config: Callable[[FilterSite], Message | None]  # listener-level typed_config; None: not on this chain
    after: tuple[str, ...] = ()  # filter names this one must come after
    before: tuple[str, ...] = ()  # ... and before
    per_virtual_host: Callable[[VirtualHost], Message | None] | None = None
    per_route: Callable[[Route], Message | None] | None = None
    per_route_at: Callable[[Route, RouteSite], Message | None] | None = None
    per_weighted_cluster: Callable[[Route, Cluster], Message | None] | None = None
    # Fields the filter reads from the route's own RouteAction or VirtualHost rather than from
    # typed_per_filter_config (the global rate limit's ``rate_limits``): a partial
    # ``envoy.config.route.v3.RouteAction`` / ``VirtualHost`` merged into the one built (MergeFrom).
    # ``route_action`` applies to routes that forward to clusters (redirects and direct responses
    # have no RouteAction); ``virtual_host_fields`` may set only fields numbered after ``routes``.
    route_action: Callable[[Route], Message | None] | None = None
    virtual_host_fields: Callable[[VirtualHost], Message | None] | None = None
    # What the route functions (per_route / per_route_at, route_action, per_weighted_cluster)
    # read, when that is all they read: the names of attachment keys (AttachmentKey.name) and of
    # Route or Cluster attributes.  They must return None for a route on which none of those keys
    # is attached and none of those attributes is set (truthy), on the route or its clusters: the
    # core then does not call them for it (most routes carry no attachment and few policies).
    # Both None: called for every route.
    route_keys: tuple[str, ...] | None = None
    route_fields: tuple[str, ...] | None = None
    description: str = ""
