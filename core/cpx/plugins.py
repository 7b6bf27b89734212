"""Plugin discovery (stevedore), hook calls (pluggy) and a typed facade over both.

Core code never calls ``pm.hook.*`` directly: it asks :class:`PluginHost` for typed, validated,
deterministically ordered records.  Every failure names the plugin at fault; nothing is skipped
silently.

Registration hooks and ``cpx_configure`` go through real pluggy hook calls, one per implementing
plugin: a *subset* hook caller that leaves out every other plugin's plain implementation.  So each
call yields one plugin's records (errors name that plugin, records can be attributed and sorted),
while every plugin's wrappers (``wrapper=True`` / ``hookwrapper=True``), pluggy's tracing and
hook-call monitoring apply as they do to any hook call (``--trace-plugins`` logs them all).  One
limit: a plugin that both wraps a hook and implements it plainly (via ``specname``) has its
wrapper left out of the other plugins' calls.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import attrs
import pluggy
from stevedore import NamedExtensionManager

from cpx import hookspecs
from cpx.config import Config
from cpx.dag.builder import order_processors
from cpx.errors import ConfigError, PluginDeclined, PluginError
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
from cpx.xds.contributions import Contributions
from cpx.xds.httpfilters import order_http_filters

GROUP = "cpx.plugins"
CORE_PLUGIN = "core"  # the core's own defaults, always loaded first
T = TypeVar("T")
K = TypeVar("K", ListenerKindSpec, ClusterKindSpec)
log = logging.getLogger("cpx.plugins")
trace_log = logging.getLogger("cpx.plugins.trace")
# The core option that turns pluggy's tracing on (declared by the builtin plugin).
TRACE_OPTION = OptionSpec(
    name="trace_plugins",
    help="Log every plugin hook call (pluggy's tracing): which hook, which plugins, what it returned.",
    default=False,
    type=bool,
)


@attrs.frozen(kw_only=True)
class PluginInfo:
    name: str
    distribution: str
    version: str
    module: str


def available_plugins() -> list[PluginInfo]:
    """Every installed plugin's entry point, read without importing the plugin."""
    return [
        PluginInfo(name=name, distribution=_distribution(ep), version=_version(ep), module=ep.value)
        for name, ep in sorted(_entry_points().items())
    ]


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed plugins by name.  A distribution's metadata is read only for a name found twice:
    reading it (an email-format parse per distribution) was a third of loading the plugins'
    names, which every command does."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        previous = found.get(ep.name)
        if previous is not None and _distribution(previous) != _distribution(ep):
            raise PluginError(
                f"plugin name {ep.name!r} is claimed by two distributions: "
                f"{_distribution(previous)} and {_distribution(ep)}"
            )
        found[ep.name] = ep
    return found


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    return ep.dist.metadata["Name"] if ep.dist is not None else "?"


def _version(ep: importlib.metadata.EntryPoint) -> str:
    return ep.dist.version if ep.dist is not None else "?"


def _raise_load_failure(manager: Any, entrypoint: Any, exc: BaseException) -> None:
    raise PluginError(f"plugin {entrypoint.name!r} ({entrypoint.value}) failed to load: {exc}") from exc


def _log_trace(text: str) -> None:
    for line in text.rstrip().splitlines():  # one record per line: log lines stay one line each
        trace_log.info("%s", line)


