"""The ``ingress`` plugin's hook implementations: declarations only, the work is elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cpx import (
    Phase,
    ProcessorSpec,
    StatusWriterSpec,
    WatchSpec,
    hookimpl,
    ingress_class_accepts,
)
from cpx_ingress import schema, status
from cpx_ingress.kinds import INGRESS
from cpx_ingress.processor import IngressProcessor


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    # --ingress-class-name and --ingress-status-address are the core's (shared with HTTPProxy).
    yield WatchSpec(gvk=INGRESS, accept=ingress_class_accepts, validate=schema.validate)


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
        accessors_only=True,
    )


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    # status.loadBalancer: the Envoy Service's, as a networking/v1 IngressLoadBalancerStatus.
    yield StatusWriterSpec(
        name="ingress", gvk=INGRESS, merge=status.merge_status, load_balancer=status.envoy_load_balancer
    )


@hookimpl
def cpx_fuzz_strategies() -> Iterator[Any]:
    from cpx_ingress.strategies import STRATEGIES  # noqa: PLC0415 - hypothesis only when fuzzing

    yield from STRATEGIES
