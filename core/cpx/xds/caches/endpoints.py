"""EDS: ClusterLoadAssignments from EndpointSlices (Contour's ``endpointslicetranslator.go``).

Every Service port the DAG uses gets a CLA named by its EDS service name, empty when the Service
has no ready endpoints so that Envoy's clusters can still warm.  Endpoint changes take a fast path
(:meth:`EndpointCache.on_endpoints_change`) that recomputes only the CLAs of the changed Services.
A CLA is rebuilt only when its inputs (the slice objects) changed, and gets a new
:class:`Resource` only when its endpoints did, so the server pushes just what changed.

A cluster's ``HealthCheck.port`` is a Service port *number* (HTTPProxy's ``healthPort``); when it
differs from the served port, it is resolved to that Service port's name and then to the slice
port of that name, whose number becomes every endpoint's ``health_check_config.port_value``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from envoy.config.endpoint.v3 import endpoint_pb2 as endpoint_v3

from cpx import objects as k8s
from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.dag.nodes import Cluster, CustomNode, LoadAssignment, ServicePort
from cpx.objects import KubeObject, ObjectKey
from cpx.records import ClusterKindSpec
from cpx.sources.view import SourceView
from cpx.xds import resource
from cpx.xds.caches.kinds import KindTranslator, node_load_assignments, node_service_ports
from cpx.xds.contributions import Contributions
from cpx.xds.resource import Resource

# Per feed: the resolved health port name and the slice objects it was computed from.
Inputs = tuple[tuple[str, tuple[KubeObject, ...]], ...]
# Sorted, unique (address, port) pairs of one Service port, and the health-check port (0: none).
PortEndpoints = tuple[tuple[tuple[str, int], ...], int]
# EndpointSlice address types Envoy can use as EDS socket addresses (not FQDN).
IP_ADDRESS_TYPES = frozenset({"IPv4", "IPv6"})


@attrs.frozen(cache_hash=True)
class Feed:
    """One Service port whose ready endpoints form one locality of a CLA."""

    namespace: str
    service: str
    port_name: str
    # Service port number that active health checks use, when it differs from the served port.
    health_port: int | None = None
    # The locality's load balancing weight (a plugin's LoadAssignment; 0 leaves it unset).
    weight: int = 1

    @classmethod
    def of(cls, port: ServicePort, health_port: int | None = None) -> Feed:
        return cls(port.namespace, port.name, port.port_name, health_port)


@attrs.frozen
class _State:
    """A CLA with what it was computed from, to tell cheaply whether it must change."""

    feeds: tuple[Feed, ...]
    # Slice objects are compared by identity (see _same_inputs).
    inputs: Inputs = attrs.field(eq=False, repr=False)
    endpoints: tuple[PortEndpoints, ...]
    resource: Resource


class EndpointCache:
    """The EDS resources for the last DAG, kept current with EndpointSlice changes."""

    type_url = resource.ENDPOINT

    def __init__(self, config: Config) -> None:
        self.config = config
        self._source: SourceView | None = None
        self._states: dict[str, _State] = {}
        self._resources: dict[str, Resource] = {}
        # (namespace, service) -> names of the CLAs it feeds.
        self._by_service: dict[tuple[str, str], list[str]] = {}
        # The last DAG's distinct nodes and what they asked for, and the source revision then:
        # a rebuild that changed neither the nodes nor any slice costs two comparisons.
        self._nodes: tuple[frozenset[Cluster], tuple[CustomNode, ...]] | None = None
        # Plugins' cluster kinds: which Service ports their own cluster nodes read.
        self._kinds: KindTranslator[ClusterKindSpec] = KindTranslator(self.type_url)
        self._plan: dict[str, tuple[Feed, ...]] | None = None
        # The nodes as the DAG's routes held them when the plan was made (see ClusterCache._walk).
        self._walk: tuple[tuple[tuple[Cluster, ...], ...], tuple[CustomNode, ...]] | None = None
        self._node_feeds: dict[Cluster, tuple[str, tuple[Feed, ...]]] = {}
        self._seen = -1
        # The source revision the CLAs last caught up with (a build or the fast path).
        self._endpoints_seen = -1

    def bind_contributions(self, contributions: Contributions) -> None:
        self._kinds.bind(contributions.cluster_kinds)
        self._plan = None

    def bind_source(self, source: SourceView) -> None:
        """Where EndpointSlices come from; the pipeline calls this once, before any DAG."""
        self._source = source

    def contents(self) -> Mapping[str, Resource]:
        return self._resources

    def on_change(self, dag: DAG) -> None:
        source = self._source
        if source is None:
            raise RuntimeError("EndpointCache.bind_source() must be called before the first DAG")
        walk = (dag.cluster_walk(), dag.cluster_nodes())
        plan, nodes = self._plan, self._nodes
        if plan is None or nodes is None or walk != self._walk:  # the very same nodes: the same plan
            nodes = (dag.cluster_set(), walk[1])
            if plan is None or nodes != self._nodes:
                plan = self._plan_for(
                    dag.unique_clusters(),
                    node_service_ports(self._kinds, nodes[1]),
                    node_load_assignments(self._kinds, nodes[1]),
                )
        dirty = self._dirty_services(source)
        seen = source.revision
        if plan is self._plan and dirty is not None and not dirty:
            self._seen = self._endpoints_seen = seen
            self._walk = walk
            return  # the same CLAs from the same slices
        by_service = self._by_service
        if plan is not self._plan:
            by_service = {}
            for name, feeds in plan.items():
                for feed in feeds:
                    by_service.setdefault((feed.namespace, feed.service), []).append(name)
        stale = None if dirty is None else {name for service in dirty for name in by_service.get(service, ())}
        old_states = self._states
        states: dict[str, _State] = {}
        for name, feeds in plan.items():
            old = old_states.get(name)
            if old is not None and stale is not None and name not in stale and old.feeds == feeds:
                states[name] = old
            else:
                states[name] = self._refresh(name, feeds, source, old)
        self._states, self._by_service, self._plan, self._nodes = states, by_service, plan, nodes
        self._walk = walk
        self._seen = self._endpoints_seen = seen
        resources = {name: state.resource for name, state in states.items()}
        # Same contents: hand out the same mapping, which observers can compare by identity.
        if resources != self._resources:
            self._resources = resources

    def _dirty_services(self, source: SourceView) -> set[tuple[str, str]] | None:
        """Services whose slices (or, for health ports, whose own object) changed since last time."""
        if self._seen < 0:
            return None
        slices = source.endpoint_changes_since(self._seen)
        changes = source.changes_since(self._seen)
        if slices is None or changes is None:
            return None
        dirty = set(slices)
        dirty.update((c.namespace, c.name) for c in changes if c.kind == "Service" and not c.group)
        return dirty

    def _plan_for(
        self,
        clusters: tuple[Cluster, ...],
        node_ports: Iterable[ServicePort],
        node_assignments: Iterable[LoadAssignment] = (),
    ) -> dict[str, tuple[Feed, ...]]:
        """What :func:`assignments` computes, reusing each unchanged node's Feed objects."""
        previous = self._node_feeds
        memo: dict[Cluster, tuple[str, tuple[Feed, ...]]] = {}
        plan: dict[str, tuple[Feed, ...]] = {}
        for node in clusters:
            entry = memo.get(node) or previous.get(node)
            if entry is None:
                up = node.upstream
                if up.external_name is not None:
                    entry = ("", ())
                else:
                    entry = (up.eds_name, (Feed.of(up, _health_port(node)),))
            memo[node] = entry
            name, feeds = entry
            if not name:
                continue
            current = plan.get(name)
            if current is None or _preferred(feeds[0], current[0]):
                plan[name] = feeds
        for up in node_ports:
            if up.external_name is None and up.eds_name not in plan:
                plan[up.eds_name] = (Feed.of(up),)
        for assignment in node_assignments:
            plan.setdefault(
                assignment.name,
                tuple(
                    Feed(port.namespace, port.name, port.port_name, weight=weight)
                    for port, weight in zip(assignment.ports, assignment.weights, strict=True)
                    if port.external_name is None
                ),
            )
        self._node_feeds = memo
        return {name: plan[name] for name in sorted(plan)}

    def on_endpoints_change(self, source: SourceView, services: Iterable[tuple[str, str]]) -> bool:
        """Recompute the CLAs fed by these (namespace, service) pairs; True if any changed.

        Services the last DAG does not use cost nothing, as in Contour.  Every Service whose
        slices the source cache logged since the CLAs were last brought up to date counts too:
        a slice relabelled from one Service to another changes both, while its event names only
        the new one.
        """
        wanted = set(services)
        logged = source.endpoint_changes_since(self._endpoints_seen) if self._endpoints_seen >= 0 else None
        wanted.update(self._by_service if logged is None else logged)
        self._endpoints_seen = source.revision
        names = {name for service in wanted for name in self._by_service.get(service, ())}
        changed: dict[str, Resource] = {}
        for name in names:
            old = self._states[name]
            new = self._states[name] = self._refresh(name, old.feeds, source, old)
            if new.resource is not old.resource:
                changed[name] = new.resource
        if not changed:
            return False
        # A new mapping (same key order), never an in-place edit of the one handed out.
        self._resources = {**self._resources, **changed}
        return True

    def _refresh(self, name: str, feeds: tuple[Feed, ...], source: SourceView, old: _State | None) -> _State:
        # Comprehensions rather than generators: this runs per CLA, mostly for one feed.
        inputs: Inputs = tuple(
            [
                (_health_port_name(source, feed), tuple(source.endpoint_slices(feed.namespace, feed.service)))
                for feed in feeds
            ]
        )
        if old is not None and old.feeds == feeds and _same_inputs(old.inputs, inputs):
            return old
        endpoints = tuple(
            [
                port_endpoints(feed.port_name, health, slices)
                for feed, (health, slices) in zip(feeds, inputs, strict=True)
            ]
        )
        # The message is a function of the name, the endpoints and the weights only.
        weights = tuple([feed.weight for feed in feeds])
        if old is not None and old.endpoints == endpoints and tuple(f.weight for f in old.feeds) == weights:
            return _State(feeds, inputs, endpoints, old.resource)
        message = cluster_load_assignment(name, endpoints, weights)
        return _State(feeds, inputs, endpoints, Resource.from_message(name, self.type_url, message))


