"""``cpx plugins list``: the installed plugins, whether enabled, and what each contributes."""

from __future__ import annotations

import json
from typing import Any

import click

from cpx.cli.options import plugins_option, preparse_plugins, split
from cpx.errors import CpxError
from cpx.plugins import CORE_PLUGIN, PluginHost, available_plugins
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


def describe_plugins(enabled: list[str] | None) -> list[dict[str, Any]]:
    infos = available_plugins()
    enabled_names = {i.name for i in infos} if enabled is None else {CORE_PLUGIN, *enabled}
    host = PluginHost.load([n for n in enabled_names if n != CORE_PLUGIN] if enabled is not None else None)
    contributions = describe_contributions(host)
    rows = []
    for info in infos:
        row: dict[str, Any] = {
            "name": info.name,
            "distribution": info.distribution,
            "version": info.version,
            "enabled": info.name in enabled_names,
        }
        if info.name in host.names:
            row.update({k: v for k, v in sorted(contributions.get(info.name, {}).items())})
        rows.append(row)
    return rows


def describe_contributions(host: PluginHost) -> dict[str, dict[str, list[str]]]:
    """Per plugin, per kind of contribution (the keys of :data:`CONTRIBUTIONS`), one line each."""
    out: dict[str, dict[str, list[str]]] = {}
    for what, lines in (
        ("watches", _watches(host)),
        ("processors", _processors(host)),
        ("http_filters", _http_filters(host)),
        ("listener_kinds", _kinds(host, "cpx_listener_kinds", ListenerKindSpec)),
        ("cluster_kinds", _kinds(host, "cpx_cluster_kinds", ClusterKindSpec)),
        ("resource_caches", _caches(host)),
        ("status_writers", _status_writers(host)),
        ("policies", _policies(host)),
        ("options", [(plugin, o.flag) for plugin, o in host.contributions("cpx_options", OptionSpec)]),
    ):
        for plugin, text in lines:
            out.setdefault(plugin, {}).setdefault(what, []).append(text)
    return out


# What `plugins list` shows, in this order.
CONTRIBUTIONS = (
    "watches",
    "processors",
    "http_filters",
    "listener_kinds",
    "cluster_kinds",
    "resource_caches",
    "status_writers",
    "policies",
    "options",
)
Lines = list[tuple[str, str]]  # (plugin, text)


def _watches(host: PluginHost) -> Lines:
    return [(p, f"{w.gvk.api_version}/{w.gvk.kind}") for p, w in host.contributions("cpx_watches", WatchSpec)]


def _processors(host: PluginHost) -> Lines:
    """In the order the builder runs them."""
    owner = {spec.name: plugin for plugin, spec in host.contributions("cpx_dag_processors", ProcessorSpec)}
    return [
        (owner[spec.name], f"{position}. {spec.name} (phase {spec.phase.name.lower()})")
        for position, spec in enumerate(host.processors(), 1)
    ]


def _http_filters(host: PluginHost) -> Lines:
    """In connection-manager order (the position is among every plugin's filters), with the
    per-virtual-host / per-route / per-weighted-cluster configs each one provides."""
    owner = {spec.name: plugin for plugin, spec in host.contributions("cpx_http_filters", HttpFilterSpec)}
    lines = []
    for position, spec in enumerate(host.http_filters(), 1):
        scopes = [
            scope
            for scope, given in (
                ("virtual host", spec.per_virtual_host),
                ("route", spec.per_route or spec.per_route_at),
                ("weighted cluster", spec.per_weighted_cluster),
                ("route action", spec.route_action),
                ("virtual host fields", spec.virtual_host_fields),
            )
            if given is not None
        ]
        per = f" (per {', '.join(scopes)})" if scopes else ""
        lines.append((owner[spec.name], f"{position}. {spec.name}{per}"))
    return lines


def _kinds(host: PluginHost, hook: str, record_type: type[ListenerKindSpec] | type[ClusterKindSpec]) -> Lines:
    return [
        (plugin, f"{spec.name} ({spec.node_type.__module__}.{spec.node_type.__qualname__})")
        for plugin, spec in host.contributions(hook, record_type)
    ]


def _caches(host: PluginHost) -> Lines:
    return [
        (plugin, f"{c.name} ({c.type_url.rsplit('/', 1)[-1]})")
        for plugin, c in host.contributions("cpx_resource_caches", ResourceCacheSpec)
    ]


def _policies(host: PluginHost) -> Lines:
    """The policy hooks a plugin answers (beyond the core's defaults)."""
    return [
        (plugin, "secret access (cpx_secret_access_permitted)")
        for plugin in host.names
        if plugin != CORE_PLUGIN and "cpx_secret_access_permitted" in host.hook_names(plugin)
    ]


def _status_writers(host: PluginHost) -> Lines:
    return [
        (plugin, f"{s.gvk.api_version}/{s.gvk.kind}" + ("" if s.writes else " (reported, not written)"))
        for plugin, s in host.contributions("cpx_status_writers", StatusWriterSpec)
    ]


@click.group(name="plugins")
def plugins_group() -> None:
    """Inspect installed plugins."""


@plugins_group.command("list")
@plugins_option
@click.option("-o", "--output", "fmt", default="text", type=click.Choice(["text", "json"]), show_default=True)
def plugins_list(plugins: tuple[str, ...], fmt: str) -> None:
    """List installed plugins, whether enabled, and what each contributes."""
    enabled = split(plugins) if plugins else preparse_plugins([])
    try:
        rows = describe_plugins(enabled)
    except CpxError as err:
        raise click.ClickException(str(err)) from None
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = "enabled" if row["enabled"] else "disabled"
        click.echo(f"{row['name']}  {row['distribution']} {row['version']}  [{state}]")
        for what in CONTRIBUTIONS:
            if row.get(what):
                click.echo(f"  {what.replace('_', ' ')}:")
                for item in row[what]:
                    click.echo(f"    {item}")
