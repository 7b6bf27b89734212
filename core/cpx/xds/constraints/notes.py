"""Checking resources against the rules Envoy enforces, before any Envoy sees them.

The rules themselves (protoc-gen-validate constraints read from the descriptors, plus the semantic
checks Envoy makes beyond them) live in :mod:`cpx.xds.constraints.validate`; this module applies them to
serialised :class:`~cpx.xds.resource.Resource` values and words the result for status.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.message import DecodeError

from cpx.dag.dag import Note
from cpx.isolation import sanitize
from cpx.xds.constraints.validate import Violation, pass_check, resource_violations, violations
from cpx.xds.resource import Resource
from cpx.xds.types import message_class

# Enough to name the problem; a resource with hundreds of violations is one tenant's doing anyway.
MAX_REPORTED = 3


def check_resource(res: Resource) -> list[Violation]:
    """The constraint violations of one resource."""
    return resource_violations(res.type_url, res.body)


def resource_checker(type_url: str) -> Callable[[Resource], list[Violation]]:
    """:func:`check_resource` for many resources of one type (a build's clusters, endpoints and
    scopes): the type's class and pass check are looked up once, not per resource."""
    cls = message_class(type_url)
    passes = pass_check(cls.DESCRIPTOR)

    def check(res: Resource) -> list[Violation]:
        try:
            message = cls.FromString(res.body)
        except DecodeError:
            return resource_violations(type_url, res.body)
        return [] if passes(message) else violations(message)

    return check


def type_name(type_url: str) -> str:
    """``Cluster`` for ``type.googleapis.com/envoy.config.cluster.v3.Cluster``."""
    return type_url.rpartition(".")[2]


def constraint_note(res: Resource, problems: list[Violation]) -> Note:
    """The note for a resource that breaks Envoy's rules, e.g. ``ClusterError`` /
    ``EnvoyConstraintViolated``: "Envoy would reject Cluster 'x': <path>: <problem>"."""
    return violation_note(f"{type_name(res.type_url)} {res.name!r}", problems, type_name(res.type_url))


def violation_note(what: str, problems: list[Violation], kind: str = "Route") -> Note:
    shown = "; ".join(f"{v.path}: {v.message}" for v in problems[:MAX_REPORTED])
    more = f" (and {len(problems) - MAX_REPORTED} more)" if len(problems) > MAX_REPORTED else ""
    return Note(
        type=f"{kind}Error",
        reason="EnvoyConstraintViolated",
        message=sanitize(f"Envoy would reject {what}: {shown}{more}"),
    )
