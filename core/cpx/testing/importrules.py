"""import-linter contract types for the rules the built-in ones cannot say (see ``[tool.importlinter]``).

Plugin packages are recognised by a name pattern (``cpx_*``), not a list, so a plugin added tomorrow
is covered without editing the contracts; import-linter's own wildcards match whole module names
only.  Third-party plugin authors can register these types in their own configuration too.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from typing import cast

import grimp
from importlinter import Contract, ContractCheck, fields, output
from importlinter.application import contract_utils

Link = tuple[str, str, tuple[int, ...]]


def _packages(graph: grimp.ImportGraph, pattern: str) -> set[str]:
    """Top-level packages in the graph (root or external) whose name matches the glob."""
    return {m for m in graph.modules if "." not in m and fnmatch.fnmatchcase(m, pattern)}


def _modules_of(graph: grimp.ImportGraph, package: str) -> set[str]:
    if package not in graph.modules:
        return set()
    if graph.is_module_squashed(package):
        return {package}
    return {package} | graph.find_descendants(package)


def _link(graph: grimp.ImportGraph, importer: str, imported: str) -> Link:
    lines = tuple(d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported))
    return importer, imported, lines


def _render(links: Iterable[Link]) -> None:
    for importer, imported, lines in links:
        where = f" (l.{', '.join(map(str, lines))})" if lines else ""
        output.print_error(f"- {importer} -> {imported}{where}", bold=False)
    output.new_line()


def _render_chains(chains: Iterable[tuple[str, ...]]) -> None:
    for chain in chains:
        output.print_error("- " + " -> ".join(chain), bold=False)
    output.new_line()


class ForbiddenPatternContract(Contract):
    """``source_modules`` never import (even indirectly) a top-level package matching ``forbidden``."""

    type_name = "forbidden_pattern"

    source_modules = fields.ListField(subfield=fields.StringField())
    forbidden = fields.StringField()

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        chains: list[tuple[str, ...]] = []
        for source in sorted(cast("list[str]", self.source_modules)):
            for target in sorted(_packages(graph, cast("str", self.forbidden))):
                chain = graph.find_shortest_chain(source, target, as_packages=True)
                if chain:
                    chains.append(tuple(chain))
        return ContractCheck(kept=not chains, warnings=[], metadata={"chains": chains})

    def render_broken_contract(self, check: ContractCheck) -> None:
        _render_chains(check.metadata["chains"])


class IndependentPatternContract(Contract):
    """The top-level packages matching ``packages`` never import one another, even indirectly."""

    type_name = "independent_pattern"

    packages = fields.StringField()

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        found = sorted(_packages(graph, cast("str", self.packages)))
        chains = [
            tuple(chain)
            for importer in found
            for imported in found
            if importer != imported
            and (chain := graph.find_shortest_chain(importer, imported, as_packages=True))
        ]
        return ContractCheck(kept=not chains, warnings=[], metadata={"chains": chains})

    def render_broken_contract(self, check: ContractCheck) -> None:
        _render_chains(check.metadata["chains"])


class PublicApiContract(Contract):
    """Packages matching ``importers`` import from ``api`` only the modules listed in ``public``.

    Direct imports only: what the public modules import in turn is the core's business.
    """

    type_name = "public_api"

    importers = fields.StringField()
    api = fields.StringField()
    public = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        api = cast("str", self.api)
        allowed = set(cast("list[str]", self.public))
        api_modules = _modules_of(graph, api)
        links = [
            _link(graph, importer, imported)
            for package in sorted(_packages(graph, cast("str", self.importers)))
            for importer in sorted(_modules_of(graph, package))
            for imported in sorted(graph.find_modules_directly_imported_by(importer) & api_modules)
            if imported not in allowed
        ]
        return ContractCheck(kept=not links, warnings=[], metadata={"links": links})

    def render_broken_contract(self, check: ContractCheck) -> None:
        public = cast("list[str]", self.public)
        output.print_error(f"Only these modules are public: {', '.join(public)}", bold=False)
        output.new_line()
        _render(check.metadata["links"])


class AcyclicContract(Contract):
    """No import cycle between the modules of the listed packages (and of those matching a pattern)."""

    type_name = "acyclic"

    packages = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph,
            ignore_imports=self.ignore_imports,  # type: ignore[arg-type]  # a parsed SetField is a set
            unmatched_alerting=contract_utils.AlertLevel.ERROR,
        )
        modules: set[str] = set()
        for expression in cast("list[str]", self.packages):
            for package in _packages(graph, expression) if "*" in expression else {expression}:
                modules |= _modules_of(graph, package)
        cycles = [_cycle_through(graph, group) for group in _strongly_connected(graph, modules)]
        return ContractCheck(
            kept=not cycles, warnings=list(removal.warnings), metadata={"cycles": sorted(cycles)}
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        _render_chains(check.metadata["cycles"])


def _strongly_connected(graph: grimp.ImportGraph, modules: set[str]) -> Iterator[list[str]]:
    """Tarjan's algorithm, iterative: the groups of two or more modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.find_modules_directly_imported_by(succ) & modules))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while (member := stack.pop()) != node:
                        on_stack.discard(member)
                        group.append(member)
                    on_stack.discard(node)
                    if group:
                        yield sorted([node, *group])


def _cycle_through(graph: grimp.ImportGraph, group: list[str]) -> tuple[str, ...]:
    """One concrete cycle in a strongly connected group, to show what to break."""
    first, rest = group[0], set(group[1:])
    for succ in sorted(graph.find_modules_directly_imported_by(first) & rest):
        back = graph.find_shortest_chain(succ, first)
        if back:
            return (first, *back)
    return tuple(group)
