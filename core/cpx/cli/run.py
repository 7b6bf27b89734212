"""``cpx run EXAMPLE``: its flags; the demo itself is :mod:`cpx.demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cpx.config import BootstrapOptions, Config, default
from cpx.errors import CpxError


@click.command(name="run")
@click.argument("example", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--http-port",
    default=default(Config, "http_port"),
    type=int,
    show_default=True,
    help="Port Envoy serves HTTP on.",
)
@click.option(
    "--https-port",
    default=default(Config, "https_port"),
    type=int,
    show_default=True,
    help="Port Envoy serves HTTPS on.",
)
@click.option("--xds-port", default=default(Config, "xds_port"), type=int, show_default=True)
@click.option("--admin-port", default=default(BootstrapOptions, "admin_port"), type=int, show_default=True)
def run_command(example: Path, **params: Any) -> None:
    """Run a demo: cpx, a real Envoy and the example's backend, until Ctrl-C."""
    from cpx.demo import run_demo  # noqa: PLC0415

    try:
        run_demo(example, **params)
    except CpxError as err:
        raise click.ClickException(str(err)) from None