def _same_inputs(old: Inputs, new: Inputs) -> bool:
    """Identity of slice objects: the source cache replaces an object on every real change."""
    if len(old) != len(new):
        return False
    for (old_health, old_slices), (new_health, new_slices) in zip(old, new, strict=True):
        if old_health != new_health or len(old_slices) != len(new_slices):
            return False
        if any(a is not b for a, b in zip(old_slices, new_slices, strict=True)):
            return False
    return True


# -- what the DAG needs ------------------------------------------------------------------------


def assignments(dag: DAG) -> dict[str, tuple[Feed, ...]]:
    """CLA name -> the Service ports feeding it, for every non-ExternalName upstream in the DAG."""
    plan: dict[str, tuple[Feed, ...]] = {}
    for node in dag.clusters():
        up = node.upstream
        if up.external_name is not None:
            continue
        feed = Feed.of(up, _health_port(node))
        current = plan.get(up.eds_name)
        if current is None or _preferred(feed, current[0]):
            plan[up.eds_name] = (feed,)
    for port in dag.service_ports():
        name = port.eds_name
        if name not in plan:
            plan[name] = (Feed.of(port),)
    return plan


def _preferred(feed: Feed, current: Feed) -> bool:
    """One CLA per name (Contour drops duplicates): prefer a node that asks for a health port,
    the lowest if several do, so that the choice never depends on the order of the DAG."""
    if feed.health_port is None:
        return False
    return current.health_port is None or feed.health_port < current.health_port


