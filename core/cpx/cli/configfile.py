"""``-c/--config-path``: Contour's configuration file as defaults for a command's flags.

A key goes to the flag that claims it: the core's command-line flags below, and every option
with an ``OptionSpec.config_key`` (the core's and the plugins').  The value passes the flag's
own type check; a flag given on the command line (or its environment variable) wins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from cpx.contourfile import load, review
from cpx.errors import ConfigError
from cpx.plugins import PluginHost

log = logging.getLogger("cpx.config")

# Contour's keys that the core's own flags take (the rest are claimed by OptionSpec.config_key).
COMMAND_KEYS = {
    "incluster": "incluster",
    "kubeconfig": "kubeconfig",
    "envoy-service-name": "envoy_service_name",
    "envoy-service-namespace": "envoy_service_namespace",
    # Contour serves /metrics on --http-address/--http-port; cpx serves /healthz there too.
    "metrics.contour.address": "health_address",
    "metrics.contour.port": "health_port",
}
# Contour's keys that `cpx bootstrap` takes (Envoy's admin and stats listeners are in its bootstrap).
BOOTSTRAP_KEYS = {
    "network.admin-port": "admin_port",
    "metrics.envoy.address": "stats_address",
    "metrics.envoy.port": "stats_port",
}
_FROM_USER = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)

config_path_option = click.option(
    "-c",
    "--config-path",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Contour's configuration file (contour.yaml): its keys set the flags that take them "
    "(flags given here win); see docs/contour-config.md.",
)


def claims(host: PluginHost) -> dict[str, str]:
    """Contour key -> the option name that takes it."""
    found = {**COMMAND_KEYS, **BOOTSTRAP_KEYS}
    for spec in host.options():
        if spec.config_key is not None:
            found[spec.config_key] = spec.name
    return found


def _conversions(host: PluginHost) -> dict[str, Callable[[Any], Any]]:
    """Contour key -> how its option turns the file's value into the flag's."""
    return {
        spec.config_key: spec.config_convert
        for spec in host.options()
        if spec.config_key is not None and spec.config_convert is not None
    }


def _converted(
    param: click.Parameter, key: str, value: Any, ctx: click.Context, convert: Callable[[Any], Any] | None
) -> Any:
    try:
        if convert is not None:
            value = convert(value)
        if param.multiple:
            items = value if isinstance(value, list | tuple) else [value]
            return tuple(param.type.convert(item, param, ctx) for item in items)
        return param.type.convert(value, param, ctx)
    except click.BadParameter as err:
        raise click.UsageError(f"{key}: {err.message}", ctx) from None
    except ValueError as err:
        raise click.UsageError(f"{key}: {err}", ctx) from None


def _load(ctx: click.Context, path: Path, taken: Mapping[str, str]) -> dict[str, Any]:
    try:
        return load(path.read_text(), str(path), claimed=taken)
    except (ConfigError, OSError) as err:
        raise click.UsageError(str(err), ctx) from None


def apply_config_file(ctx: click.Context, host: PluginHost, path: Path) -> None:
    """Set ``ctx.params`` from the file's keys, unless the user gave the flag."""
    taken = claims(host)
    found = _load(ctx, path, taken)
    findings = review(found, taken)
    if findings.refusals:
        raise click.UsageError(f"{path}: " + "; ".join(findings.refusals), ctx)
    for warning in findings.warnings:
        log.warning("%s: %s", path, warning)
    _set_params(ctx, found, taken, _conversions(host))


def apply_bootstrap_file(ctx: click.Context, path: Path) -> None:
    """``cpx bootstrap -c``: the file's keys of the bootstrap (:data:`BOOTSTRAP_KEYS`) set its
    flags; the file is checked as ``cpx serve`` checks it, the keys of other commands are theirs."""
    taken = claims(PluginHost.load())
    _set_params(ctx, _load(ctx, path, taken), BOOTSTRAP_KEYS, {})


def _set_params(
    ctx: click.Context,
    found: Mapping[str, Any],
    taken: Mapping[str, str],
    conversions: Mapping[str, Callable[[Any], Any]],
) -> None:
    params = {p.name: p for p in ctx.command.params}
    for key, value in found.items():
        param = params.get(taken.get(key, ""))
        # Empty is unset in Contour's file; a key of another command (serve's kubeconfig for
        # translate) is not this one's to apply.
        if param is None or param.name is None or value in (None, "", [], {}):
            continue
        if ctx.get_parameter_source(param.name) not in _FROM_USER:
            ctx.params[param.name] = _converted(param, key, value, ctx, conversions.get(key))
            ctx.set_parameter_source(param.name, ParameterSource.DEFAULT_MAP)
