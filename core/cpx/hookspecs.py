# mypy: disable-error-code="empty-body"
# (hookspecs are signatures with docstrings; pluggy never calls their bodies)
"""Every hook a cpx plugin can implement, grouped by phase.

A plugin is a module (or object) named by an entry point in the ``cpx.plugins`` group; its
functions decorated with :data:`cpx.hookimpl` implement the hooks below.  Registration hooks are
called once after the enabled plugins are loaded and return (or yield) frozen records from
:mod:`cpx.records`; the core, not the plugin, decides what to do with them.  Call hooks with keyword
arguments only; a hookimpl must not give its arguments defaults (pluggy would not pass them).

A plugin exception raised from a registration hook aborts start-up with the plugin's name; one
raised by a processor during a build aborts that build only, and the last good configuration keeps
being served.

Every hook is called through pluggy (one call per implementing plugin for registration hooks and
``cpx_configure``, see :mod:`cpx.plugins`), so hook wrappers (``@hookimpl(wrapper=True)``) see
them and ``--trace-plugins`` logs them.  Start-up order: options, then ``cpx_configure``, then
the registration hooks whose records build the processors, caches and status writers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from cpx.config import Config
    from cpx.objects import ObjectKey
    from cpx.records import (
        ClusterKindSpec,
        HttpFilterSpec,
        ListenerKindSpec,
        OptionSpec,
        ProcessorSpec,
        ResourceCacheSpec,
        StatusWriterSpec,
        WatchSpec,
    )
    from cpx.sources.view import SourceView
    from cpx.testing.strategies import KindStrategy

PROJECT = "cpx"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --- Bootstrapping ---------------------------------------------------------------------------


@hookspec(historic=True)
def cpx_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hookspecs that other plugins may implement.

    **When it is called**: once per plugin, as it is registered (historic: plugins registered
    later see it too).

    :param pluginmanager: the pluggy manager; call ``pluginmanager.add_hookspecs(module)``.

    **Returns**: nothing.

    **Ordering and conflicts**: a hook name defined twice is an error raised by pluggy.

    **Example**::

        @hookimpl
        def cpx_addhooks(pluginmanager):
            from my_plugin import hooks
            pluginmanager.add_hookspecs(hooks)
    """


# --- Registration ----------------------------------------------------------------------------


@hookspec
def cpx_options() -> Iterable[OptionSpec]:
    """Declare the command-line options this plugin reads from ``Config.options``.

    **When it is called**: while ``cpx serve`` / ``cpx translate`` parse their arguments, after
    ``--plugins`` has selected the plugins.

    **Returns**: an iterable of :class:`cpx.records.OptionSpec`.

    **Ordering and conflicts**: two plugins declaring the same option name is a start-up error
    naming both.

    **Example**::

        @hookimpl
        def cpx_options():
            yield OptionSpec(name="ingress_class_name", help="Ingress classes to serve", multiple=True)
    """


@hookspec
def cpx_watches() -> Iterable[WatchSpec]:
    """Declare the Kubernetes kinds this plugin needs watched (and accepts in manifests).

    **When it is called**: once, after loading; the sources then list/watch (or read from
    files) every declared kind.

    **Returns**: an iterable of :class:`cpx.records.WatchSpec`.

    **Ordering and conflicts**: two plugins declaring the same group/kind is an error; the core
    declares Service, EndpointSlice, Secret and Namespace.

    **Example**::

        @hookimpl
        def cpx_watches():
            yield WatchSpec(gvk=INGRESS, accept=class_matches)
    """


