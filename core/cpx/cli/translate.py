"""``cpx translate``: its flags and output format; the translation is :func:`cpx.offline.translation`."""

from __future__ import annotations

import json
import re
import sys
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
from cpx.cli.process import OwnProcess
from cpx.errors import CpxError
from cpx.heap import collector_paused

# A float (it has a fraction or an exponent) or null as a value in orjson's compact text.
_FLOAT_OR_NULL = re.compile(rb"[:,\[](?:-?[0-9]+[.eE]|null)")


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
    from cpx.cli.translate_fork import ForkedYaml  # noqa: PLC0415
    from cpx.offline import translation  # noqa: PLC0415
    from cpx.xds.resource import Snapshot  # noqa: PLC0415

    config = core_config(ctx, params)
    with collector_paused(), ForkedYaml() as forked:
        try:
            validator = None
            if params["envoy_validate"]:
                from cpx.xds.constraints.envoycheck import EnvoyValidator  # noqa: PLC0415

                validator = EnvoyValidator.tested(params["envoy_binary"])
            xds_json = forked.xds_json if fmt == "yaml" else Snapshot.to_json
            done = translation(paths, plugin_host(ctx), config, validator=validator, xds_json=xds_json)
            doc = done.doc
        except CpxError as err:
            raise click.ClickException(str(err)) from None
        if fmt == "json":
            click.echo(json_text(doc))
        else:
            binary = hasattr(sys.stdout, "buffer")  # not so when redirected in process (a StringIO)
            for piece in forked.pieces(doc):
                click.echo(piece if binary or isinstance(piece, str) else piece.decode(), nl=False)
        code = 0 if doc.get("envoy", {}).get("accepted", True) else 1
        own = ctx.find_object(OwnProcess)
        if own is not None:
            forked.reap()
            own.end(code)  # without freeing ``done`` (returns when it cannot)
    if code:
        ctx.exit(code)


def json_text(doc: Any) -> str:
    """``json.dumps(doc, indent=2)``, byte for byte, written by orjson's C encoder where that is the same.

    With an indent, ``json`` runs its pure-Python encoder: a quarter of a 10k HTTPProxy translate.
    orjson lays out ``indent=2`` the same way and writes the same strings, integers, booleans and
    null, except for non-ASCII text and DEL (``json`` escapes them) and integers past 64 bits,
    subclasses and non-string keys (which orjson is told to refuse). Floats, NaN and infinities
    (written as ``null``) are the rest: their tokens follow a ``:``, ``,`` or ``[`` in orjson's
    compact text, so when no such token is found there (also not inside a string: a false alarm
    only costs the slow path) the indented texts are equal. Otherwise, orjson's compact text is
    compared with ``json``'s own (its C encoder, no indent), as a whole.
    """
    import orjson  # noqa: PLC0415 (only this output needs it)

    try:
        # Values json.dumps refuses, and subclasses of plain types, go to json.dumps as they are.
        refuse = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
        compact = orjson.dumps(doc, option=refuse | orjson.OPT_PASSTHROUGH_SUBCLASS)
    except TypeError:  # orjson.JSONEncodeError: a type, an integer or a depth orjson does not take
        return json.dumps(doc, indent=2)
    plain = (
        compact[:1] in (b"{", b"[")  # every value inside follows a delimiter
        and compact.isascii()
        and b"\x7f" not in compact
        and _FLOAT_OR_NULL.search(compact) is None
    )
    if not plain and compact.decode() != json.dumps(doc, separators=(",", ":")):
        return json.dumps(doc, indent=2)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
