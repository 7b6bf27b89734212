"""``cpx serve``: its flags, checked and turned into :class:`cpx.config.ServeOptions`; the serving
itself is :func:`cpx.serving.serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cpx.cli.configfile import config_path_option
from cpx.cli.options import (
    Duration,
    F,
    PluginCommand,
    core_config,
    envoy_listener_options,
    envoy_validate_options,
    go_duration,
    plugin_host,
    plugins_option,
    split,
    stack_options,
)
from cpx.config import Config, ServeOptions, StatusWritingOptions, default
from cpx.errors import CpxError

_W = StatusWritingOptions


def _duration_option(flag: str, field: str, help: str) -> Any:
    seconds = default(_W, field)
    return click.option(flag, default=go_duration(seconds), type=Duration(), show_default=True, help=help)


def status_writing_options(f: F) -> F:
    """Kubernetes mode: leader election and the Envoy Service whose address goes to status."""
    return stack_options(
        f,
        [
            click.option(
                "--leader-election-resource-name",
                default=default(_W, "leader_election_resource_name"),
                show_default=True,
                help="Kubernetes mode: name of the Lease replicas elect the status writer with.",
            ),
            click.option(
                "--leader-election-resource-namespace",
                default=default(_W, "leader_election_resource_namespace"),
                show_default=True,
                help="Kubernetes mode: namespace of that Lease.",
            ),
            _duration_option(
                "--leader-election-lease-duration",
                "leader_election_lease_duration",
                "How long a Lease not renewed keeps followers waiting.",
            ),
            _duration_option(
                "--leader-election-renew-deadline",
                "leader_election_renew_deadline",
                "How long the leader keeps trying to renew before it stops leading.",
            ),
            _duration_option(
                "--leader-election-retry-period",
                "leader_election_retry_period",
                "How often candidates try to take, and the leader to renew, the Lease.",
            ),
            click.option(
                "--disable-leader-election",
                is_flag=True,
                help="Kubernetes mode: write status without electing a leader (one replica only).",
            ),
            click.option(
                "--envoy-service-name",
                default=default(_W, "envoy_service_name"),
                show_default=True,
                help="Kubernetes mode: the Envoy Service whose status.loadBalancer is copied to "
                "Ingress and HTTPProxy status (unless --ingress-status-address is set).",
            ),
            click.option(
                "--envoy-service-namespace",
                default=default(_W, "envoy_service_namespace"),
                show_default=True,
                help="Kubernetes mode: namespace of that Service.",
            ),
        ],
    )


def _status_writing(ctx: click.Context, params: dict[str, Any]) -> StatusWritingOptions:
    lease = params["leader_election_lease_duration"]
    renew = params["leader_election_renew_deadline"]
    retry = params["leader_election_retry_period"]
    if not lease > renew > 1.2 * retry > 0:
        raise click.UsageError(
            "leader election needs lease duration > renew deadline > 1.2 x retry period > 0", ctx
        )
    names = (
        "leader_election_resource_name",
        "leader_election_resource_namespace",
        "leader_election_lease_duration",
        "leader_election_renew_deadline",
        "leader_election_retry_period",
        "disable_leader_election",
        "envoy_service_name",
        "envoy_service_namespace",
    )
    return StatusWritingOptions(**{name: params[name] for name in names})


def _check_flags(ctx: click.Context, params: dict[str, Any]) -> None:
    kube_mode = params["kubeconfig"] is not None or params["incluster"]
    if params["kubeconfig"] is not None and params["incluster"]:
        raise click.UsageError("--kubeconfig and --incluster are mutually exclusive", ctx)
    if kube_mode and params["manifests"]:
        raise click.UsageError(
            "--manifests and Kubernetes mode (--kubeconfig/--incluster) are exclusive", ctx
        )
    if not kube_mode and not params["manifests"]:
        raise click.UsageError("give --manifests (standalone mode) or --kubeconfig/--incluster", ctx)
    if not kube_mode and params["watch_namespaces"]:
        raise click.UsageError("--watch-namespaces needs Kubernetes mode (--kubeconfig/--incluster)", ctx)
    if bool(params["xds_cert_file"]) != bool(params["xds_key_file"]) or (
        params["xds_cafile"] and not params["xds_cert_file"]
    ):
        raise click.UsageError("mTLS needs --xds-cafile, --xds-cert-file and --xds-key-file together", ctx)
    if params["xds_cert_file"]:
        _check_xds_tls_files(params)


def _check_xds_tls_files(params: dict[str, Any]) -> None:
    from cpx.sources.secrets import SecretError, check_server_tls_files  # noqa: PLC0415

    try:
        check_server_tls_files(params["xds_cafile"], params["xds_cert_file"], params["xds_key_file"])
    except SecretError as err:
        raise click.ClickException(str(err)) from None


@click.command(cls=PluginCommand, name="serve")
@plugins_option
@config_path_option
@click.option(
    "--manifests",
    "manifests",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Manifest file or folder (repeatable); watched for changes.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Kubernetes mode: list and watch the cluster this kubeconfig file names.",
)
@click.option(
    "--incluster", is_flag=True, help="Kubernetes mode, with the pod's service account (in a cluster)."
)
@click.option(
    "--watch-namespaces",
    multiple=True,
    help="Kubernetes mode: watch only these namespaces (comma-separated; default: all).",
)
@click.option(
    "--on-missing-crd",
    default=default(ServeOptions, "on_missing_crd"),
    type=click.Choice(["skip", "fail"]),
    show_default=True,
    help="Kubernetes mode: when a plugin's kind is not served (CRD not installed), log it and skip "
    "the kind, or refuse to start.",
)
@click.option(
    "--status-file", type=click.Path(path_type=Path), help="Write every object's status to this YAML file."
)
@click.option(
    "--xds-address",
    default=default(Config, "xds_address"),
    show_default=True,
    help="Address the xDS gRPC server binds.",
)
@click.option(
    "--xds-port",
    default=default(Config, "xds_port"),
    type=int,
    show_default=True,
    help="Port of the xDS gRPC server.",
)
@click.option(
    "--xds-cafile",
    type=click.Path(exists=True),
    help="CA bundle that Envoy client certificates must chain to (enables mTLS).",
)
@click.option("--xds-cert-file", type=click.Path(exists=True), help="Certificate of the xDS server.")
@click.option("--xds-key-file", type=click.Path(exists=True), help="Private key of the xDS server.")
@envoy_listener_options
@status_writing_options
@click.option(
    "--http-address",
    "health_address",
    default=default(ServeOptions, "health_address"),
    show_default=True,
    help="Address of /healthz, /readyz and /metrics.",
)
@click.option(
    "--http-port",
    "health_port",
    default=default(ServeOptions, "health_port"),
    type=int,
    show_default=True,
    help="Port of /healthz, /readyz and /metrics.",
)
@click.option(
    "--debug-http-address",
    default=default(ServeOptions, "debug_address"),
    show_default=True,
    help="Address of /debug/dag.",
)
@click.option(
    "--debug-http-port",
    default=default(ServeOptions, "debug_port"),
    type=int,
    show_default=True,
    help="Port of /debug/dag.",
)
@envoy_validate_options
@click.pass_context
def serve_command(ctx: click.Context, /, **params: Any) -> None:
    """Serve xDS to Envoy from manifests (standalone mode) or from a cluster (Kubernetes mode)."""
    import asyncio  # noqa: PLC0415 (asyncio, ssl and subprocess load only when serving)

    from cpx.serving import serve  # noqa: PLC0415 (grpc loads only when serving)

    _check_flags(ctx, params)
    config = core_config(ctx, params)
    options = ServeOptions(
        manifests=tuple(params["manifests"]),
        kubeconfig=params["kubeconfig"],
        incluster=params["incluster"],
        watch_namespaces=tuple(split(params["watch_namespaces"])),
        on_missing_crd=params["on_missing_crd"],
        status_file=params["status_file"],
        health_address=params["health_address"],
        health_port=params["health_port"],
        debug_address=params["debug_http_address"],
        debug_port=params["debug_http_port"],
        status_writing=_status_writing(ctx, params),
        envoy_validate=params["envoy_validate"],
        envoy_binary=params["envoy_binary"],
    )
    try:
        asyncio.run(serve(plugin_host(ctx), config, options))
    except CpxError as err:
        raise click.ClickException(str(err)) from None