@hookspec
def cpx_dag_processors(config: Config) -> Iterable[ProcessorSpec]:
    """Register the DAG processors this plugin contributes.

    **When it is called**: once, after :func:`cpx_configure` (an implementation may leave the
    ``config`` argument out; ``cpx plugins list`` passes the defaults); the builder then runs every
    processor on each build, in the order given by the records' ``phase``, ``after`` and ``before``
    (never by registration order).  A processor whose record names its ``inputs`` is built and
    run only from the first build with an object of one of those kinds: until then its factory,
    a :class:`cpx.Deferred` one, imports nothing.

    **Returns**: an iterable of :class:`cpx.records.ProcessorSpec`.

    **Ordering and conflicts**: processors sort by phase, then satisfy ``after``/``before``
    constraints, then by name.  A duplicate name, an unknown name in a constraint or a cycle is a
    start-up error naming the processors involved.

    **Example**::

        @hookimpl
        def cpx_dag_processors():
            yield ProcessorSpec(name="ingress", factory=IngressProcessor.from_config,
                                phase=Phase.ROUTES, after=("listeners",))

    :param config: the configuration ``cpx_configure`` received (options included).
    """


@hookspec
def cpx_resource_caches() -> Iterable[ResourceCacheSpec]:
    """Register xDS resource caches, one per type URL.

    **When it is called**: once, after loading; each cache observes every new DAG and the
    snapshot handler publishes their contents.  Before they are published, every new resource
    is checked against Envoy's rules and an object that breaks one is left out, unless the cache
    is a :class:`cpx.records.CheckingCache` that checks its pieces itself as it builds them.

    **Returns**: an iterable of :class:`cpx.records.ResourceCacheSpec`.

    **Ordering and conflicts**: two caches for the same type URL is a start-up error naming both
    plugins.  The core registers LDS, RDS, CDS, EDS and SDS; a plugin registers a cache only for
    a type no one else serves.

    **Example**::

        @hookimpl
        def cpx_resource_caches():
            yield ResourceCacheSpec(name="runtime", type_url=RUNTIME_TYPE, factory=RuntimeCache)
    """


@hookspec
def cpx_status_writers() -> Iterable[StatusWriterSpec]:
    """Register the status writer for each kind this plugin owns.

    **When it is called**: once, after loading; after every build the status computed for
    objects of that kind goes through the writer (to the API server, the status file, or the
    ``cpx translate`` output).

    **Returns**: an iterable of :class:`cpx.records.StatusWriterSpec`.

    **Ordering and conflicts**: two writers for the same kind is a start-up error.

    **Example**::

        @hookimpl
        def cpx_status_writers():
            yield StatusWriterSpec(name="ingress", gvk=INGRESS)
    """


@hookspec
def cpx_listener_kinds() -> Iterable[ListenerKindSpec]:
    """Contribute listener kinds: Envoy listeners a plugin builds whole (address, port, protocol,
    filter chains), e.g. a Gateway listener with a protocol the core does not know.

    **When it is called**: once, after loading; the LDS cache then translates every node a
    processor adds with ``dag.add_listener_node(node)`` through the kind whose ``node_type`` is
    the node's type, once per distinct node value.  A listener served with the core's own chains
    (HTTP routes, SNI virtual hosts, tcp_proxy) needs no kind: ``dag.ensure_listener(name,
    protocol, address, port)`` on an address and port of the plugin's choosing.

    **Returns**: an iterable of :class:`cpx.records.ListenerKindSpec`.

    **Ordering and conflicts**: two kinds with the same name or node type is a start-up error
    naming both plugins.  A node whose type no kind claims, whose build raises, or whose Listener
    breaks Envoy's rules (or has no name, filter chain or port, or takes another listener's
    name or address) is left out; its origin object gets the note.

    **Example**::

        @attrs.frozen
        class EchoListener:
            name: str
            origin: ObjectKey | None
            port: int
            cluster: str

        def echo_listener(node):
            listener = listener_pb2.Listener(name=node.name)
            ...  # address, filter chains with a tcp_proxy to node.cluster
            return listener

        @hookimpl
        def cpx_listener_kinds():
            yield ListenerKindSpec(name="echo", node_type=EchoListener, build=echo_listener,
                                   clusters=lambda node: (node.cluster,))
    """


