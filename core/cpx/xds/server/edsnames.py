"""The ClusterLoadAssignments the clusters of the current snapshot subscribe to, kept as clusters change.

Make-before-break sends routing once the Envoy was sent the endpoints of its clusters
(:mod:`cpx.xds.server.sequencing`). Which endpoints those are is read from every cluster once, then
kept up to date from the clusters a snapshot changed: a new cluster among 10k costs one cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping

import attrs
from envoy.config.cluster.v3 import cluster_pb2

from cpx.xds.resource import Resource, TypeSnapshot
from cpx.xds.server.changes import ChangeCache

# Keyed by content version (not by Resource, which would keep every body alive).
_eds_names: dict[str, str | None] = {}


def eds_name(cluster: Resource) -> str | None:
    """The ClusterLoadAssignment name an EDS cluster subscribes to (None for other clusters)."""
    if cluster.version in _eds_names:
        return _eds_names[cluster.version]
    msg = cluster_pb2.Cluster.FromString(cluster.body)
    name = None
    if msg.type == cluster_pb2.Cluster.EDS:
        name = str(msg.eds_cluster_config.service_name or msg.name)
    if len(_eds_names) >= 1 << 17:  # well above the clusters of one snapshot (30k and more)
        _eds_names.clear()
    _eds_names[cluster.version] = name
    return name


@attrs.frozen
class Wanted(Collection[str]):
    """The EDS names some cluster subscribes to that ``endpoints`` has."""

    counts: Mapping[str, int]
    endpoints: Mapping[str, Resource]

    def __contains__(self, name: object) -> bool:
        return name in self.counts and name in self.endpoints

    def __iter__(self) -> Iterator[str]:
        return (name for name in self.counts if name in self.endpoints)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@attrs.define(eq=False)
class ClusterEdsNames:
    """How many clusters of :attr:`clusters` subscribe to each EDS name."""

    clusters: TypeSnapshot | None = None
    counts: dict[str, int] = attrs.field(factory=dict)

    def wanted(self, clusters: TypeSnapshot, endpoints: TypeSnapshot, changes: ChangeCache) -> Wanted:
        """What the clusters of ``clusters`` need of ``endpoints`` (valid until the next call)."""
        if self.clusters is None or clusters.version != self.clusters.version:
            self._move_to(clusters, changes)
        return Wanted(self.counts, endpoints.resources)

    def _move_to(self, clusters: TypeSnapshot, changes: ChangeCache) -> None:
        before, self.clusters = self.clusters, clusters
        if before is None:
            self.counts = {}
            self._count(clusters.resources.values(), 1)
            return
        diff = changes.between(before, clusters)
        self._count((before.resources[n] for n in diff.changed | diff.removed if n in before.resources), -1)
        self._count((clusters.resources[n] for n in diff.changed), 1)

    def _count(self, clusters: Iterable[Resource], step: int) -> None:
        counts = self.counts
        for cluster in clusters:
            name = eds_name(cluster)
            if name is None:
                continue
            left = counts.get(name, 0) + step
            if left:
                counts[name] = left
            else:
                del counts[name]