def _health_port(node: Cluster) -> int | None:
    hc = node.health_check
    if hc is None or not hc.port or hc.port == node.upstream.port:
        return None
    return hc.port


def _health_port_name(source: SourceView, feed: Feed) -> str:
    """The Service port name of the health port: endpoints are matched by name, never by number."""
    if feed.health_port is None:
        return ""
    key = ObjectKey(k8s.SERVICE.group, k8s.SERVICE.kind, feed.namespace, feed.service)
    service = source.get(key) or {}
    for port in (service.get("spec") or {}).get("ports") or []:
        if port.get("port") == feed.health_port:
            return str(port.get("name") or "")
    return ""


# -- translation -------------------------------------------------------------------------------


def port_endpoints(port_name: str, health_name: str, slices: Sequence[Mapping[str, Any]]) -> PortEndpoints:
    """Contour's RecalculateEndpoints for one Service port.

    Slice ports are matched to the Service port by name (an unnamed Service port matches the
    unnamed slice port); only TCP; endpoints whose ``ready`` condition is false are skipped
    (missing means ready); the first address of each endpoint is used; duplicates across slices
    are dropped and the result is sorted.
    """
    found: set[tuple[str, int]] = set()
    health_check_port = 0
    for slice_ in slices:
        if slice_.get("addressType", "IPv4") not in IP_ADDRESS_TYPES:
            continue
        ports = _tcp_ports(slice_)
        if health_name and health_name != port_name:
            health_check_port = next((n for name, n in ports if name == health_name), health_check_port)
        numbers = [n for name, n in ports if name == port_name]
        if not numbers:
            continue
        for endpoint in slice_.get("endpoints") or ():
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            addresses = endpoint.get("addresses") or ()
            if addresses:
                address = str(addresses[0])
                found.update([(address, number) for number in numbers])
    return tuple(sorted(found)), health_check_port


def _tcp_ports(slice_: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(name, number) of the slice's TCP ports; a missing protocol is TCP, the API default."""
    return [
        (str(p.get("name") or ""), int(p["port"]))
        for p in slice_.get("ports") or ()
        if p.get("port") is not None and (p.get("protocol") or "TCP") == "TCP"
    ]


def cluster_load_assignment(
    name: str, feeds: Sequence[PortEndpoints], weights: Sequence[int] | None = None
) -> endpoint_v3.ClusterLoadAssignment:
    """One locality per feed with endpoints, of the feed's weight (default 1, as Contour's default
    service weight; 0 leaves it unset, as Contour's UInt32OrNil)."""
    cla = endpoint_v3.ClusterLoadAssignment(cluster_name=name)
    for index, (addresses, health_check_port) in enumerate(feeds):
        if not addresses:
            continue
        locality = cla.endpoints.add()
        weight = 1 if weights is None else weights[index]
        if weight:
            locality.load_balancing_weight.value = weight
        for address, port in addresses:
            endpoint = locality.lb_endpoints.add().endpoint
            endpoint.address.socket_address.address = address
            endpoint.address.socket_address.port_value = port
            if health_check_port:
                endpoint.health_check_config.port_value = health_check_port
    return cla
