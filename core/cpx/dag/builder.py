"""The DAG builder: runs the processors in their declared order and prunes the result."""

from __future__ import annotations

import graphlib
from collections.abc import Sequence

import attrs

from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.dag.registry import Registries
from cpx.errors import PluginError
from cpx.isolation import attributing_reads
from cpx.records import Processor, ProcessorSpec
from cpx.sources.cache import SourceCache
from cpx.sources.view import Lookups, SourceView


def order_processors(specs: Sequence[ProcessorSpec]) -> list[ProcessorSpec]:
    """Sort processors by phase, then ``after``/``before`` constraints, then name.

    Registration order never matters.  A constraint naming a processor that is not loaded is
    ignored, so a plugin can order itself against an optional one (Ingress runs before HTTPProxy
    when both are enabled, as in Contour); a cycle is an error naming the processors.
    """
    by_name: dict[str, ProcessorSpec] = {}
    for spec in specs:
        if spec.name in by_name:
            raise PluginError(f"two DAG processors are named {spec.name!r}")
        by_name[spec.name] = spec
    graph: dict[str, set[str]] = {name: set() for name in by_name}
    for spec in specs:
        graph[spec.name].update(other for other in spec.after if other in by_name)
        for other in spec.before:
            if other in by_name:
                graph[other].add(spec.name)
    # Phases are constraints too: every processor of an earlier phase runs first.
    for spec in specs:
        for earlier in specs:
            if earlier.phase < spec.phase:
                graph[spec.name].add(earlier.name)
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as err:
        cycle = " -> ".join(err.args[1])
        raise PluginError(f"DAG processor ordering has a cycle: {cycle}") from None
    ordered: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda n: (by_name[n].phase, n))
        ordered.extend(ready)
        sorter.done(*ready)
    return [by_name[name] for name in ordered]


def make_processor(spec: ProcessorSpec, config: Config) -> Processor:
    """The processor of ``spec``: built now, or when its first input appears (``spec.inputs``)."""
    return spec.factory(config) if not spec.inputs else DeferredProcessor(spec, config)


@attrs.define(eq=False)
class DeferredProcessor:
    """A processor with declared inputs: built, and run, from the first build whose source holds
    an object of one of its input kinds.  Before that it would have done nothing, so skipping it
    changes no output and spares importing its plugin's modules.  Once built it runs every build,
    as it would have, so that its memos see every change."""

    spec: ProcessorSpec
    config: Config
    processor: Processor | None = None

    def run(self, dag: DAG, source: SourceView) -> None:
        processor = self.processor
        if processor is None:
            if not any(source.count(gvk) for gvk in self.spec.inputs):
                return
            processor = self.processor = self.spec.factory(self.config)
        processor.run(dag, source)


@attrs.define(eq=False)
class Builder:
    processors: Sequence[tuple[str, Processor]]
    # The processors that change virtual hosts only through the DAG's accessors
    # (ProcessorSpec.accessors_only); before any other one runs, frozen hosts are copied.
    accessors_only: frozenset[str] = frozenset()
    # What each processor read in the last build (the source keeps their union: see
    # SourceCache.build_recording).
    reads: dict[str, Lookups] = attrs.field(factory=dict)
    # The registries the processors declare they publish (ProcessorSpec.publishes).
    publishes: frozenset[str] = frozenset()
    # The last DAG built: pruning the next one looks again only at the hosts that changed.
    _last: DAG | None = attrs.field(default=None, init=False, repr=False)

    def build(self, source: SourceCache) -> DAG:
        dag = DAG(registries=Registries(declared=self.publishes))
        view = source.view
        self.reads = {}
        with source.build_recording(), attributing_reads(source):
            for name, processor in self.processors:
                if name not in self.accessors_only:
                    dag.thaw()
                with source.recording() as reads:
                    processor.run(dag, view)
                self.reads[name] = reads
        dag.prune(self._last)
        dag.seal()
        self._last = dag
        return dag
