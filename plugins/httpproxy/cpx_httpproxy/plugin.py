"""The ``httpproxy`` plugin's hook implementations: declarations only, the work is elsewhere.

The plugin watches HTTPProxies (schema-checked, class-filtered), turns them into virtual hosts
and routes on the core's static listeners (after Ingress, as in Contour, so that an HTTPProxy
route with the same match replaces an Ingress one) and owns their status.  A run without
HTTPProxies imports little more than this module (see :mod:`cpx_httpproxy.filterspecs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cpx import (
    Config,
    Deferred,
    HttpFilterSpec,
    OptionSpec,
    Phase,
    ProcessorSpec,
    StatusWriterSpec,
    WatchSpec,
    hookimpl,
    ingress_class_accepts,
)

from cpx_httpproxy import filterspecs, optionspecs, schema, status
from cpx_httpproxy.kinds import HTTPPROXY


@hookimpl
def cpx_options() -> Iterator[OptionSpec]:
    yield from optionspecs.options()


@hookimpl
def cpx_configure(config: Config) -> None:
    # Options at their defaults parse (every run without them does); the parsers need the model.
    if not optionspecs.at_defaults(config, optionspecs.options()):
        from cpx_httpproxy.processor import Settings  # noqa: PLC0415

        Settings.from_config(config)  # ConfigError for an unusable value


@hookimpl
def cpx_http_filters(config: Config) -> Iterator[HttpFilterSpec]:
    yield from filterspecs.http_filters(config)


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=HTTPPROXY, accept=ingress_class_accepts, validate=schema.validate)


@hookimpl
def cpx_dag_processors(config: Config) -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="httpproxy",
        factory=Deferred("cpx_httpproxy.processor:HTTPProxyProcessor.from_config"),
        phase=Phase.ROUTES,
        # Contour runs Ingress first: an HTTPProxy route with the same match replaces an
        # Ingress one.  A constraint on a processor that is not loaded is ignored.
        after=("listeners", "ingress", "extsvc"),
        description="projectcontour.io/v1 HTTPProxy roots, includes, TLS and TCP proxying",
        accessors_only=True,
        # Built (its modules imported) by the first build with an HTTPProxy, unless global
        # authorization or rate limiting have it add to every build.
        inputs=() if optionspecs.builds_without_proxies(config) else (HTTPPROXY,),
    )


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    # status.loadBalancer: the Envoy Service's (a core/v1 LoadBalancerStatus) in Kubernetes mode.
    yield StatusWriterSpec(
        name="httpproxy",
        gvk=HTTPPROXY,
        merge=status.merge,
        load_balancer=status.envoy_load_balancer,
        refused=status.refused,
    )


@hookimpl
def cpx_fuzz_strategies() -> Iterator[Any]:
    from cpx_httpproxy.strategies import STRATEGIES  # noqa: PLC0415 - hypothesis only when fuzzing

    yield from STRATEGIES
