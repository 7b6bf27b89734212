"""What the enabled plugins contribute to Envoy translation, ordered and checked by the core.

The plugin host collects the records (HTTP filters, listener kinds, cluster kinds) once at start-up;
the snapshot handler hands them to every resource cache that declares it uses them
(:class:`UsesContributions`), so caches never reach into the plugin host or global state.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs

from cpx.records import ClusterKindSpec, HttpFilterSpec, ListenerKindSpec


@attrs.frozen(kw_only=True)
class Contributions:
    http_filters: tuple[HttpFilterSpec, ...] = ()  # in connection-manager order (the router last)
    listener_kinds: tuple[ListenerKindSpec, ...] = ()
    cluster_kinds: tuple[ClusterKindSpec, ...] = ()


@runtime_checkable
class UsesContributions(Protocol):
    """A resource cache that translates with what plugins contribute."""

    def bind_contributions(self, contributions: Contributions) -> None: ...
