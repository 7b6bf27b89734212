"""``cpx certgen``: its flags; the certificates are made by :mod:`cpx.ops.certgen`."""

from __future__ import annotations

from pathlib import Path

import click

from cpx.config import CertgenOptions, default


@click.command(name="certgen")
@click.argument("outdir", type=click.Path(path_type=Path))
@click.option("--namespace", default=default(CertgenOptions, "namespace"), show_default=True)
@click.option(
    "--lifetime-days", default=default(CertgenOptions, "lifetime_days"), type=int, show_default=True
)
def certgen_command(outdir: Path, namespace: str, lifetime_days: int) -> None:
    """Write a CA plus server (cpx) and client (Envoy) certificates for xDS mTLS."""
    from cpx.ops.certgen import generate  # noqa: PLC0415

    written = generate(outdir, namespace=namespace, lifetime_days=lifetime_days)
    for item in written or ():
        click.echo(str(item))
