"""``cpx plugins list``: the installed plugins, whether enabled, and what each contributes."""

from __future__ import annotations

import json
from typing import Any

import click

from cpx.cli.options import plugins_option, preparse_plugins, split
from cpx.errors import CpxError
from cpx.plugins import CORE_PLUGIN, PluginHost, available_plugins
from cpx.records import OptionSpec, ProcessorSpec, ResourceCacheSpec, StatusWriterSpec, WatchSpec


def describe_plugins(enabled: list[str] | None) -> list[dict[str, Any]]:
    infos = available_plugins()
    enabled_names = {i.name for i in infos} if enabled is None else {CORE_PLUGIN, *enabled}
    host = PluginHost.load([n for n in enabled_names if n != CORE_PLUGIN] if enabled is not None else None)
    contributions: dict[str, dict[str, list[str]]] = {}

    def add(plugin: str, what: str, text: str) -> None:
        contributions.setdefault(plugin, {}).setdefault(what, []).append(text)

    for plugin, w in host.contributions("cpx_watches", WatchSpec):
        add(plugin, "watches", f"{w.gvk.api_version}/{w.gvk.kind}")
    processors = {p.name: p for p in host.processors()}
    proc_owner = {}

    for plugin, spec in host.contributions("cpx_dag_processors", ProcessorSpec):
        proc_owner[spec.name] = plugin
    for position, name in enumerate(processors, 1):
        spec = processors[name]
        add(proc_owner[name], "processors", f"{position}. {name} (phase {spec.phase.name.lower()})")
    for plugin, c in host.contributions("cpx_resource_caches", ResourceCacheSpec):
        add(plugin, "resource_caches", f"{c.name} ({c.type_url.rsplit('/', 1)[-1]})")
    for plugin, s in host.contributions("cpx_status_writers", StatusWriterSpec):
        add(plugin, "status_writers", f"{s.gvk.api_version}/{s.gvk.kind}")
    for plugin, o in host.contributions("cpx_options", OptionSpec):
        add(plugin, "options", o.flag)
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
        for what in ("watches", "processors", "resource_caches", "status_writers", "options"):
            if row.get(what):
                click.echo(f"  {what.replace('_', ' ')}:")
                for item in row[what]:
                    click.echo(f"    {item}")
