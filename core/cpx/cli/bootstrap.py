"""``cpx bootstrap``: its flags; the bootstrap itself is :mod:`cpx.xds.envoy.bootstrap`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cpx.cli.configfile import apply_bootstrap_file, config_path_option
from cpx.config import BootstrapOptions, default

_B = BootstrapOptions


@click.command(name="bootstrap")
@click.argument("path")
@config_path_option
@click.option(
    "--xds-address",
    default=default(_B, "xds_address"),
    show_default=True,
    help="Address of cpx's xDS server.",
)
@click.option("--xds-port", default=default(_B, "xds_port"), type=int, show_default=True)
@click.option(
    "--admin-address",
    default=default(_B, "admin_address"),
    show_default=True,
    help="Path of the Unix socket Envoy's admin interface listens on (never TCP).",
)
@click.option(
    "--admin-port",
    default=default(_B, "admin_port"),
    type=int,
    show_default=True,
    help="Port of the read-only admin listener on 127.0.0.1 (GET of /config_dump, /stats, "
    "/ready, ...); 0: none.",
)
@click.option(
    "--stats-address",
    default=default(_B, "stats_address"),
    show_default=True,
    help="Address of the listener serving GET /ready, /stats and /stats/prometheus.",
)
@click.option(
    "--stats-port",
    default=default(_B, "stats_port"),
    type=int,
    show_default=True,
    help="Port of that listener; 0: none.",
)
@click.option("--node-id", default=default(_B, "node_id"), show_default=True)
@click.option(
    "--xds-api",
    type=click.Choice(["sotw", "delta"]),
    default=default(_B, "xds_api"),
    show_default=True,
    help="ADS flavour Envoy uses: state of the world, or delta (only changed resources are sent).",
)
@click.option(
    "--deferred-cluster-stats/--no-deferred-cluster-stats",
    default=default(_B, "deferred_cluster_stats"),
    show_default=True,
    help="Create a cluster's traffic statistics (upstream_rq_*, upstream_cx_*, ...) at its first "
    "request rather than with the cluster: Envoy creates many clusters about twice as fast; idle "
    "clusters show no such series.",
)
@click.option(
    "--xds-cafile", type=click.Path(exists=True), help="CA that the xDS server certificate chains to."
)
@click.option("--xds-cert-file", type=click.Path(exists=True), help="Envoy's client certificate for mTLS.")
@click.option("--xds-key-file", type=click.Path(exists=True), help="Envoy's client key for mTLS.")
def bootstrap_command(path: str, config_path: Path | None, **params: Any) -> None:
    """Write an Envoy bootstrap (JSON) that points Envoy at cpx; PATH may be '-'."""
    from cpx.xds.envoy.bootstrap import bootstrap_config, write_bootstrap  # noqa: PLC0415

    if config_path is not None:
        # network.admin-port and metrics.envoy.* of Contour's file; flags given here win.
        ctx = click.get_current_context()
        apply_bootstrap_file(ctx, config_path)
        params = {name: ctx.params[name] for name in params}
    try:
        config = bootstrap_config(**params)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    write_bootstrap(path, config)