@attrs.define(eq=False)
class PluginHost:
    """The loaded plugins and a typed view of what they contribute."""

    pm: pluggy.PluginManager
    names: tuple[str, ...]
    # Plugins that opted out in cpx_configure (PluginDeclined), with their reasons.
    declined: dict[str, str] = attrs.field(factory=dict)
    # What configure() was given (the defaults before): hooks whose records depend on options get it.
    config: Config = attrs.field(factory=Config)
    _tracing: bool = False

    @classmethod
    def load(cls, names: Sequence[str] | None = None) -> PluginHost:
        """Load the named plugins (default: every installed one) plus the core's own."""
        installed = dict(sorted(_entry_points().items()))
        wanted = list(names) if names is not None else [n for n in installed if n != CORE_PLUGIN]
        missing = [n for n in wanted if n not in installed]
        if missing:
            choices = ", ".join(n for n in installed if n != CORE_PLUGIN) or "none"
            raise PluginError(f"unknown plugin(s): {', '.join(missing)} (installed: {choices})")
        ordered = [CORE_PLUGIN, *[n for n in dict.fromkeys(wanted) if n != CORE_PLUGIN]]

        def missing_entrypoints(names: Any) -> None:
            raise PluginError(f"plugin(s) not found: {', '.join(sorted(names))}")

        manager = NamedExtensionManager(
            namespace=GROUP,
            names=ordered,
            name_order=True,
            invoke_on_load=False,
            on_load_failure_callback=_raise_load_failure,
            on_missing_entrypoints_callback=missing_entrypoints,
        )
        return cls.from_modules([(ext.name, ext.plugin) for ext in manager.extensions])

    @classmethod
    def from_modules(cls, plugins: Iterable[tuple[str, object]]) -> PluginHost:
        """Register already-imported plugin objects (used by ``load`` and by tests)."""
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        names: list[str] = []
        for name, plugin in plugins:
            if pm.has_plugin(name):
                raise PluginError(f"plugin {name!r} is registered twice")
            try:
                pm.register(plugin, name=name)
            except (pluggy.PluginValidationError, ValueError) as err:
                raise PluginError(f"plugin {name!r} is invalid: {err}") from err
            names.append(name)
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as err:
            culprit = pm.get_name(err.plugin) if err.plugin is not None else None
            raise PluginError(f"plugin {culprit or '?'!r} implements an unknown hook: {err}") from err
        return cls(pm, tuple(names))

    # -- hook calls --------------------------------------------------------------------------
    def _per_plugin(self, hook_name: str) -> Iterator[tuple[str, Callable[..., Any]]]:
        """(plugin name, hook caller) for each plugin implementing the hook plainly: a real pluggy
        call of that plugin's implementation inside every plugin's wrappers."""
        plain = [
            impl
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls()
            if not (impl.wrapper or impl.hookwrapper)
        ]
        for impl in plain:
            others = {other.plugin for other in plain if other.plugin is not impl.plugin}
            if self._tracing:  # pluggy's trace names the hook, not whose implementation runs
                trace_log.info("%s of plugin %s:", hook_name, impl.plugin_name)
            yield impl.plugin_name, self.pm.subset_hook_caller(hook_name, remove_plugins=others)

    def trace(self) -> None:
        """Log every hook call from now on (pluggy's tracing, at INFO on ``cpx.plugins.trace``)."""
        if self._tracing:
            return
        self.pm.trace.root.setwriter(_log_trace)
        self.pm.enable_tracing()
        self._tracing = True

    # -- typed facade --------------------------------------------------------------------------
    def _collect(self, hook_name: str, record_type: type[T]) -> list[tuple[str, T]]:
        """(plugin name, record) for every record every plugin yields from one hook (given the
        configuration when the hook takes it)."""
        spec = getattr(self.pm.hook, hook_name).spec
        kwargs = {"config": self.config} if spec is not None and "config" in spec.argnames else {}
        out: list[tuple[str, T]] = []
        for plugin, call in self._per_plugin(hook_name):
            try:
                records = [record for result in call(**kwargs) for record in (result or ())]
            except Exception as err:
                raise PluginError(f"plugin {plugin!r} failed in {hook_name}: {err}") from err
            for record in records:
                if not isinstance(record, record_type):
                    raise PluginError(
                        f"plugin {plugin!r} returned {type(record).__name__} from {hook_name}; "
                        f"expected {record_type.__name__}"
                    )
                out.append((plugin, record))
        # pluggy calls LIFO; sort so that nothing depends on registration order.
        return sorted(out, key=lambda pair: (self.names.index(pair[0]), getattr(pair[1], "name", "")))

    @staticmethod
    def _unique(pairs: list[tuple[str, T]], key: Any, what: str) -> list[T]:
        seen: dict[Any, str] = {}
        for plugin, record in pairs:
            k = key(record)
            if k in seen:
                raise PluginError(f"{what} {k!r} is registered by both {seen[k]!r} and {plugin!r}")
            seen[k] = plugin
        return [record for _, record in pairs]

    def contributions(self, hook_name: str, record_type: type[T]) -> list[tuple[str, T]]:
        return self._collect(hook_name, record_type)

    def options(self) -> list[OptionSpec]:
        return self._unique(self._collect("cpx_options", OptionSpec), lambda r: r.name, "option")

    def watches(self) -> list[WatchSpec]:
        return self._unique(
            self._collect("cpx_watches", WatchSpec), lambda r: r.gvk.group_kind, "watched kind"
        )

    def processors(self) -> list[ProcessorSpec]:
        return order_processors(
            self._unique(self._collect("cpx_dag_processors", ProcessorSpec), lambda r: r.name, "processor")
        )

    def resource_caches(self) -> list[ResourceCacheSpec]:
        return self._unique(
            self._collect("cpx_resource_caches", ResourceCacheSpec), lambda r: r.type_url, "xDS type URL"
        )

    def status_writers(self) -> list[StatusWriterSpec]:
        return self._unique(
            self._collect("cpx_status_writers", StatusWriterSpec),
            lambda r: r.gvk.group_kind,
            "status writer for kind",
        )

    def listener_kinds(self) -> list[ListenerKindSpec]:
        return self._kinds("cpx_listener_kinds", ListenerKindSpec, "listener kind")

    def cluster_kinds(self) -> list[ClusterKindSpec]:
        return self._kinds("cpx_cluster_kinds", ClusterKindSpec, "cluster kind")

    def _kinds(self, hook_name: str, record_type: type[K], what: str) -> list[K]:
        """Kinds unique by name and by node type: one type has exactly one translation."""
        pairs = self._collect(hook_name, record_type)
        self._unique(
            pairs, lambda r: r.node_type.__module__ + "." + r.node_type.__qualname__, f"{what} node type"
        )
        return self._unique(pairs, lambda r: r.name, what)

    def http_filters(self) -> list[HttpFilterSpec]:
        """Every contributed HTTP filter in connection-manager order (the router last)."""
        return list(order_http_filters(self._collect("cpx_http_filters", HttpFilterSpec)))

    def xds_contributions(self) -> Contributions:
        """Every HTTP filter, listener kind and cluster kind the plugins contribute, ordered."""
        return Contributions(
            http_filters=tuple(self.http_filters()),
            listener_kinds=tuple(self.listener_kinds()),
            cluster_kinds=tuple(self.cluster_kinds()),
        )

    def configure(self, config: Config) -> None:
        """Give every plugin the configuration, before any processor or cache is built.

        A plugin raising :class:`~cpx.errors.PluginDeclined` is unregistered (none of its records
        are used from then on) and logged once; :class:`~cpx.errors.ConfigError` is the user's
        to fix; anything else is a start-up error naming the plugin.
        """
        if config.option(TRACE_OPTION.name) is True:
            self.trace()
        self.config = config
        for plugin, call in list(self._per_plugin("cpx_configure")):
            try:
                call(config=config)
            except PluginDeclined as declined:
                self._decline(plugin, declined.reason)
            except ConfigError:
                raise
            except Exception as err:
                raise PluginError(f"plugin {plugin!r} failed in cpx_configure: {err}") from err

    def _decline(self, plugin: str, reason: str) -> None:
        if plugin == CORE_PLUGIN:
            raise PluginError(f"the core plugin cannot decline: {reason}")
        self.pm.unregister(name=plugin)
        self.names = tuple(name for name in self.names if name != plugin)
        self.declined[plugin] = reason
        log.warning("plugin %s declined: %s", plugin, reason)

    def unconfigure(self, config: Config) -> None:
        self.pm.hook.cpx_unconfigure(config=config)

    def secret_access_permitted(
        self, secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView
    ) -> bool | None:
        """The first plugin's answer; None when no enabled plugin judges this reference."""
        answer = self.pm.hook.cpx_secret_access_permitted(
            secret_namespace=secret_namespace, secret_name=secret_name, referrer=referrer, source=source
        )
        return None if answer is None else bool(answer)

    def hook_names(self, plugin_name: str) -> list[str]:
        plugin = self.pm.get_plugin(plugin_name)
        return sorted(caller.name for caller in (self.pm.get_hookcallers(plugin) or []))