@hookspec
def cpx_cluster_kinds() -> Iterable[ClusterKindSpec]:
    """Contribute cluster kinds: Envoy clusters no route references, e.g. an ExtensionService's
    gRPC cluster for ext_authz or a JWKS cluster.

    **When it is called**: once, after loading; the CDS cache translates every node a processor
    adds with ``dag.add_cluster_node(node)`` through the kind claiming its type (once per
    distinct value), the EDS cache serves the endpoints of its ``service_ports`` and the SDS
    cache its ``secrets``.

    **Returns**: an iterable of :class:`cpx.records.ClusterKindSpec`.

    **Ordering and conflicts**: two kinds with the same name or node type is a start-up error
    naming both plugins.  Two nodes with one name keep the first (the later origin gets a
    note); a node whose type no kind claims, whose build raises, whose Cluster breaks Envoy's
    rules or takes a core cluster's name is left out and its origin gets the note.

    **Example**::

        @attrs.frozen
        class AuthCluster:
            name: str
            origin: ObjectKey | None
            upstream: ServicePort

        def auth_cluster(node):
            cluster = cluster_pb2.Cluster(name=node.name, type=cluster_pb2.Cluster.EDS)
            cluster.eds_cluster_config.service_name = node.upstream.eds_name
            cluster.eds_cluster_config.eds_config.ads.SetInParent()
            cluster.eds_cluster_config.eds_config.resource_api_version = config_source_pb2.V3
            return cluster

        @hookimpl
        def cpx_cluster_kinds():
            yield ClusterKindSpec(name="auth", node_type=AuthCluster, build=auth_cluster,
                                  service_ports=lambda node: (node.upstream,))
    """


@hookspec
def cpx_http_filters(config: Config) -> Iterable[HttpFilterSpec]:
    """Contribute Envoy HTTP filters to every HTTP connection manager, with their per-virtual-host,
    per-route and per-weighted-cluster ``typed_per_filter_config``.

    **When it is called**: once, after :func:`cpx_configure` (``config`` is the final
    configuration, so a filter may depend on options; an implementation may leave the argument
    out; ``cpx plugins list`` passes the defaults).  The listener and route caches then call the
    records' functions while they translate: ``config`` for each connection manager's site
    (:class:`cpx.records.FilterSite`; None leaves the filter off that chain), ``per_virtual_host``,
    ``per_route`` (or ``per_route_at``, which also gets the :class:`cpx.records.RouteSite`) and
    ``per_weighted_cluster`` for each new DAG node (None: no config there), and ``route_action`` /
    ``virtual_host_fields`` for settings Envoy reads from the route's RouteAction or the
    VirtualHost itself (partial messages merged into them, e.g. ``rate_limits``).  They return plain
    protobuf messages; a node's own data comes from its ``attachments``
    (:class:`cpx.dag.AttachmentKey`), set by the plugin's processor.  A record that names what its
    route functions read (``route_keys``: attachment key names; ``route_fields``: Route or Cluster
    attributes) is not asked about routes carrying none of it (most routes, at no cost per filter).
    The core's 421, compressor, gRPC-Web, gRPC statistics, CORS, local rate limit, cookie-rewrite,
    RBAC and router filters are contributions of the builtin plugin.

    **Returns**: an iterable of :class:`cpx.records.HttpFilterSpec`.

    **Ordering and conflicts**: filters sort topologically by ``after``/``before`` (filter names),
    ties broken by plugin (load order, the core first) then by name; the router is always last,
    so a filter without constraints lands after the core's policy filters, just before it.  A
    duplicate name, a constraint naming a filter no enabled plugin contributes, and a cycle are
    start-up errors naming the plugins involved.

    **Example**::

        HEADERS = AttachmentKey("my-plugin/headers", HeaderMutationPerRoute)

        @hookimpl
        def cpx_http_filters():
            yield HttpFilterSpec(
                name="envoy.filters.http.header_mutation",
                config=lambda site: HeaderMutation(),
                after=("envoy.filters.http.rbac",),
                per_route=lambda route: route.attachments.get(HEADERS),
            )

    :param config: the configuration ``cpx_configure`` received (options included).
    """


# --- Lifecycle -------------------------------------------------------------------------------


