"""Plugins' own listener and cluster nodes, translated by the kind that claims each node's type.

A plugin contributes kinds (:class:`cpx.records.ListenerKindSpec`, :class:`cpx.records.ClusterKindSpec`)
and its processors add nodes (:meth:`cpx.dag.dag.DAG.add_listener_node` / ``add_cluster_node``).
:class:`KindTranslator` builds each distinct node value once (nodes are frozen values, so an
unchanged node from the last build reuses its Resource) and checks what the plugin built: the
resource type, the name, and Envoy's rules (:mod:`cpx.xds.constraints.validate`).

A node that cannot be translated is the fault of the object it came from: :meth:`KindTranslator.reject`
raises :class:`cpx.isolation.ObjectFault` for its origin, so the snapshot handler leaves that object
out (its status says why) and publishes the rest.  A node without an origin (a plugin's static
node) is left out with an error in the log: there is nothing to blame it on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from cpx.dag.dag import Note
from cpx.dag.nodes import CustomNode, LoadAssignment, Secret, ServicePort
from cpx.isolation import ObjectFault, exception_note, sanitize
from cpx.records import ClusterKindSpec, ListenerKindSpec
from cpx.xds.constraints.notes import type_name, violation_note
from cpx.xds.constraints.validate import violations
from cpx.xds.resource import Resource
from cpx.xds.types import message_class

log = logging.getLogger("cpx.xds.kinds")

S = TypeVar("S", ListenerKindSpec, ClusterKindSpec)
T = TypeVar("T")
# What a kind built for one node: the Resource and the message (for checks across nodes).
Built = tuple[CustomNode, Resource, Message]
# Problems with a built message beyond Envoy's rules, e.g. a listener without a port.
ShapeCheck = Callable[[Message], list[str]]


class KindTranslator(Generic[S]):
    """Builds the nodes of one resource type with the kinds the enabled plugins contribute."""

    def __init__(self, type_url: str, shape: ShapeCheck | None = None) -> None:
        self.type_url = type_url
        self.kind = type_name(type_url)  # "Listener", "Cluster"
        self._shape = shape
        self._specs: dict[type, S] = {}
        # The last build's nodes only, so nodes that left the DAG are forgotten.
        self._memo: dict[CustomNode, Built | None] = {}

    def bind(self, specs: Iterable[S]) -> None:
        self._specs = {spec.node_type: spec for spec in specs}
        self._memo = {}

    def spec_for(self, node: CustomNode) -> S | None:
        return self._specs.get(type(node))

    def translate(self, nodes: Sequence[CustomNode]) -> list[Built]:
        """What each node builds, in node order; raises ObjectFault for a node that fails."""
        previous, memo = self._memo, dict[CustomNode, Built | None]()
        out: list[Built] = []
        for node in nodes:
            if node in memo:
                built = memo[node]
            elif node in previous:
                built = previous[node]
            else:
                built = self._build(node)
            memo[node] = built
            if built is not None:
                out.append(built)
        self._memo = memo
        return out

    def inputs(self, node: CustomNode, what: Callable[[S], Callable[[Any], Iterable[T]]]) -> tuple[T, ...]:
        """One of the node's inputs (``lambda spec: spec.secrets``); nothing for an unclaimed node
        (its build reports that)."""
        spec = self.spec_for(node)
        if spec is None:
            return ()
        try:
            return tuple(what(spec)(node))
        except Exception as err:
            self.reject(node, self._failure_note(spec, node, err))
            return ()

    def reject(self, node: CustomNode, note: Note) -> None:
        """Leave the node out: its origin's fault, or (no origin) an error in the log."""
        if node.origin is not None:
            raise ObjectFault(node.origin, note)
        log.error(
            "%s %r left out: %s (%s): %s", self.kind.lower(), node.name, note.type, note.reason, note.message
        )

    def conflict(self, node: CustomNode, reason: str, message: str) -> None:
        """Leave the node out for clashing with another resource (checked across nodes, not memoised)."""
        self.reject(node, Note(type=f"{self.kind}Error", reason=reason, message=sanitize(message)))

    def _build(self, node: CustomNode) -> Built | None:
        spec = self.spec_for(node)
        if spec is None:
            message = (
                f"no enabled plugin has a {self.kind.lower()} kind for {type(node).__qualname__} "
                f"(node {node.name!r})"
            )
            self.reject(node, Note(type=f"{self.kind}Error", reason="UnknownKind", message=sanitize(message)))
            return None
        try:
            built = spec.build(node)
        except Exception as err:
            self.reject(node, self._failure_note(spec, node, err))
            return None
        problems = self._problems(node, built)
        if problems:
            what = f"{self.kind.lower()} kind {spec.name!r} built an invalid {self.kind} for {node.name!r}"
            message = sanitize(f"{what}: {'; '.join(problems)}")
            self.reject(node, Note(type=f"{self.kind}Error", reason=f"Invalid{self.kind}", message=message))
            return None
        found = violations(built)
        if found:
            self.reject(node, violation_note(f"{self.kind} {node.name!r}", found, self.kind))
            return None
        return node, Resource.from_message(node.name, self.type_url, built), built

    def _problems(self, node: CustomNode, built: object) -> list[str]:
        expected = message_class(self.type_url)
        if not isinstance(built, expected):
            return [f"got {type(built).__name__}, not {expected.DESCRIPTOR.full_name}"]
        name = getattr(built, "name", "")
        if not name:
            return ["it has no name"]
        if name != node.name:
            return [f"it is named {name!r}, not after its node"]
        return self._shape(built) if self._shape is not None else []

    def _failure_note(self, spec: S, node: CustomNode, err: Exception) -> Note:
        note = exception_note(err)
        message = sanitize(f"{self.kind.lower()} kind {spec.name!r} failed on {node.name!r}: {note.message}")
        return Note(type=note.type, reason=note.reason, message=message)


def node_secrets(
    listeners: KindTranslator[ListenerKindSpec],
    listener_nodes: Iterable[CustomNode],
    clusters: KindTranslator[ClusterKindSpec],
    cluster_nodes: Iterable[CustomNode],
) -> set[Secret]:
    """The Secrets plugins' own nodes reference over SDS."""
    found: set[Secret] = set()
    for node in listener_nodes:
        found.update(listeners.inputs(node, lambda spec: spec.secrets))
    for node in cluster_nodes:
        found.update(clusters.inputs(node, lambda spec: spec.secrets))
    return found


def node_service_ports(
    clusters: KindTranslator[ClusterKindSpec], nodes: Iterable[CustomNode]
) -> list[ServicePort]:
    """The Service ports whose endpoints plugins' own cluster nodes read over EDS."""
    return [port for node in nodes for port in clusters.inputs(node, lambda spec: spec.service_ports)]


def node_load_assignments(
    clusters: KindTranslator[ClusterKindSpec], nodes: Iterable[CustomNode]
) -> list[LoadAssignment]:
    """The merged, weighted ClusterLoadAssignments plugins' own cluster nodes read over EDS."""
    return [found for node in nodes for found in clusters.inputs(node, lambda spec: spec.load_assignments)]
