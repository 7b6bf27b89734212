"""The ``cpx`` command line: the group, its global options, and one module per command.

Command modules hold only flags and their checks; what a command does lives outside ``cpx.cli``
(:mod:`cpx.serving`, :mod:`cpx.offline`, :mod:`cpx.xds.envoy.bootstrap`, :mod:`cpx.ops.certgen`,
:mod:`cpx.demo`) and is imported when the command runs, so that ``cpx --help`` starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from cpx import __version__
from cpx.cli.bootstrap import bootstrap_command
from cpx.cli.certgen import certgen_command
from cpx.cli.plugins import plugins_group
from cpx.cli.process import OwnProcess
from cpx.cli.run import run_command
from cpx.cli.serve import serve_command
from cpx.cli.translate import translate_command
from cpx.ops import logformat


@click.group()
@click.version_option(__version__, prog_name="cpx")
@click.option(
    "--log-level", default="info", type=click.Choice(["debug", "info", "warning", "error"]), show_default=True
)
@click.option("--log-format", default="text", type=click.Choice(["text", "json"]), show_default=True)
def cli(log_level: str, log_format: str) -> None:
    """cpx: an Envoy control plane that does what Project Contour does, built from plugins."""
    logformat.setup(log_level, log_format)


for _command in (
    serve_command,
    translate_command,
    plugins_group,
    bootstrap_command,
    certgen_command,
    run_command,
):
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """``cpx`` in this process: it raises SystemExit when done, as click's commands do."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="cpx")


def run() -> None:
    """The ``cpx`` process's entry point (the ``cpx`` script, ``python -m cpx``): the same as
    :func:`main`, and a one-shot command may end the process at once (:class:`OwnProcess`)."""
    cli.main(prog_name="cpx", obj=OwnProcess())
