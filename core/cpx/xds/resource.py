"""xDS resources as the server holds them: serialised once, versioned by content."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs
from google.protobuf.message import Message

from cpx.xds.typeversion import EMPTY_TREE, VersionTree

LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
SCOPED_ROUTE = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
RUNTIME = "type.googleapis.com/envoy.service.runtime.v3.Runtime"

# Make-before-break push order within ADS (xDS protocol: CDS, EDS, LDS, RDS; secrets before the
# listeners and clusters that use them are not required but cost nothing). Scopes (SRDS) come
# after the listener that asks for them and before the RouteConfigurations they name.
PUSH_ORDER = (CLUSTER, ENDPOINT, SECRET, LISTENER, SCOPED_ROUTE, ROUTE)
SHORT_NAMES = {
    CLUSTER: "clusters",
    ENDPOINT: "endpoints",
    SECRET: "secrets",
    LISTENER: "listeners",
    SCOPED_ROUTE: "scoped-routes",
    ROUTE: "routes",
}

# Left out of :meth:`Snapshot.to_json` when empty (never the last of PUSH_ORDER: see last_json).
_SHOWN_WHEN_PRESENT = frozenset({SCOPED_ROUTE})


def content_version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@attrs.frozen
class Resource:
    """One named xDS resource: its serialised message and a version derived from the bytes.

    Versions are content hashes, so they are the same across restarts and replicas: an Envoy that
    reconnects with what it already has is not reconfigured.
    """

    name: str
    type_url: str
    body: bytes = attrs.field(repr=False)
    version: str

    @classmethod
    def from_message(cls, name: str, type_url: str, message: Message) -> Resource:
        """Serialise once.  An envoy-data-plane (betterproto2) message from a plugin is converted
        to xds-protos here, at the boundary, and never travels further."""
        if not isinstance(message, Message):
            from cpx.xds.interop import to_xds  # noqa: PLC0415 (only plugins using betterproto need it)

            message = to_xds(message)
        body = message.SerializeToString(deterministic=True)
        return cls(name, type_url, body, content_version(body))

    def message(self) -> Message:
        from cpx.xds.types import message_class  # noqa: PLC0415 (decoding is for tools only)

        msg = message_class(self.type_url)()
        msg.ParseFromString(self.body)
        return msg


@attrs.frozen
class TypeSnapshot:
    """The resources of one type URL at one moment, with a version over all of them.

    One derived from a ``previous`` snapshot (:meth:`of`) also says which names differ from it
    (``touched``, from the version ``parent``): the xDS server then diffs only those, and the
    version is updated from them (:class:`~cpx.xds.typeversion.VersionTree`), so a change costs
    what it touched rather than every resource of the type.
    """

    type_url: str
    resources: Mapping[str, Resource]
    version: str
    parent: str | None = attrs.field(default=None, eq=False)
    touched: frozenset[str] = attrs.field(default=frozenset(), eq=False, repr=False)
    tree: VersionTree = attrs.field(default=EMPTY_TREE, eq=False, repr=False)

    @classmethod
    def of(
        cls,
        type_url: str,
        resources: Mapping[str, Resource],
        *,
        previous: TypeSnapshot | None = None,
        changed: Iterable[str] | None = None,
    ) -> TypeSnapshot:
        """The snapshot of ``resources``; from ``previous`` (same type) in O(changed) when given.

        ``changed`` may name every name that can differ from ``previous`` (added, removed or
        replaced): only those are looked at. Without it, unchanged resources are recognised by
        identity (the caches hand out the same objects), in one pass at C speed.
        """
        owned = dict(resources)
        if previous is None or previous.type_url != type_url:
            tree = VersionTree.of(owned)
            return cls(type_url, owned, tree.version, tree=tree)
        touched = touched_names(previous.resources, owned, changed)
        if not touched:
            return previous
        tree = previous.tree.updated(owned, touched)
        return cls(type_url, owned, tree.version, previous.version, touched, tree)


def touched_names(
    before: Mapping[str, Resource], now: Mapping[str, Resource], changed: Iterable[str] | None = None
) -> frozenset[str]:
    """The names added, removed or at another version from ``before`` to ``now``; only those of
    ``changed`` are looked at when given (it must hold all of them)."""
    candidates = _replaced(before, now) if changed is None else changed
    return frozenset(n for n in candidates if _differs(before.get(n), now.get(n)))


def _replaced(before: Mapping[str, Resource], now: Mapping[str, Resource]) -> list[str]:
    """Names not bound to the very same resource in ``before`` and ``now``."""
    out = [name for name, res in now.items() if before.get(name) is not res]
    added = sum(1 for name in out if name not in before)
    if len(now) - added != len(before):  # some were removed (a set of every key costs ~0.5 ms)
        out.extend(before.keys() - now.keys())
    return out


def _differs(before: Resource | None, now: Resource | None) -> bool:
    if before is now:
        return False
    return before is None or now is None or before.version != now.version


@runtime_checkable
class ChangeReporting(Protocol):
    """A resource cache that knows which names its last change touched: the snapshot handler
    versions only those (:meth:`TypeSnapshot.of` with ``changed``) rather than every resource."""

    def changed_since(self, contents: Mapping[str, Resource]) -> Collection[str] | None:
        """The names that may differ between ``contents`` (an earlier ``contents()``) and the
        current contents; None when not known."""


@attrs.frozen
class Snapshot:
    """Everything served to Envoy: one :class:`TypeSnapshot` per type URL.

    A ``clusters_only`` snapshot holds the first build's clusters, endpoints and secrets before
    its listeners and routes are built (docs/design/0016): Envoy can warm them meanwhile, and
    nothing of its routing is answered from it.
    """

    types: Mapping[str, TypeSnapshot]
    clusters_only: bool = False

    def get(self, type_url: str) -> TypeSnapshot:
        found = self.types.get(type_url)
        return found if found is not None else TypeSnapshot.of(type_url, {})

    def to_json(self, *, last_until: int | None = None) -> dict[str, Any]:
        """Envoy JSON of every resource, grouped by short type name (for translate and debug).

        Scoped routes appear only when there are some: the classic single-RouteConfiguration shape
        has none, and its output stays what it was before SRDS existed.  ``last_until``: only
        that many of the last type's resources (``cpx translate`` renders the others elsewhere,
        with :meth:`last_json`).
        """
        last = PUSH_ORDER[-1]  # always shown (never in _SHOWN_WHEN_PRESENT), as last_json assumes
        shown = [t for t in PUSH_ORDER if t not in _SHOWN_WHEN_PRESENT or self.get(t).resources]
        return {SHORT_NAMES[t]: list(self._json(t, 0, last_until if t == last else None)) for t in shown}

    def last_json(self, start: int) -> Iterator[Any]:
        """Envoy JSON of the resources of the last type of :meth:`to_json`, from index ``start``,
        one at a time."""
        return self._json(PUSH_ORDER[-1], start, None)

    def _json(self, type_url: str, start: int, stop: int | None) -> Iterator[Any]:
        from cpx.xds.protojson import message_json  # noqa: PLC0415 (for tools only)
        from cpx.xds.types import message_class  # noqa: PLC0415

        decode = message_class(type_url).FromString  # Resource.message, without a lookup per resource
        resources = self.get(type_url).resources
        return (message_json(decode(resources[name].body)) for name in sorted(resources)[start:stop])
