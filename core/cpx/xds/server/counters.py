"""What the xDS server counts, as a protocol any metrics backend can satisfy.

The shape is prometheus_client's: ``xds_connections`` is a gauge (``inc``/``dec``) and the
others are counters with one label (``labels(type_url=...).inc()``). Label values come from a fixed
set (:func:`cpx.xds.server.guard.type_label`), never straight from a client. So
:class:`cpx.ops.metrics.Metrics` can be handed to the server as is, and :class:`XdsCounters` is a
plain in-memory implementation for tests and for running without prometheus.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs


class Incrementable(Protocol):
    def inc(self, amount: float = ...) -> None: ...


class GaugeLike(Incrementable, Protocol):
    def dec(self, amount: float = ...) -> None: ...


class LabelledCounter(Protocol):
    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Incrementable: ...


class XdsMetrics(Protocol):
    """Counters the server updates.

    - ``xds_connections``: open xDS streams (gauge; +1 when a stream starts, -1 when it ends)
    - ``xds_requests``: discovery requests received, by ``type_url``
    - ``xds_responses``: discovery responses sent, by ``type_url``
    - ``xds_nacks``: requests with ``error_detail`` set (any nonce, repeats included), by ``type_url``
    - ``xds_rejects``: responses Envoy rejected (once per response), by ``type``
    """

    # Read-only properties so that implementations may use narrower types (covariance).
    @property
    def xds_connections(self) -> GaugeLike: ...
    @property
    def xds_requests(self) -> LabelledCounter: ...
    @property
    def xds_responses(self) -> LabelledCounter: ...
    @property
    def xds_nacks(self) -> LabelledCounter: ...
    @property
    def xds_rejects(self) -> LabelledCounter: ...


@attrs.define(eq=False)
class Count:
    value: float = 0

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount


@attrs.define(eq=False)
class CountByType:
    counts: dict[str, Count] = attrs.field(factory=dict)

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Count:
        # One label, whatever its name (type_url, type).
        value = labelvalues[0] if labelvalues else next(iter(labelkwargs.values()), "")
        return self.counts.setdefault(str(value), Count())

    def __getitem__(self, type_url: str) -> float:
        found = self.counts.get(type_url)
        return found.value if found is not None else 0


@attrs.define(eq=False)
class XdsCounters:
    """In-memory :class:`XdsMetrics` (the server's default): ``counters.xds_nacks[type_url]``."""

    xds_connections: Count = attrs.field(factory=Count)
    xds_requests: CountByType = attrs.field(factory=CountByType)
    xds_responses: CountByType = attrs.field(factory=CountByType)
    xds_nacks: CountByType = attrs.field(factory=CountByType)
    xds_rejects: CountByType = attrs.field(factory=CountByType)
