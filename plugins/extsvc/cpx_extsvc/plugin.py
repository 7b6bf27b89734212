"""The ``extsvc`` plugin's hook implementations: declarations only, the work is elsewhere.

It watches ExtensionServices (schema-checked), turns each valid one into an Envoy cluster of its
own kind and publishes every one in the DAG registry ``cpx.dag.EXTENSION_UPSTREAMS`` for the
plugins that reference ExtensionServices by name (HTTPProxy authorization, rate limiting).  Its
processor runs in the first phase, before any route processor reads the registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cpx import ClusterKindSpec, Phase, ProcessorSpec, StatusWriterSpec, WatchSpec, hookimpl
from cpx.dag import EXTENSION_UPSTREAMS

from cpx_extsvc import schema, status
from cpx_extsvc.cluster import EXTENSION_CLUSTER_KIND
from cpx_extsvc.kinds import EXTENSION_SERVICE
from cpx_extsvc.processor import ExtensionServiceProcessor


@hookimpl
def cpx_watches() -> Iterator[WatchSpec]:
    yield WatchSpec(gvk=EXTENSION_SERVICE, validate=schema.validate)


@hookimpl
def cpx_dag_processors() -> Iterator[ProcessorSpec]:
    yield ProcessorSpec(
        name="extsvc",
        factory=ExtensionServiceProcessor,
        phase=Phase.LISTENERS,  # before the route processors that reference ExtensionServices
        description="projectcontour.io/v1alpha1 ExtensionService clusters, published for referrers",
        accessors_only=True,
        publishes=(EXTENSION_UPSTREAMS.name,),
    )


@hookimpl
def cpx_cluster_kinds() -> Iterator[ClusterKindSpec]:
    yield EXTENSION_CLUSTER_KIND


@hookimpl
def cpx_status_writers() -> Iterator[StatusWriterSpec]:
    yield StatusWriterSpec(name="extsvc", gvk=EXTENSION_SERVICE, merge=status.merge, refused=status.refused)


@hookimpl
def cpx_fuzz_strategies() -> Iterator[Any]:
    from cpx_extsvc.strategies import STRATEGIES  # noqa: PLC0415 - hypothesis only when fuzzing

    yield from STRATEGIES