@hookspec
def cpx_configure(config: Config) -> None:
    """Receive the final configuration before anything is built from the plugin's records.

    **When it is called**: once, after options are parsed and before ``cpx_watches``,
    ``cpx_dag_processors``, ``cpx_resource_caches`` and ``cpx_status_writers`` are called (so
    their records may depend on the configuration) and before any source is read.

    :param config: the run's configuration, plugin options included.

    **Returns**: nothing.  Raise :class:`cpx.errors.ConfigError` to refuse a bad option value,
    or :class:`cpx.PluginDeclined` (with the reason) to sit this run out: the plugin is
    unregistered, the reason is logged once and none of its records are used.  Any other
    exception is a start-up error naming the plugin.

    **Ordering and conflicts**: every plugin is called; order is not specified.

    **Example**::

        @hookimpl
        def cpx_configure(config):
            if not config.option("my_feature"):
                raise PluginDeclined("--my-feature is off")
            parse_class_names(config.option("ingress_class_name", ()))
    """


@hookspec
def cpx_unconfigure(config: Config) -> None:
    """Release what ``cpx_configure`` acquired.

    **When it is called**: once, at shutdown.

    :param config: the same configuration ``cpx_configure`` received.

    **Returns**: nothing.

    **Ordering and conflicts**: every plugin is called; order is not specified.

    **Example**::

        @hookimpl
        def cpx_unconfigure(config):
            close_connections()
    """


# --- Policy ----------------------------------------------------------------------------------


@hookspec(firstresult=True)
def cpx_secret_access_permitted(
    secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView
) -> bool | None:
    """Answer whether ``referrer`` may use the Secret ``secret_namespace/secret_name``.

    **When it is called**: by processors, during a build, whenever an object references a Secret
    in another namespace than its own.

    :param secret_namespace: the Secret's namespace.
    :param secret_name: the Secret's name.
    :param referrer: the object asking (e.g. an Ingress).
    :param source: the read-only :class:`cpx.SourceView`, to look up delegation objects (read
        them through it: the referrer is then re-translated when they change).

    **Returns**: True or False for the referrers this plugin judges (False: refused, in the
    referring kind's own wording, e.g. Contour's ``DelegationNotPermitted``); None to let another
    plugin decide.  Stops at first non-None result.  The core's own answer (registered
    ``trylast``) allows the same namespace and is None otherwise: when no plugin answers, the
    lookup raises :class:`cpx.DelegationNotEnabledError`, so the referrer's status can say that no
    delegation mechanism is enabled rather than that the user's delegation is missing.

    **Ordering and conflicts**: the first plugin to answer decides; ``tryfirst`` answers first.
    Plugins judging different referrer kinds (each with its own grant objects) each return None
    for the kinds they leave alone.

    **Example**::

        @hookimpl
        def cpx_secret_access_permitted(secret_namespace, secret_name, referrer, source):
            if referrer.kind != "MyKind":
                return None
            return delegated(source, secret_namespace, secret_name, referrer.namespace)
    """


# --- Testing ---------------------------------------------------------------------------------


@hookspec
def cpx_fuzz_strategies() -> Iterable[KindStrategy]:
    """Contribute Hypothesis strategies that generate objects of the kinds this plugin declares.

    **When it is called**: only by fuzzing tools (``tests/fuzz``, :mod:`cpx.testing.strategies`),
    never by ``cpx serve``; import hypothesis inside the implementation, so that the plugin loads
    without it.

    **Returns**: an iterable of :class:`cpx.testing.strategies.KindStrategy` (a kind and a
    function from the shared :class:`~cpx.testing.strategies.World` to a strategy of
    schema-plausible objects, and optionally an ``environment``: valid objects those mostly need
    beside them, e.g. the Gateway routes attach to); the fuzzer adds type-confused mutations itself.

    **Ordering and conflicts**: every record is used; two for one kind both generate objects.

    **Example**::

        @hookimpl
        def cpx_fuzz_strategies():
            from my_plugin.strategies import STRATEGIES
            yield from STRATEGIES
    """
