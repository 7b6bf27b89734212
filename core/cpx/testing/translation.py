"""Objects in, everything cpx makes of them out: the engine of the ``cpx_translate`` fixture.

One build, as ``cpx translate`` does it (the same plugin host, processors, caches and status
writers), but returned as values a test can inspect: the DAG, the xDS snapshot, the statuses.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import yaml

from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.errors import PluginError
from cpx.objects import ObjectKey
from cpx.offline import redact_secrets
from cpx.plugins import GROUP, PluginHost
from cpx.snapshot import SnapshotHandler, UnknownKindError
from cpx.sources.manifests import default_namespace
from cpx.xds.resource import Snapshot


@attrs.frozen
class Translation:
    """The outcome of one build; ``envoy_json()`` is what ``cpx translate`` prints under ``xds``."""

    dag: DAG
    snapshot: Snapshot
    statuses: Mapping[ObjectKey, Mapping[str, Any]]
    unknown: Mapping[ObjectKey, str]  # objects of a kind no enabled plugin watches, and why

    def envoy_json(self) -> dict[str, Any]:
        """Every resource as Envoy JSON, grouped by type (listeners, routes, clusters, ...)."""
        return redact_secrets(self.snapshot.to_json())

    def status(self, kind: str, name: str, namespace: str = "default") -> Mapping[str, Any]:
        """The status cpx computed for one object (``kind`` as in the manifest, e.g. "Service")."""
        for key, status in self.statuses.items():
            if (key.kind, key.namespace, key.name) == (kind, namespace, name):
                return status
        raise KeyError(f"no status for {kind} {namespace}/{name}")

    def virtual_hosts(self, listener: str = "ingress_http") -> dict[str, dict[str, Any]]:
        """The Envoy JSON of a listener's plain-HTTP virtual hosts, by name, whatever the route
        shape: in ``<listener>`` and, with the scoped shape, ``<listener>/<fqdn>``."""
        found: dict[str, dict[str, Any]] = {}
        for config in self.envoy_json()["routes"]:
            if config["name"] == listener or config["name"].startswith(f"{listener}/"):
                found.update((vhost["name"], vhost) for vhost in config.get("virtualHosts", ()))
        return dict(sorted(found.items()))

    def routes(self, listener: str) -> list[Any]:
        """Every DAG route on one listener, across its virtual hosts."""
        found = self.dag.listeners[listener]
        vhosts = [*found.virtual_hosts.values(), *found.secure_virtual_hosts.values()]
        return [route for vhost in vhosts for route in vhost.routes.values()]


def plugin_host(
    plugins: Sequence[str] | None = None, modules: Iterable[tuple[str, object]] = ()
) -> PluginHost:
    """Installed plugins by entry-point name (None: all of them, or none when ``modules`` are given)
    plus plugin objects registered directly, after the core's own."""
    given = list(modules)
    if not given:
        return PluginHost.load(plugins)
    from cpx.builtin import plugin as core  # noqa: PLC0415 (the core's own plugin is always first)

    installed = {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}
    missing = [name for name in plugins or () if name not in installed]
    if missing:
        raise PluginError(
            f"unknown plugin(s): {', '.join(missing)} (installed: {', '.join(sorted(installed))})"
        )
    named = [(name, installed[name].load()) for name in plugins or ()]
    return PluginHost.from_modules([("core", core), *named, *given])


def translate_yaml(
    text: str,
    plugins: Sequence[str] | None = None,
    *,
    modules: Iterable[tuple[str, object]] = (),
    options: Mapping[str, Any] | None = None,
) -> Translation:
    """Build once from YAML ``text`` (one or more documents) with the chosen plugins and options.

    ``options`` are plugin options by Python name (``{"ingress_class_name": "internal"}``); the
    rest keep the defaults their ``OptionSpec`` declares.
    """
    host = plugin_host(plugins, modules)
    values = {spec.name: spec.default for spec in host.options()}
    config = Config(options={**values, **(options or {})})
    handler = SnapshotHandler.create(host, config)
    unknown: dict[ObjectKey, str] = {}
    for obj in yaml.safe_load_all(text):
        if not obj:
            continue
        try:
            # As `cpx translate` and kubectl do: a namespaced object without one is in "default".
            default_namespace(obj, handler.watch_for(obj).gvk.namespaced)
            handler.upsert(obj, validate=True)  # invalid objects are kept out; their status says why
        except UnknownKindError as err:
            unknown[ObjectKey.of(obj)] = str(err)
    snapshot = handler.rebuild()
    assert handler.dag is not None  # rebuild() just built it
    statuses = {key: status.to_dict() for key, status in handler.statuses().items()}
    return Translation(handler.dag, snapshot, statuses, unknown)
