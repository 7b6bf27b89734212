"""``cpx translate``: its flags and output format; the translation is :func:`cpx.offline.translate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from cpx.cli.configfile import config_path_option
from cpx.cli.options import (
    PluginCommand,
    core_config,
    envoy_listener_options,
    envoy_validate_options,
    plugin_host,
    plugins_option,
)
from cpx.errors import CpxError
from cpx.heap import collector_paused


class OneShotCommand(PluginCommand):
    """Loads its plugins (while parsing its arguments) with the collector paused too."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with collector_paused():
            return super().make_context(info_name, args, parent, **extra)


@click.command(cls=OneShotCommand, name="translate")
@plugins_option
@config_path_option
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "fmt", default="yaml", type=click.Choice(["yaml", "json"]), show_default=True)
@envoy_listener_options
@envoy_validate_options
@click.pass_context
def translate_command(ctx: click.Context, /, paths: tuple[Path, ...], fmt: str, **params: Any) -> None:
    """Translate manifests offline: print every object with its status, and the xDS resources.

    With --envoy-validate the output's `envoy` entry holds Envoy's verdict, and the exit code is 1
    when Envoy refuses the configuration.
    """
    from cpx.offline import translate  # noqa: PLC0415

    config = core_config(ctx, params)
    with collector_paused():
        try:
            validator = None
            if params["envoy_validate"]:
                from cpx.xds.constraints.envoycheck import EnvoyValidator  # noqa: PLC0415

                validator = EnvoyValidator.tested(params["envoy_binary"])
            doc = translate(paths, plugin_host(ctx), config, validator=validator)
        except CpxError as err:
            raise click.ClickException(str(err)) from None
        if fmt == "json":
            click.echo(json_text(doc))
        else:
            click.echo(yaml_text(doc), nl=False)
    if not doc.get("envoy", {}).get("accepted", True):
        ctx.exit(1)


def json_text(doc: Any) -> str:
    """``json.dumps(doc, indent=2)``, byte for byte, written by orjson's C encoder where that is the same.

    With an indent, ``json`` runs its pure-Python encoder: a quarter of a 10k HTTPProxy translate.
    orjson lays out ``indent=2`` the same way, but its scalars may differ (floats, NaN, non-ASCII,
    non-string keys): its compact text is compared with ``json``'s own (its C encoder, no indent),
    and only when they are equal, so that the indented texts are equal too, is orjson's used.
    """
    import orjson  # noqa: PLC0415 (only this output needs it)

    compact = json.dumps(doc, separators=(",", ":"))
    try:
        if orjson.dumps(doc).decode() == compact:
            return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # orjson.JSONEncodeError: a type, an integer or a depth orjson does not take
        pass
    return json.dumps(doc, indent=2)


def yaml_text(doc: Any) -> str:
    """``doc`` as block YAML (:mod:`cpx.cli.translate_yaml`)."""
    from cpx.cli.translate_yaml import dump  # noqa: PLC0415 (only this output needs it)

    return dump(doc)
