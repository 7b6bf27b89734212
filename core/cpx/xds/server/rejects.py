"""NACKs: what Envoy rejected, told once to whoever maps it back to objects, logged safely, counted.

A stream remembers the last few responses it sent by nonce (:class:`SentResponse`). A request with
``error_detail`` answering one of them is reported once as a :class:`RejectReport` to the server's
``on_reject`` callback and counted in ``xds_rejects``; every request with ``error_detail`` is
counted in ``xds_nacks`` and logged, escaped, truncated and rate-limited per peer and type.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

import attrs

from cpx.xds.resource import SHORT_NAMES
from cpx.xds.server.counters import XdsMetrics
from cpx.xds.server.guard import LogLimiter, printable, suppressed_note, type_label

log = logging.getLogger("cpx.xds")

# Envoy's messages name the resource and the rule; 1 KiB keeps that and drops the rest.
MAX_MESSAGE = 1024
MAX_NODE_ID = 256


@attrs.frozen
class RejectReport:
    """Envoy rejected a response: which node, which type, the resources that response carried
    (sorted), and Envoy's ``error_detail.message`` (control characters escaped, at most 1 KiB)."""

    node_id: str
    type_url: str
    resource_names: tuple[str, ...]
    message: str


OnReject = Callable[[RejectReport], None]


@attrs.frozen(eq=False)
class SentResponse:
    """A response a stream sent, kept by nonce until Envoy answers it.

    ``names`` is whatever collection the stream already had (a keys view, a tuple); it is sorted
    only when Envoy rejects the response, so a push costs nothing extra.
    """

    type_url: str
    version: str
    names: Collection[str]

    def resource_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.names))


def short(type_url: str) -> str:
    return SHORT_NAMES.get(type_url, printable(type_url, 200))


@attrs.define(eq=False)
class Rejections:
    metrics: XdsMetrics
    on_reject: OnReject | None = None
    limiter: LogLimiter = attrs.field(factory=LogLimiter)

    def nack(self, *, who: str, peer: str, node_id: str, request: Any, sent: SentResponse | None) -> None:
        """A request with ``error_detail``; ``sent`` is the response it answers, when known."""
        type_url = str(request.type_url) if sent is None else sent.type_url
        label = type_label(type_url)
        message = printable(str(request.error_detail.message), MAX_MESSAGE)
        self.metrics.xds_nacks.labels(type_url=label).inc()
        suppressed = self.limiter.allow((peer, label))
        if suppressed is not None:
            # Istio's rule: log, count, and wait for a real change (never resend what was rejected).
            log.warning(
                "Envoy %s rejected %s%s (nonce %s): %s%s",
                who,
                short(type_url),
                f" version {sent.version}" if sent is not None else "",
                printable(str(request.response_nonce), 64),
                message,
                suppressed_note(suppressed),
            )
        if sent is None:
            return  # an unknown or already answered nonce: nothing to attribute
        self.metrics.xds_rejects.labels(type=label).inc()
        if self.on_reject is None:
            return
        report = RejectReport(printable(node_id, MAX_NODE_ID), type_url, sent.resource_names(), message)
        try:
            self.on_reject(report)
        except Exception:
            # The callback's bug must not end the stream of the Envoy that reported it.
            log.exception("on_reject failed for a %s NACK from %s", short(type_url), who)
