"""The ``ingress`` plugin's hook implementations: declarations only, the work is elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

from cpx import OptionSpec, Phase, ProcessorSpec, StatusWriterSpec, WatchSpec, hookimpl
from cpx.config import Config
from cpx.errors import ConfigError
from cpx_ingress import classes, schema, status
from cpx_ingress.kinds import INGRESS
from cpx_ingress.processor import IngressProcessor


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    yield OptionSpec(
        name="ingress_class_name",
        help="serve only Ingresses of these classes (repeatable or comma-separated; "
        "default: no class or 'contour')",
        multiple=True,
    )
    yield OptionSpec(
        name="ingress_status_address",
        help="address(es) to write to Ingress status.loadBalancer (IP or host name, comma-separated)",
    )


@hookimpl
def cpx_configure(config: Config) -> None:
    try:
        status.parse_status_addresses(config.option("ingress_status_address"))
    except ValueError as err:
        raise ConfigError(f"--ingress-status-address: {err}") from None


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=INGRESS, accept=classes.accepts, validate=schema.validate)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="ingress",
        factory=IngressProcessor.from_config,
        phase=Phase.ROUTES,
        # Routes go on the core's static listeners.  Contour also runs Ingress before HTTPProxy
        # (an HTTPProxy route with the same match wins); naming "httpproxy" here would make this
        # plugin fail to load without that one, so the later processor has to declare it.
        after=("listeners",),
        description="networking.k8s.io/v1 Ingress rules, TLS and annotations",
    )


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    yield StatusWriterSpec(name="ingress", gvk=INGRESS, merge=status.merge_status)
