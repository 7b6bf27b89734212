"""The xDS gRPC server: ADS and the per-type services, SotW and delta, on grpc.aio.

All Envoys share one :class:`~cpx.xds.resource.Snapshot`. Each stream is two coroutines (no thread
per stream): a reader that applies requests to the stream's state and a writer that sends what the
state calls for whenever it is woken by a request or by :meth:`XdsServer.set_snapshot`. Responses
are wire bytes joined from the pre-serialised resources (:mod:`cpx.xds.server.wire`); the gRPC method
handlers pass them through without re-encoding.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf.message import DecodeError

from cpx.xds.resource import CLUSTER, ENDPOINT, LISTENER, ROUTE, SCOPED_ROUTE, SECRET, Snapshot
from cpx.xds.server import wire
from cpx.xds.server.counters import XdsCounters, XdsMetrics
from cpx.xds.server.guard import (
    DELTA_NAME_TAGS,
    SOTW_NAME_TAGS,
    LogLimiter,
    TooManyNames,
    XdsLimits,
    bounded_parser,
    peer_host,
    suppressed_note,
)
from cpx.xds.server.rejects import OnReject, Rejections, RejectReport
from cpx.xds.server.sequencing import ROUTING
from cpx.xds.server.streams import DeltaStream, LimitExceeded, ProtocolError, SotwStream, Stream, StreamHub
from cpx.xds.server.tls import ServerTLS

__all__ = ["RejectReport", "ServerTLS", "XdsCounters", "XdsLimits", "XdsMetrics", "XdsServer"]

log = logging.getLogger("cpx.xds")

ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"
# The per-type services Contour registers: (service, method noun, type URL).
PER_TYPE_SERVICES = (
    ("envoy.service.cluster.v3.ClusterDiscoveryService", "Clusters", CLUSTER),
    ("envoy.service.endpoint.v3.EndpointDiscoveryService", "Endpoints", ENDPOINT),
    ("envoy.service.secret.v3.SecretDiscoveryService", "Secrets", SECRET),
    ("envoy.service.listener.v3.ListenerDiscoveryService", "Listeners", LISTENER),
    ("envoy.service.route.v3.RouteDiscoveryService", "Routes", ROUTE),
    ("envoy.service.route.v3.ScopedRoutesDiscoveryService", "ScopedRoutes", SCOPED_ROUTE),
)


def _server_options(limits: XdsLimits) -> tuple[tuple[str, int], ...]:
    return (
        # Contour's grpc.MaxConcurrentStreams(1 << 20): one connection may carry every xDS stream
        # (per peer address, XdsLimits.max_streams_per_peer applies).
        ("grpc.max_concurrent_streams", 1 << 20),
        # Refused by gRPC before any of it is parsed (RESOURCE_EXHAUSTED).
        ("grpc.max_receive_message_length", limits.max_message_bytes),
        # Contour's keepalive (60 s, 20 s timeout): notice dead Envoys behind silent NATs.
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # Enforcement: a client may ping every 10 s even on an idle connection (Envoy's
        # connection_keepalive, when set, is at least that); pinging faster twice ends the
        # connection with GOAWAY "too_many_pings" instead of costing the server a reply each.
        ("grpc.http2.min_ping_interval_without_data_ms", limits.min_ping_interval_ms),
        ("grpc.http2.max_ping_strikes", 2),
        # Two servers on one port would split the Envoys between them; fail the bind instead.
        ("grpc.so_reuseport", 0),
    )


Handler = Callable[[AsyncIterator[Any], Any], AsyncIterator[bytes]]


def _passthrough(data: bytes) -> bytes:
    return data


def _target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address and not address.startswith("[") else f"{address}:{port}"


async def _read(stream: Stream, requests: AsyncIterator[Any]) -> None:
    try:
        async for request in requests:
            if isinstance(request, TooManyNames):
                limit = stream.hub.limits.max_resource_names
                raise LimitExceeded(f"about {request.bound} resource names in one request (limit {limit})")
            stream.on_request(request)
            stream.hub.poke(stream)
    finally:
        stream.wake.set()  # the writer notices the end (or the failure) of the request stream


def _retrieve(task: asyncio.Task[None]) -> None:
    # The writer reports the reader's failure; this only keeps asyncio from logging it twice.
    if not task.cancelled():
        task.exception()


class XdsServer:
    """Serves one shared snapshot to every Envoy over ADS and per-type xDS, SotW and delta.

    Until the first :meth:`set_snapshot`, streams are accepted but not answered (Contour's
    initial-sync gate: Envoy must not start from a partial configuration).

    ``on_reject`` is called (on the event loop) once for every response an Envoy rejects, SotW or
    delta, ADS or per-type, with a :class:`RejectReport`. ``limits`` bounds what one client may
    ask (:class:`XdsLimits`).
    """

    def __init__(
        self,
        *,
        address: str,
        port: int,
        tls: ServerTLS | None = None,
        metrics: XdsMetrics | None = None,
        on_reject: OnReject | None = None,
        limits: XdsLimits | None = None,
    ) -> None:
        self._address = address
        self._port = port
        self._tls = tls
        self._limits = limits if limits is not None else XdsLimits()
        metrics = metrics if metrics is not None else XdsCounters()
        self._log_limiter = LogLimiter(self._limits.log_burst, self._limits.log_period)
        rejections = Rejections(metrics, on_reject, self._log_limiter)
        self._hub = StreamHub(metrics, rejections, self._limits)
        self._server: grpc.aio.Server | None = None

    @property
    def snapshot(self) -> Snapshot | None:
        return self._hub.snapshot

    @property
    def metrics(self) -> XdsMetrics:
        return self._hub.metrics

    async def start(self) -> int:
        """Bind and start serving; returns the bound port (an ephemeral one when ``port`` is 0)."""
        server = grpc.aio.server(options=_server_options(self._limits))
        for service, handlers in self._services().items():
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
            server.add_registered_method_handlers(service, handlers)
        target = _target(self._address, self._port)
        if self._tls is not None:
            port = server.add_secure_port(target, self._tls.credentials())
        else:
            port = server.add_insecure_port(target)
        await server.start()
        self._server = server
        return int(port)

    def set_snapshot(self, snapshot: Snapshot) -> None:
        """Serve ``snapshot`` from now on and wake every stream (call on the event loop thread)."""
        self._hub.set_snapshot(snapshot)

    async def stop(self, grace: float = 1.0) -> None:
        """End every stream (Envoy reconnects elsewhere or later) and stop within ``grace``."""
        self._hub.stopping = True
        self._hub.wake_all()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    # --- gRPC wiring ---------------------------------------------------------------------

    def _services(self) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
        services = {
            ADS_SERVICE: {
                "StreamAggregatedResources": self._stream_handler(SotwStream, None),
                "DeltaAggregatedResources": self._stream_handler(DeltaStream, None),
            }
        }
        for service, noun, type_url in PER_TYPE_SERVICES:
            services[service] = {
                f"Stream{noun}": self._stream_handler(SotwStream, type_url),
                f"Delta{noun}": self._stream_handler(DeltaStream, type_url),
                f"Fetch{noun}": self._fetch_handler(type_url),
            }
        return services

    def _stream_handler(
        self, kind: type[SotwStream | DeltaStream], fixed_type: str | None
    ) -> grpc.RpcMethodHandler:
        limit = self._limits.max_resource_names
        if kind is SotwStream:
            parse = bounded_parser(discovery_pb2.DiscoveryRequest.FromString, SOTW_NAME_TAGS, limit)
        else:
            parse = bounded_parser(discovery_pb2.DeltaDiscoveryRequest.FromString, DELTA_NAME_TAGS, limit)

        async def handle(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[bytes]:
            peer = str(context.peer())
            host = peer_host(peer)
            if not self._hub.peers.acquire(host):
                limit = self._limits.max_streams_per_peer
                self._log_closing(host, peer, f"more than {limit} concurrent streams from {host}")
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, f"more than {limit} streams from {host}"
                )
            try:
                stream = kind(self._hub, fixed_type, peer=peer)
                async for out in self._serve(stream, requests, context):
                    yield out
            finally:
                self._hub.peers.release(host)

        return grpc.stream_stream_rpc_method_handler(
            handle, request_deserializer=parse, response_serializer=_passthrough
        )

    def _fetch_handler(self, type_url: str) -> grpc.RpcMethodHandler:
        limit = self._limits.max_resource_names

        async def fetch(request: Any, context: Any) -> bytes:
            snapshot = self._hub.snapshot
            if snapshot is None or (snapshot.clusters_only and type_url in ROUTING):
                await context.abort(grpc.StatusCode.UNAVAILABLE, "no configuration yet")
            assert snapshot is not None
            if isinstance(request, TooManyNames) or len(request.resource_names) > limit:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many resource names")
            self._hub.metrics.xds_requests.labels(type_url=type_url).inc()
            snap = snapshot.get(type_url)
            names = frozenset(request.resource_names) - {"*"}
            resources = self._hub.cache.parts(snap, names or None)
            self._hub.count_response(type_url)
            return wire.sotw_response_of(snap.version, type_url, resources, "")

        return grpc.unary_unary_rpc_method_handler(
            fetch,
            request_deserializer=bounded_parser(
                discovery_pb2.DiscoveryRequest.FromString, SOTW_NAME_TAGS, limit
            ),
            response_serializer=_passthrough,
        )

    # --- one stream ----------------------------------------------------------------------

    async def _serve(
        self, stream: Stream, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[bytes]:
        hub = self._hub
        hub.add(stream)
        reader = asyncio.create_task(_read(stream, requests))
        reader.add_done_callback(_retrieve)
        failure: tuple[grpc.StatusCode, str] | None = None
        try:
            while True:
                await stream.wake.wait()
                stream.wake.clear()
                if reader.done() or hub.stopping:
                    break
                snapshot = hub.snapshot
                if snapshot is None:
                    continue  # initial-sync gate: requests are recorded, answered later
                for out in stream.responses(snapshot):
                    yield out
            failure = self._reader_failure(stream, reader)
        except Exception:
            # A bug must cost this stream only, never the server or the other Envoys.
            log.exception("xDS stream from %s failed", stream.who)
            failure = (grpc.StatusCode.INTERNAL, "internal error")
        finally:
            reader.cancel()
            hub.remove(stream)
        if failure is not None:
            await context.abort(*failure)

    def _log_closing(self, host: str, who: str, reason: str) -> None:
        # Rate-limited per address: a client reconnecting in a loop must not flood the log.
        suppressed = self._log_limiter.allow((host, "closed"))
        if suppressed is not None:
            log.warning("closing xDS stream from %s: %s%s", who, reason, suppressed_note(suppressed))

    def _reader_failure(
        self, stream: Stream, reader: asyncio.Task[None]
    ) -> tuple[grpc.StatusCode, str] | None:
        if not reader.done() or reader.cancelled():
            return None
        error = reader.exception()
        if error is None:
            return None  # the client closed its side
        if isinstance(error, ProtocolError | DecodeError):
            # Messages name the peer's values only through printable(): safe to log and return.
            self._log_closing(peer_host(stream.peer), stream.who, str(error))
            code = (
                grpc.StatusCode.RESOURCE_EXHAUSTED
                if isinstance(error, LimitExceeded)
                else grpc.StatusCode.INVALID_ARGUMENT
            )
            return (code, str(error))
        if isinstance(error, grpc.RpcError | asyncio.CancelledError):
            return None  # the transport went away; nothing to tell the client
        log.error("xDS stream from %s failed", stream.who, exc_info=error)
        return (grpc.StatusCode.INTERNAL, "internal error")
