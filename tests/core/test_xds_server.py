"""The xDS server against raw gRPC clients: SotW and delta, ADS and per-type, mTLS, many streams."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import attrs
import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, config_source_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2, scoped_route_pb2
from envoy.service.cluster.v3 import cds_pb2_grpc
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from envoy.service.endpoint.v3 import eds_pb2_grpc
from envoy.service.listener.v3 import lds_pb2_grpc
from envoy.service.route.v3 import rds_pb2_grpc, srds_pb2_grpc
from google.protobuf import any_pb2, duration_pb2

from cpx.xds.resource import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    PUSH_ORDER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from cpx.xds.server import wire
from cpx.xds.server.ads import RejectReport, ServerTLS, XdsCounters, XdsLimits, XdsServer
from cpx.xds.server.changes import ChangeCache, Changes

ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
QUIET = 0.3  # how long "nothing arrives" is watched


# --- resources -----------------------------------------------------------------------------


def cluster(name: str, timeout: int = 1) -> Resource:
    msg = cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.EDS,
        connect_timeout=duration_pb2.Duration(seconds=timeout),
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(
            service_name=f"eds/{name}",
            eds_config=config_source_pb2.ConfigSource(ads=config_source_pb2.AggregatedConfigSource()),
        ),
    )
    return Resource.from_message(name, CLUSTER, msg)


def cla(name: str, ip: str = "10.0.0.1") -> Resource:
    sock = address_pb2.SocketAddress(address=ip, port_value=80)
    endpoint = endpoint_components_pb2.Endpoint(address=address_pb2.Address(socket_address=sock))
    msg = endpoint_pb2.ClusterLoadAssignment(
        cluster_name=name,
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[endpoint_components_pb2.LbEndpoint(endpoint=endpoint)]
            )
        ],
    )
    return Resource.from_message(name, ENDPOINT, msg)


def listener(name: str, port: int = 8080) -> Resource:
    sock = address_pb2.SocketAddress(address="0.0.0.0", port_value=port)
    return Resource.from_message(
        name, LISTENER, listener_pb2.Listener(name=name, address=address_pb2.Address(socket_address=sock))
    )


def route(name: str, domain: str = "example.com") -> Resource:
    vhost = route_components_pb2.VirtualHost(name="vh", domains=[domain])
    return Resource.from_message(name, ROUTE, route_pb2.RouteConfiguration(name=name, virtual_hosts=[vhost]))


def scope(name: str, route_name: str, key: str) -> Resource:
    message = scoped_route_pb2.ScopedRouteConfiguration(
        name=name,
        route_configuration_name=route_name,
        key=scoped_route_pb2.ScopedRouteConfiguration.Key(
            fragments=[scoped_route_pb2.ScopedRouteConfiguration.Key.Fragment(string_key=key)]
        ),
    )
    return Resource.from_message(name, SCOPED_ROUTE, message)


# The type snapshots the last snapshot() call made: the next ones derive from them, as cpx serve's
# do, so the server works from what they say changed (tests/core/test_xds_incremental.py checks
# that this is what a build from scratch gives).
_LAST: dict[str, TypeSnapshot] = {}


def snapshot(*resources: Resource) -> Snapshot:
    by_type: dict[str, dict[str, Resource]] = {t: {} for t in PUSH_ORDER}
    for res in resources:
        by_type[res.type_url][res.name] = res
    for t, named in by_type.items():
        _LAST[t] = TypeSnapshot.of(t, named, previous=_LAST.get(t))
    return Snapshot({t: _LAST[t] for t in by_type})


def base(**changes: Resource) -> Snapshot:
    """Clusters c1, c2 (EDS eds/c1, eds/c2), listener l1, route r1; ``changes`` replace by key."""
    parts = {
        "c1": cluster("c1"),
        "c2": cluster("c2"),
        "e1": cla("eds/c1"),
        "e2": cla("eds/c2"),
        "l1": listener("l1"),
        "r1": route("r1"),
    }
    parts.update(changes)
    return snapshot(*parts.values())


def names_of(response: Any) -> list[str]:
    """Names of the resources in a SotW response (parsed with the real message classes)."""
    out = []
    for packed in response.resources:
        cls = {
            CLUSTER: cluster_pb2.Cluster,
            ENDPOINT: endpoint_pb2.ClusterLoadAssignment,
            LISTENER: listener_pb2.Listener,
            ROUTE: route_pb2.RouteConfiguration,
            SCOPED_ROUTE: scoped_route_pb2.ScopedRouteConfiguration,
        }[packed.type_url]
        msg = cls.FromString(packed.value)
        out.append(msg.cluster_name if packed.type_url == ENDPOINT else msg.name)
    return sorted(out)


# --- clients -------------------------------------------------------------------------------


@attrs.define(eq=False)
class Client:
    """One xDS stream: requests are written, responses (or the final error) queued as they come."""

    call: Any
    queue: asyncio.Queue[Any] = attrs.field(factory=asyncio.Queue)
    pump: asyncio.Task[None] | None = None
    node: str = "envoy-1"

    def __attrs_post_init__(self) -> None:
        self.pump = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        try:
            async for response in self.call:
                await self.queue.put(response)
        except grpc.aio.AioRpcError as err:
            await self.queue.put(err)
        await self.queue.put(None)  # end of stream

    async def send(
        self,
        type_url: str,
        names: Iterable[str] = (),
        version: str = "",
        nonce: str = "",
        error: str | None = None,
    ) -> None:
        req = discovery_pb2.DiscoveryRequest(
            type_url=type_url, resource_names=list(names), version_info=version, response_nonce=nonce
        )
        req.node.id = self.node
        if error is not None:
            req.error_detail.code = 13
            req.error_detail.message = error
        await self.call.write(req)

    async def delta(
        self,
        type_url: str,
        subscribe: Iterable[str] = (),
        *,
        unsubscribe: Iterable[str] = (),
        nonce: str = "",
        initial: dict[str, str] | None = None,
        error: str | None = None,
    ) -> None:
        req = discovery_pb2.DeltaDiscoveryRequest(
            type_url=type_url,
            resource_names_subscribe=list(subscribe),
            resource_names_unsubscribe=list(unsubscribe),
            response_nonce=nonce,
            initial_resource_versions=initial or {},
        )
        req.node.id = self.node
        if error is not None:
            req.error_detail.message = error
        await self.call.write(req)

    async def ack(self, response: Any, names: Iterable[str] = ()) -> None:
        await self.send(response.type_url, names, response.version_info, response.nonce)

    async def recv(self, timeout: float = 3.0) -> Any:
        item = await asyncio.wait_for(self.queue.get(), timeout)
        if isinstance(item, Exception):
            raise item
        assert item is not None, "stream ended"
        return item

    async def quiet(self, wait: float = QUIET) -> None:
        await asyncio.sleep(wait)
        assert self.queue.empty(), f"unexpected response: {self.queue.get_nowait()}"

    async def close(self) -> None:
        # Wait for the cancelled call to settle, so no gRPC completion outlives the test's loop.
        self.call.cancel()
        if self.pump is not None:
            await asyncio.gather(self.pump, return_exceptions=True)


@attrs.define(eq=False)
class Harness:
    server: XdsServer
    port: int
    counters: XdsCounters
    reports: list[RejectReport] = attrs.field(factory=list)
    channels: list[grpc.aio.Channel] = attrs.field(factory=list)
    clients: list[Client] = attrs.field(factory=list)

    def channel(self) -> grpc.aio.Channel:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")
        self.channels.append(channel)
        return channel

    def _client(self, call: Any, node: str) -> Client:
        client = Client(call, node=node)
        self.clients.append(client)
        return client

    def ads(self, channel: grpc.aio.Channel | None = None, node: str = "envoy-1") -> Client:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel or self.channel())
        return self._client(stub.StreamAggregatedResources(), node)

    def delta_ads(self, node: str = "envoy-1") -> Client:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self.channel())
        return self._client(stub.DeltaAggregatedResources(), node)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
        for channel in self.channels:
            await channel.close()


@contextlib.asynccontextmanager
async def harness(limits: XdsLimits | None = None) -> AsyncIterator[Harness]:
    counters, reports = XdsCounters(), list[RejectReport]()
    server = XdsServer(address="127.0.0.1", port=0, metrics=counters, on_reject=reports.append, limits=limits)
    started = Harness(server, await server.start(), counters, reports)
    try:
        yield started
    finally:
        await started.close()
        await server.stop(grace=0.2)


@pytest.fixture
async def xds() -> AsyncIterator[Harness]:
    async with harness() as started:
        yield started


# --- wire encoding -------------------------------------------------------------------------


def test_hand_encoded_responses_parse_with_the_real_classes() -> None:
    big = Resource("big", CLUSTER, b"\x0a\x03big", "v")  # a Cluster named "big", by hand
    huge = Resource.from_message(
        "huge", CLUSTER, cluster_pb2.Cluster(name="huge", alt_stat_name="x" * 20_000)
    )
    snap = TypeSnapshot.of(CLUSTER, {"big": big, "huge": huge})
    resources = wire.ResponseCache().resources(snap, None)
    raw = wire.sotw_response(snap.version, CLUSTER, resources, "7")
    expected = discovery_pb2.DiscoveryResponse(version_info=snap.version, type_url=CLUSTER, nonce="7")
    for res in (big, huge):
        expected.resources.append(any_pb2.Any(type_url=CLUSTER, value=res.body))
    assert discovery_pb2.DiscoveryResponse.FromString(raw) == expected

    raw = wire.delta_response("sv", CLUSTER, [huge, big], ["gone", "x" * 200], "9")
    delta = discovery_pb2.DeltaDiscoveryResponse.FromString(raw)
    assert (delta.system_version_info, delta.type_url, delta.nonce) == ("sv", CLUSTER, "9")
    assert list(delta.removed_resources) == ["gone", "x" * 200]
    assert [(r.name, r.version) for r in delta.resources] == [("huge", huge.version), ("big", "v")]
    assert cluster_pb2.Cluster.FromString(delta.resources[0].resource.value).alt_stat_name == "x" * 20_000


# --- SotW ----------------------------------------------------------------------------------


async def test_initial_sync_gate_then_answer(xds: Harness) -> None:
    client = xds.ads()
    await client.send(LISTENER)
    await client.quiet()
    xds.server.set_snapshot(base())
    response = await client.recv()
    assert response.type_url == LISTENER and names_of(response) == ["l1"]
    assert response.version_info == base().get(LISTENER).version and response.nonce


async def test_ack_then_no_resend_and_push_on_change(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    await client.send(LISTENER)
    first = await client.recv()
    await client.ack(first)
    xds.server.set_snapshot(base(r1=route("r1", "other.example.com")))  # LDS unchanged
    await client.quiet()
    xds.server.set_snapshot(base(l2=listener("l2", 8443)))
    pushed = await client.recv()
    assert names_of(pushed) == ["l1", "l2"] and pushed.nonce != first.nonce
    await client.ack(pushed)
    await client.quiet()
    assert xds.counters.xds_responses[LISTENER] == 2


async def cluster_push(xds: Harness, node: str) -> tuple[Client, Any, Any]:
    """An ADS client that ACKed CDS with c1, c2 and then got c3 pushed: (client, first, pushed)."""
    xds.server.set_snapshot(base())
    client = xds.ads(node=node)
    await client.send(CLUSTER)
    first = await client.recv()
    await client.ack(first)
    xds.server.set_snapshot(base(c3=cluster("c3")))
    return client, first, await client.recv()


async def test_nack_is_counted_and_not_resent(xds: Harness, caplog: pytest.LogCaptureFixture) -> None:
    client, first, bad = await cluster_push(xds, "node-a")
    await client.send(CLUSTER, version=first.version_info, nonce=bad.nonce, error="cluster c3: bad")
    await client.quiet()
    assert xds.counters.xds_nacks[CLUSTER] == 1
    assert any("node-a" in r.message and "cluster c3: bad" in r.message for r in caplog.records)
    xds.server.set_snapshot(base(c3=cluster("c3", timeout=2)))  # a real change is pushed again
    fixed = await client.recv()
    assert fixed.version_info != bad.version_info


async def test_stale_nonce_is_ignored(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    await client.send(ENDPOINT, ["eds/c1"])
    first = await client.recv()
    xds.server.set_snapshot(base(e1=cla("eds/c1", "10.0.0.9")))
    second = await client.recv()  # sent before the client answered the first
    # Answers to the superseded response: a new name and a NACK, both ignored.
    await client.send(ENDPOINT, ["eds/c1", "eds/c2"], first.version_info, first.nonce)
    await client.send(ENDPOINT, ["eds/c1"], first.version_info, first.nonce, error="old")
    await client.quiet()
    assert xds.counters.xds_nacks[ENDPOINT] == 0
    await client.send(ENDPOINT, ["eds/c1", "eds/c2"], second.version_info, second.nonce)
    assert names_of(await client.recv()) == ["eds/c2"]  # the client has eds/c1 at this version


async def test_named_subscription_answers_new_names(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    await client.send(ENDPOINT, ["eds/c1"])
    first = await client.recv()
    assert names_of(first) == ["eds/c1"]
    await client.ack(first, ["eds/c1"])
    await client.quiet()
    await client.ack(first, ["eds/c1", "eds/c2"])  # same version, one more name: that one
    second = await client.recv()
    assert names_of(second) == ["eds/c2"] and second.version_info == first.version_info
    await client.ack(second, ["eds/c2"])  # dropping a name needs no answer
    await client.quiet()
    await client.ack(second, ["eds/c1", "eds/c2"])  # asking again does
    assert names_of(await client.recv()) == ["eds/c1"]
    xds.server.set_snapshot(base(l2=listener("l2")))  # nothing this stream watches changed
    await client.quiet()


async def test_cluster_change_forces_an_eds_answer(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    await client.send(CLUSTER)
    cds = await client.recv()
    await client.ack(cds)
    await client.send(ENDPOINT, ["eds/c1", "eds/c2"])
    eds = await client.recv()
    await client.ack(eds, ["eds/c1", "eds/c2"])
    await client.quiet()
    xds.server.set_snapshot(base(c1=cluster("c1", timeout=5)))  # endpoints unchanged
    cds2 = await client.recv()
    assert cds2.type_url == CLUSTER
    await client.ack(cds2)
    # Envoy re-requests EDS for the warming cluster with an unchanged subscription.
    await client.ack(eds, ["eds/c1", "eds/c2"])
    eds2 = await client.recv()
    assert eds2.type_url == ENDPOINT and eds2.version_info == eds.version_info
    assert names_of(eds2) == ["eds/c1"]  # the changed cluster's, not every one
    await client.ack(eds2, ["eds/c1", "eds/c2"])
    await client.quiet()


async def test_ads_pushes_in_make_before_break_order(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    subscriptions = {CLUSTER: [], ENDPOINT: ["eds/c1"], LISTENER: [], ROUTE: ["r1"]}
    for type_url, names in subscriptions.items():
        await client.send(type_url, names)
        await client.ack(await client.recv(), names)
    await client.quiet()
    xds.server.set_snapshot(
        base(c1=cluster("c1", 3), e1=cla("eds/c1", "10.1.1.1"), l1=listener("l1", 81), r1=route("r1", "x"))
    )
    cds, eds = await client.recv(), await client.recv()
    assert [cds.type_url, eds.type_url] == [CLUSTER, ENDPOINT]
    await client.quiet()  # no routing before the Envoy ACKed the clusters it uses
    await client.ack(cds)
    order = [(await client.recv()).type_url for _ in range(2)]
    assert order == [LISTENER, ROUTE]


async def test_reconnect_with_current_version_is_not_resent(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    first = xds.ads()
    await first.send(LISTENER)
    lds = await first.recv()
    await first.send(ENDPOINT, ["eds/c1"])
    eds = await first.recv()
    await first.close()
    again = xds.ads()
    await again.send(LISTENER, version=lds.version_info)
    await again.send(CLUSTER, version="some-older-version")
    assert (await again.recv()).type_url == CLUSTER
    await again.send(ENDPOINT, ["eds/c1"], version=eds.version_info)  # named: always answered
    assert (await again.recv()).type_url == ENDPOINT
    await again.quiet()


async def test_per_type_streams_and_fetch(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    channel = xds.channel()
    cds = xds._client(cds_pb2_grpc.ClusterDiscoveryServiceStub(channel).StreamClusters(), "node-p")
    eds = xds._client(eds_pb2_grpc.EndpointDiscoveryServiceStub(channel).StreamEndpoints(), "node-p")
    await cds.send(CLUSTER)
    clusters = await cds.recv()
    await cds.ack(clusters)
    await eds.send(ENDPOINT, ["eds/c1"])
    endpoints = await eds.recv()
    await eds.ack(endpoints, ["eds/c1"])
    await eds.quiet(0.1)
    xds.server.set_snapshot(base(c1=cluster("c1", 9)))
    await cds.ack(await cds.recv())
    await eds.ack(endpoints, ["eds/c1"])  # the warming request of the same node is answered
    assert (await eds.recv()).version_info == endpoints.version_info

    fetched = await lds_pb2_grpc.ListenerDiscoveryServiceStub(channel).FetchListeners(
        discovery_pb2.DiscoveryRequest(type_url=LISTENER), timeout=3
    )
    assert names_of(fetched) == ["l1"]

    wrong = xds._client(lds_pb2_grpc.ListenerDiscoveryServiceStub(channel).StreamListeners(), "node-p")
    await wrong.send(CLUSTER)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await wrong.recv()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_bad_clients_do_not_affect_others(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    good = xds.ads()
    await good.send(LISTENER)
    await good.ack(await good.recv())

    raw = xds.channel().stream_stream(ADS, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    garbage = xds._client(raw(), "x")
    await garbage.call.write(b"\xff\xff\xff\xff")
    with pytest.raises(grpc.aio.AioRpcError):
        await garbage.recv()
    untyped = xds.ads()
    await untyped.send("")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await untyped.recv()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    cancelled = xds.ads()
    await cancelled.send(CLUSTER)
    await cancelled.recv()
    await cancelled.close()

    xds.server.set_snapshot(base(l2=listener("l2")))
    assert names_of(await good.recv()) == ["l1", "l2"]
    await asyncio.sleep(0.1)
    assert xds.counters.xds_connections.value == 1


async def test_many_concurrent_streams_get_a_push(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    channels = [xds.channel() for _ in range(4)]
    clients = [xds.ads(channels[i % 4], node=f"envoy-{i}") for i in range(200)]
    for client in clients:
        await client.send(LISTENER)
    firsts = await asyncio.gather(*(c.recv(10) for c in clients))
    await asyncio.gather(*(c.ack(r) for c, r in zip(clients, firsts, strict=True)))
    started = time.monotonic()
    xds.server.set_snapshot(base(l2=listener("l2")))
    pushed = await asyncio.gather(*(c.recv(10) for c in clients))
    elapsed = time.monotonic() - started
    assert all(names_of(p) == ["l1", "l2"] for p in pushed)
    assert elapsed < 5, elapsed  # typically ~0.1 s; generous for a loaded CI machine
    assert xds.counters.xds_connections.value == 200


async def test_stop_with_open_streams_is_quick() -> None:
    server = XdsServer(address="127.0.0.1", port=0)
    port = await server.start()
    server.set_snapshot(base())
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
        clients = [Client(stub.StreamAggregatedResources()) for _ in range(5)]
        for client in clients:
            await client.send(LISTENER)
            await client.recv()
        started = time.monotonic()
        await server.stop(grace=1.0)
        assert time.monotonic() - started < 2
        for client in clients:
            await client.close()


# --- delta ---------------------------------------------------------------------------------


async def test_delta_subscribe_unsubscribe_and_removed(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.delta_ads()
    await client.delta(CLUSTER)  # legacy wildcard
    cds = await client.recv()
    assert sorted(r.name for r in cds.resources) == ["c1", "c2"] and cds.nonce
    await client.delta(CLUSTER, nonce=cds.nonce)
    await client.delta(ENDPOINT, ["eds/c1", "eds/missing"])
    eds = await client.recv()
    assert [r.name for r in eds.resources] == ["eds/c1"]
    assert list(eds.removed_resources) == ["eds/missing"]
    await client.delta(ENDPOINT, nonce=eds.nonce)
    await client.quiet()

    xds.server.set_snapshot(snapshot(cluster("c1"), cla("eds/c1", "10.9.9.9"), listener("l1")))
    cds2, eds2 = await client.recv(), await client.recv()
    assert (cds2.type_url, list(cds2.resources), list(cds2.removed_resources)) == (CLUSTER, [], ["c2"])
    assert [r.name for r in eds2.resources] == ["eds/c1"] and not eds2.removed_resources
    await client.delta(ENDPOINT, unsubscribe=["eds/c1"], nonce=eds2.nonce)
    await client.quiet()
    await client.delta(ENDPOINT, ["eds/c1"])
    again = await client.recv()
    assert [r.name for r in again.resources] == ["eds/c1"]
    assert again.resources[0].version == cla("eds/c1", "10.9.9.9").version


async def test_delta_initial_resource_versions(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.delta_ads()
    have = {"c1": cluster("c1").version, "c2": "stale", "gone": "x"}
    await client.delta(CLUSTER, initial=have)
    response = await client.recv()
    assert [r.name for r in response.resources] == ["c2"]
    assert list(response.removed_resources) == ["gone"]
    await client.delta(CLUSTER, nonce=response.nonce)  # listeners wait for the clusters' ACK
    await client.delta(LISTENER, ["*"], initial={"l1": listener("l1").version})
    first = await client.recv()  # the first wildcard answer is always sent, even if empty
    assert first.type_url == LISTENER and not first.resources and not first.removed_resources
    await client.quiet()


async def test_delta_nack_and_order_and_warming(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.delta_ads(node="node-d")
    for type_url, names in ((CLUSTER, []), (ENDPOINT, ["eds/c1", "eds/c2"]), (LISTENER, []), (ROUTE, ["r1"])):
        await client.delta(type_url, names)
        await client.delta(type_url, nonce=(await client.recv()).nonce)
    await client.quiet()
    # A cluster changes, its endpoints do not: EDS follows CDS anyway (cluster warming).
    xds.server.set_snapshot(base(c1=cluster("c1", 4), l1=listener("l1", 81), r1=route("r1", "y")))
    responses = [await client.recv() for _ in range(2)]
    await client.quiet()  # routing waits for the ACK of the clusters
    await client.delta(CLUSTER, nonce=responses[0].nonce)
    responses += [await client.recv() for _ in range(2)]
    assert [r.type_url for r in responses] == [CLUSTER, ENDPOINT, LISTENER, ROUTE]
    assert [r.name for r in responses[1].resources] == ["eds/c1"]
    listeners = responses[2]
    await client.delta(LISTENER, nonce=listeners.nonce, error="listener l1: bad")
    await client.quiet()
    assert xds.counters.xds_nacks[LISTENER] == 1


# --- mTLS ----------------------------------------------------------------------------------


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def _pem(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[bytes, bytes]:
    return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


async def test_mtls_requires_a_client_certificate(tmp_path: Path) -> None:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test CA", ca_key, None)
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server_pem = _pem(_cert("cpx", server_key, (ca, ca_key)), server_key)
    client_pem = _pem(_cert("envoy", client_key, (ca, ca_key)), client_key)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    for name, data in (("ca.pem", ca_pem), ("tls.crt", server_pem[0]), ("tls.key", server_pem[1])):
        (tmp_path / name).write_bytes(data)
    tls = ServerTLS(tmp_path / "ca.pem", tmp_path / "tls.crt", tmp_path / "tls.key")
    server = XdsServer(address="127.0.0.1", port=0, tls=tls)
    port = await server.start()
    server.set_snapshot(base())
    try:
        anonymous = grpc.ssl_channel_credentials(root_certificates=ca_pem)
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", anonymous) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await lds_pb2_grpc.ListenerDiscoveryServiceStub(channel).FetchListeners(
                    discovery_pb2.DiscoveryRequest(type_url=LISTENER), timeout=3
                )
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        creds = grpc.ssl_channel_credentials(
            ca_pem, private_key=client_pem[1], certificate_chain=client_pem[0]
        )
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds) as channel:
            client = Client(ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources())
            await client.send(LISTENER)
            assert names_of(await client.recv()) == ["l1"]
            await client.close()
    finally:
        await server.stop(grace=0.2)
    with pytest.raises(ValueError, match="key_file"):
        ServerTLS(ca_file="ca", cert_file="crt", key_file=None)


# --- hostile clients and NACK reports ------------------------------------------------------


async def _reports(xds: Harness, count: int) -> list[RejectReport]:
    for _ in range(100):
        if len(xds.reports) >= count:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(QUIET)  # and no more than that
    return xds.reports


async def test_a_nack_is_reported_once_escaped_and_truncated(
    xds: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    client, first, bad = await cluster_push(xds, "node-a\nforged")
    message = "cluster c3: bad\nERROR forged line\x1b[31m\u2028" + "x" * 30_000
    for _ in range(3):  # Envoy may repeat itself: the rejected response is reported once
        await client.send(CLUSTER, version=first.version_info, nonce=bad.nonce, error=message)
    [report] = await _reports(xds, 1)
    assert report.node_id == "node-a\\x0aforged"
    assert (report.type_url, report.resource_names) == (CLUSTER, ("c1", "c2", "c3"))
    assert report.message.startswith("cluster c3: bad\\x0aERROR forged line\\x1b[31m\\u2028xxx")
    assert report.message.endswith(f"... [{len(message)} chars]") and len(report.message) < 1100
    assert xds.counters.xds_nacks[CLUSTER] == 3 and xds.counters.xds_rejects[CLUSTER] == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "cpx.xds"]
    assert any("node-a\\x0aforged rejected clusters" in line for line in lines), lines
    assert not any(c in line for line in lines for c in "\n\x1b\u2028")


async def test_nacks_are_reported_for_named_delta_and_per_type_streams(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    ads = xds.ads(node="sotw")
    await ads.send(ENDPOINT, ["eds/c1", "eds/missing"])
    eds = await ads.recv()
    await ads.send(ENDPOINT, ["eds/c1", "eds/missing"], nonce=eds.nonce, error="bad eds")
    assert await _reports(xds, 1) == [RejectReport("sotw", ENDPOINT, ("eds/c1",), "bad eds")]

    delta = xds.delta_ads(node="delta")
    await delta.delta(CLUSTER)
    await delta.delta(CLUSTER, nonce=(await delta.recv()).nonce)
    xds.server.set_snapshot(base(c2=cluster("c2", 3)))
    changed = await delta.recv()
    await delta.delta(CLUSTER, nonce=changed.nonce, error="bad c2")
    assert (await _reports(xds, 2))[1] == RejectReport("delta", CLUSTER, ("c2",), "bad c2")

    stub = cds_pb2_grpc.ClusterDiscoveryServiceStub(xds.channel())
    per_type = xds._client(stub.StreamClusters(), "per-type")
    await per_type.send(CLUSTER)
    got = await per_type.recv()
    await per_type.send(CLUSTER, nonce=got.nonce, error="bad cds")
    await per_type.send(CLUSTER, nonce="999", error="a nonce never sent")  # stale: ignored
    assert (await _reports(xds, 3))[2:] == [RejectReport("per-type", CLUSTER, ("c1", "c2"), "bad cds")]
    assert xds.counters.xds_nacks[CLUSTER] == 2 and xds.counters.xds_rejects[CLUSTER] == 2


async def test_a_failing_on_reject_costs_no_stream() -> None:
    def broken(report: RejectReport) -> None:
        raise RuntimeError("bug")

    server = XdsServer(address="127.0.0.1", port=0, on_reject=broken)
    port = await server.start()
    server.set_snapshot(base())
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            client = Client(ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources())
            await client.send(LISTENER)
            got = await client.recv()
            await client.send(LISTENER, nonce=got.nonce, error="bad")
            server.set_snapshot(base(l2=listener("l2")))
            assert names_of(await client.recv()) == ["l1", "l2"]
            await client.close()
    finally:
        await server.stop(grace=0.2)


async def test_nack_log_lines_are_rate_limited_per_peer_and_type(
    xds: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    await client.send(CLUSTER)
    got = await client.recv()
    for i in range(50):
        await client.send(CLUSTER, nonce=got.nonce, error=f"bad {i}")
    await client.quiet()
    lines = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(lines) == 5 and xds.counters.xds_nacks[CLUSTER] == 50


async def test_unknown_type_urls_share_one_label_and_a_stream_holds_a_few(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    for i in range(32):
        await client.send(f"type.googleapis.com/garbage.{i}\n", ["*"])
    for _ in range(32):
        assert not (await client.recv()).resources
    assert set(xds.counters.xds_requests.counts) == {"unknown"}
    assert set(xds.counters.xds_responses.counts) == {"unknown"}
    assert xds.counters.xds_requests["unknown"] == 32
    await client.send("type.googleapis.com/garbage.33")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await client.recv()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "more than 32 type URLs on one stream" in str(err.value.details())


async def test_too_many_resource_names_end_the_stream(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    good = xds.ads()
    await good.send(LISTENER)
    await good.ack(await good.recv())
    sotw = xds.ads()
    await sotw.send(ENDPOINT, (str(i) for i in range(100_001)))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await sotw.recv()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "100001 resource names in one request (limit 100000)" in str(err.value.details())
    unparsed = xds.ads()  # so many that the request is refused before protobuf parses it
    await unparsed.send(ENDPOINT, ("n" for _ in range(400_000)))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await unparsed.recv()
    assert "about 400000 resource names in one request" in str(err.value.details())
    delta = xds.delta_ads()
    await delta.delta(ENDPOINT, (f"a{i}" for i in range(60_000)))
    assert len((await delta.recv(10)).removed_resources) == 60_000
    await delta.delta(ENDPOINT, (f"b{i}" for i in range(60_000)))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await delta.recv()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    xds.server.set_snapshot(base(l2=listener("l2")))
    assert names_of(await good.recv()) == ["l1", "l2"]


async def test_a_request_over_4_mib_is_refused(xds: Harness) -> None:
    xds.server.set_snapshot(base())
    client = xds.ads()
    await client.send(ENDPOINT, ["x" * (4 << 20)])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await client.recv()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    fine = xds.ads()
    await fine.send(LISTENER, ["*", "x" * (1 << 20)])  # large names are not refused as such
    assert names_of(await fine.recv()) == ["l1"]


async def test_streams_per_peer_address_are_limited() -> None:
    async with harness(XdsLimits(max_streams_per_peer=3)) as xds:
        xds.server.set_snapshot(base())
        clients = [xds.ads(node=f"envoy-{i}") for i in range(3)]
        for client in clients:
            await client.send(LISTENER)
            await client.recv()
        extra = xds.ads()
        await extra.send(LISTENER)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await extra.recv()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "more than 3 streams from 127.0.0.1" in str(err.value.details())
        await clients[0].close()
        # The server notices the closed stream asynchronously (slower on a loaded machine).
        for _ in range(50):
            await asyncio.sleep(0.1)
            again = xds.ads()
            await again.send(LISTENER)
            try:
                assert names_of(await again.recv()) == ["l1"]
                break
            except grpc.aio.AioRpcError:
                continue
        else:
            raise AssertionError("a slot never freed after a stream closed")


async def _idle_pinging_stream(port: int, ping_ms: int, watch: float) -> grpc.StatusCode | None:
    """An ADS stream that pings every ``ping_ms`` and is never answered; how it ended within ``watch``."""
    options = [
        ("grpc.keepalive_time_ms", ping_ms),
        ("grpc.keepalive_timeout_ms", 5000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        client = Client(ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources())
        await client.send(LISTENER)  # no snapshot: an idle stream, only pings on the wire
        try:
            await client.recv(timeout=watch)
        except grpc.aio.AioRpcError as err:
            return err.code()
        except TimeoutError:
            return None
        finally:
            await client.close()
        raise AssertionError("an answer without a snapshot")


async def test_keepalive_pings_are_allowed_up_to_the_limit_and_not_beyond() -> None:
    async with harness(XdsLimits(min_ping_interval_ms=2000)) as xds:
        assert await _idle_pinging_stream(xds.port, 2500, watch=6.0) is None  # still open
        assert await _idle_pinging_stream(xds.port, 100, watch=6.0) == grpc.StatusCode.UNAVAILABLE


# --- make-before-break (docs/design/0016) ----------------------------------------------------


def flipped(to: str) -> Snapshot:
    """Listener l1 and route r1 routing to cluster ``to`` (EDS eds/<to>), the other cluster gone."""
    return snapshot(cluster(to), cla(f"eds/{to}"), listener("l1"), route("r1", f"{to}.example.com"))


async def settled_sotw(xds: Harness, node: str = "envoy-1") -> tuple[Client, dict[str, Any]]:
    """An ADS client that ACKed everything of ``flipped("a")``: (client, last response per type)."""
    xds.server.set_snapshot(flipped("a"))
    client = xds.ads(node=node)
    last: dict[str, Any] = {}
    for type_url, names in ((CLUSTER, []), (ENDPOINT, ["eds/a"]), (LISTENER, []), (ROUTE, ["r1"])):
        await client.send(type_url, names)
        last[type_url] = await client.recv()
        await client.ack(last[type_url], names)
    await client.quiet()
    return client, last


async def test_sotw_new_cluster_before_route_and_removal_after_ack(xds: Harness) -> None:
    client, last = await settled_sotw(xds)
    xds.server.set_snapshot(flipped("b"))
    cds = await client.recv()
    assert cds.type_url == CLUSTER and names_of(cds) == ["a", "b"]  # the old one stays for now
    await client.quiet()  # the route to b waits for b
    await client.ack(last[ENDPOINT], ["eds/a", "eds/b"])  # Envoy subscribes to b's endpoints ...
    eds = await client.recv()
    assert names_of(eds) == ["eds/b"]
    await client.ack(eds, ["eds/a", "eds/b"])
    await client.quiet()
    await client.ack(cds)  # ... then ACKs the cluster
    rds = await client.recv()
    assert rds.type_url == ROUTE and rds.version_info == flipped("b").get(ROUTE).version
    await client.quiet()  # a stays until the Envoy ACKs the route that left it
    await client.ack(rds, ["r1"])
    final = await client.recv()
    assert final.type_url == CLUSTER and names_of(final) == ["b"]
    assert final.version_info == flipped("b").get(CLUSTER).version


async def test_sotw_nack_leaves_the_last_acknowledged_state(xds: Harness) -> None:
    client, last = await settled_sotw(xds)
    xds.server.set_snapshot(flipped("b"))
    cds = await client.recv()
    await client.send(CLUSTER, version=last[CLUSTER].version_info, nonce=cds.nonce, error="cluster b: bad")
    await client.ack(last[ENDPOINT], ["eds/a", "eds/b"])
    eds = await client.recv()  # b's endpoints: harmless
    await client.ack(eds, ["eds/a", "eds/b"])
    await client.quiet()  # the route keeps pointing at a, which stays
    assert xds.counters.xds_nacks[CLUSTER] == 1

    xds.server.set_snapshot(flipped("c"))  # a good change after the bad one
    fixed = await client.recv()
    assert names_of(fixed) == ["a", "c"]
    await client.quiet()  # b is no longer served, which a SotW EDS response cannot say
    await client.ack(eds, ["eds/a", "eds/c"])
    eds = await client.recv()
    assert names_of(eds) == ["eds/c"]
    await client.ack(eds, ["eds/a", "eds/c"])
    await client.ack(fixed)
    rds = await client.recv()
    assert rds.type_url == ROUTE
    # Envoy refuses the route too: it still routes to a, so a is kept.
    await client.send(ROUTE, ["r1"], last[ROUTE].version_info, rds.nonce, error="route r1: bad")
    await client.quiet()
    assert xds.counters.xds_nacks[ROUTE] == 1


async def test_sotw_routes_do_not_wait_for_endpoints_nobody_asks_for(xds: Harness) -> None:
    client, _ = await settled_sotw(xds)
    static = Resource.from_message(
        "s", CLUSTER, cluster_pb2.Cluster(name="s", type=cluster_pb2.Cluster.STATIC)
    )
    # A route to a new non-EDS cluster (the others unchanged).
    xds.server.set_snapshot(
        snapshot(static, cluster("a"), cla("eds/a"), listener("l1"), route("r1", "s.example"))
    )
    cds = await client.recv()
    assert names_of(cds) == ["a", "s"]
    await client.ack(cds)  # no EDS request follows: no EDS cluster changed
    assert (await client.recv()).type_url == ROUTE


async def test_streams_are_sequenced_independently(xds: Harness) -> None:
    quick, quick_last = await settled_sotw(xds, "quick")
    slow, slow_last = await settled_sotw(xds, "slow")
    xds.server.set_snapshot(flipped("b"))

    async def take_b(client: Client, last: dict[str, Any], cds: Any) -> Any:
        await client.ack(last[ENDPOINT], ["eds/a", "eds/b"])
        await client.ack(await client.recv(), ["eds/a", "eds/b"])
        await client.ack(cds)
        return await client.recv()

    slow_cds = await slow.recv()
    assert (await take_b(quick, quick_last, await quick.recv())).type_url == ROUTE
    await slow.quiet()  # the slow Envoy did not answer: no route for it, and it held nobody back
    assert (await take_b(slow, slow_last, slow_cds)).type_url == ROUTE


async def test_per_type_streams_of_one_envoy_are_sequenced_together(xds: Harness) -> None:
    xds.server.set_snapshot(flipped("a"))
    channel = xds.channel()
    streams = {
        CLUSTER: cds_pb2_grpc.ClusterDiscoveryServiceStub(channel).StreamClusters(),
        ENDPOINT: eds_pb2_grpc.EndpointDiscoveryServiceStub(channel).StreamEndpoints(),
        ROUTE: rds_pb2_grpc.RouteDiscoveryServiceStub(channel).StreamRoutes(),
    }
    clients = {t: xds._client(call, "node-t") for t, call in streams.items()}
    names = {CLUSTER: ["*"], ENDPOINT: ["eds/a"], ROUTE: ["r1"]}
    last = {}
    for type_url, client in clients.items():
        await client.send(type_url, names[type_url])
        last[type_url] = await client.recv()
        await client.ack(last[type_url], names[type_url])
    xds.server.set_snapshot(flipped("b"))
    cds = await clients[CLUSTER].recv()
    assert names_of(cds) == ["a", "b"]
    await clients[ENDPOINT].ack(last[ENDPOINT], ["eds/a", "eds/b"])
    await clients[ENDPOINT].ack(await clients[ENDPOINT].recv(), ["eds/a", "eds/b"])
    await clients[ROUTE].quiet()  # the route waits for the ACK on the cluster stream
    await clients[CLUSTER].ack(cds)
    rds = await clients[ROUTE].recv()
    await clients[CLUSTER].quiet()  # a stays until the route stream ACKs
    await clients[ROUTE].ack(rds, ["r1"])
    assert names_of(await clients[CLUSTER].recv()) == ["b"]


async def test_delta_new_cluster_before_route_and_removal_after_ack(xds: Harness) -> None:
    xds.server.set_snapshot(flipped("a"))
    client = xds.delta_ads()
    for type_url, names in ((CLUSTER, []), (ENDPOINT, ["eds/a"]), (LISTENER, []), (ROUTE, ["r1"])):
        await client.delta(type_url, names)
        await client.delta(type_url, nonce=(await client.recv()).nonce)
    await client.quiet()
    xds.server.set_snapshot(flipped("b"))
    cds = await client.recv()
    assert [r.name for r in cds.resources] == ["b"] and not cds.removed_resources
    await client.delta(ENDPOINT, ["eds/b"])
    eds = await client.recv()
    assert [r.name for r in eds.resources] == ["eds/b"]
    await client.quiet()
    await client.delta(CLUSTER, nonce=cds.nonce)
    rds = await client.recv()
    assert rds.type_url == ROUTE and [r.name for r in rds.resources] == ["r1"]
    await client.quiet()
    await client.delta(ROUTE, nonce=rds.nonce)
    removal = await client.recv()
    assert (removal.type_url, list(removal.removed_resources)) == (CLUSTER, ["a"])


# --- Scoped RDS and partial SotW responses -------------------------------------------------


def scoped(*keys: str, **changes: Resource) -> Snapshot:
    """``base()`` plus, per key, scope ``s-<key>`` naming RouteConfiguration ``r-<key>``."""
    extra: dict[str, Resource] = {}
    for key in keys:
        extra[f"s-{key}"] = scope(f"s-{key}", f"r-{key}", key)
        extra[f"r-{key}"] = route(f"r-{key}", f"{key}.example.com")
    return base(**{**extra, **changes})


async def test_sotw_scoped_routes_are_complete_and_wait_for_the_clusters(xds: Harness) -> None:
    xds.server.set_snapshot(scoped("a", "b"))
    client = xds.ads()
    await client.send(CLUSTER)
    cds = await client.recv()
    await client.ack(cds)
    await client.send(SCOPED_ROUTE)  # Envoy's ScopedRdsConfigSubscription: no names, i.e. all
    srds = await client.recv()
    assert srds.type_url == SCOPED_ROUTE and names_of(srds) == ["s-a", "s-b"]
    await client.ack(srds)
    await client.quiet()
    # A new host: its scope waits for the clusters' ACK, then comes with every other scope.
    xds.server.set_snapshot(scoped("a", "b", "c", c3=cluster("c3")))
    pushed = await client.recv()
    assert pushed.type_url == CLUSTER
    await client.quiet()
    await client.ack(pushed)
    srds = await client.recv()
    assert names_of(srds) == ["s-a", "s-b", "s-c"]
    assert srds.version_info == scoped("a", "b", "c").get(SCOPED_ROUTE).version


async def test_delta_scoped_routes_are_a_wildcard_subscription(xds: Harness) -> None:
    xds.server.set_snapshot(scoped("a", "b"))
    client = xds.delta_ads()
    await client.delta(SCOPED_ROUTE)  # legacy wildcard, as Envoy subscribes
    first = await client.recv()
    assert sorted(r.name for r in first.resources) == ["s-a", "s-b"]
    await client.delta(SCOPED_ROUTE, nonce=first.nonce)
    await client.quiet()
    xds.server.set_snapshot(scoped("b", "c"))
    changed = await client.recv()
    assert [r.name for r in changed.resources] == ["s-c"]
    assert list(changed.removed_resources) == ["s-a"]


@pytest.mark.parametrize("api", ["sotw", "delta"])
async def test_scoped_routes_per_type_service(xds: Harness, api: str) -> None:
    xds.server.set_snapshot(scoped("a"))
    stub = srds_pb2_grpc.ScopedRoutesDiscoveryServiceStub(xds.channel())
    if api == "sotw":
        client = xds._client(stub.StreamScopedRoutes(), "per-type")
        await client.send(SCOPED_ROUTE)
        assert names_of(await client.recv()) == ["s-a"]
    else:
        client = xds._client(stub.DeltaScopedRoutes(), "per-type")
        await client.delta(SCOPED_ROUTE)
        assert [r.name for r in (await client.recv()).resources] == ["s-a"]
    fetched = await stub.FetchScopedRoutes(discovery_pb2.DiscoveryRequest(type_url=SCOPED_ROUTE), timeout=3)
    assert names_of(fetched) == ["s-a"]


async def settled_routes(xds: Harness, keys: Iterable[str]) -> tuple[Client, Any]:
    """An ADS client holding every cluster and RouteConfiguration of ``scoped(*keys)``."""
    names = [f"r-{key}" for key in keys]
    client = xds.ads(node="routes")
    await client.send(CLUSTER)
    await client.ack(await client.recv())
    await client.send(ROUTE, names)
    rds = await client.recv()
    assert names_of(rds) == sorted(names)  # a new subscription is answered in full
    await client.ack(rds, names)
    await client.quiet()
    return client, rds


async def test_sotw_route_push_carries_only_what_changed(xds: Harness) -> None:
    keys = [f"h{i}" for i in range(50)]
    xds.server.set_snapshot(scoped(*keys))
    client, _ = await settled_routes(xds, keys)
    names = [f"r-{key}" for key in keys]
    xds.server.set_snapshot(scoped(*keys, **{"r-h7": route("r-h7", "moved.example.com")}))
    pushed = await client.recv()
    assert pushed.type_url == ROUTE and names_of(pushed) == ["r-h7"]
    assert (
        pushed.version_info
        == scoped(*keys, **{"r-h7": route("r-h7", "moved.example.com")}).get(ROUTE).version
    )
    # A NACK names what that response carried, and nothing is resent.
    await client.send(ROUTE, names, "old", pushed.nonce, error="route r-h7: bad")
    assert await _reports(xds, 1) == [RejectReport("routes", ROUTE, ("r-h7",), "route r-h7: bad")]
    await client.quiet()
    # A new host's RouteConfiguration: that one only, at the same version.
    await client.ack(pushed, [*names, "r-c1"])
    xds.server.set_snapshot(scoped(*keys, "c1", **{"r-h7": route("r-h7", "moved.example.com")}))
    assert names_of(await client.recv()) == ["r-c1"]


async def test_a_reconnecting_envoy_gets_every_route_it_names(xds: Harness) -> None:
    xds.server.set_snapshot(scoped("a", "b"))
    client, rds = await settled_routes(xds, ["a", "b"])
    await client.close()
    again = xds.ads(node="routes")
    await again.send(CLUSTER)
    await again.ack(await again.recv())
    await again.send(ROUTE, ["r-a", "r-b"], version=rds.version_info)
    assert names_of(await again.recv()) == ["r-a", "r-b"]


def test_changes_between_two_versions_are_worked_out_once() -> None:
    cache = ChangeCache()
    old = scoped("a", "b", "c").get(ROUTE)
    new = scoped("a", "c", "d", **{"r-a": route("r-a", "moved.example.com")}).get(ROUTE)
    changes = cache.between(old, new)
    assert changes == Changes(frozenset({"r-a", "r-d"}), frozenset({"r-b"}))
    again = scoped("a", "c", "d", **{"r-a": route("r-a", "moved.example.com")}).get(ROUTE)
    assert cache.between(old, again) is changes  # another stream, the same pair of versions
    assert cache.between(new, new) == Changes(frozenset(), frozenset())


async def test_delta_new_names_are_answered_alone(xds: Harness) -> None:
    xds.server.set_snapshot(scoped("a", "b", "c"))
    client = xds.delta_ads()
    await client.delta(ROUTE, ["r-a", "r-b"])
    first = await client.recv()
    assert sorted(r.name for r in first.resources) == ["r-a", "r-b"]
    await client.delta(ROUTE, nonce=first.nonce)
    await client.quiet()
    await client.delta(ROUTE, ["r-c", "r-missing", "r-a"])  # r-a: the client has it already
    added = await client.recv()
    assert [r.name for r in added.resources] == ["r-c"]
    assert list(added.removed_resources) == ["r-missing"]
    await client.delta(ROUTE, nonce=added.nonce)
    xds.server.set_snapshot(scoped("a", "b", "c", **{"r-b": route("r-b", "moved.example.com")}))
    assert [r.name for r in (await client.recv()).resources] == ["r-b"]


def test_translate_json_shows_scoped_routes_only_when_there_are_some() -> None:
    assert "scoped-routes" not in base().to_json()  # the classic shape's output is as it was
    shown = scoped("a").to_json()["scoped-routes"]
    assert shown == [
        {"name": "s-a", "routeConfigurationName": "r-a", "key": {"fragments": [{"stringKey": "a"}]}}
    ]


# --- the first build's clusters, before its routing ------------------------------------------


def clusters_first(full: Snapshot) -> Snapshot:
    """What cpx serve offers while its first build makes the routes: the same cluster, endpoint
    and secret type snapshots as the whole build's, and no routing."""
    return Snapshot({t: full.get(t) for t in (CLUSTER, ENDPOINT, SECRET)}, clusters_only=True)


async def test_clusters_only_snapshot_warms_clusters_and_holds_routing(xds: Harness) -> None:
    full = base()
    xds.server.set_snapshot(clusters_first(full))
    client = xds.ads()
    for type_url, names in ((CLUSTER, []), (ENDPOINT, ["eds/c1", "eds/c2"]), (LISTENER, []), (ROUTE, ["r1"])):
        await client.send(type_url, names)
    cds = await client.recv()
    eds = await client.recv()
    assert (cds.type_url, names_of(cds)) == (CLUSTER, ["c1", "c2"])
    assert (eds.type_url, names_of(eds)) == (ENDPOINT, ["eds/c1", "eds/c2"])
    await client.ack(cds)
    await client.ack(eds, ["eds/c1", "eds/c2"])
    await client.quiet()  # the clusters are ACKed, yet no listener: there is none to send yet
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await lds_pb2_grpc.ListenerDiscoveryServiceStub(xds.channel()).FetchListeners(
            discovery_pb2.DiscoveryRequest(type_url=LISTENER), timeout=3
        )
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE

    xds.server.set_snapshot(full)  # the whole build: routing follows at once, clusters are not resent
    order = [(await client.recv()) for _ in range(2)]
    assert [(r.type_url, names_of(r)) for r in order] == [(LISTENER, ["l1"]), (ROUTE, ["r1"])]
    await client.quiet()
    assert xds.counters.xds_responses[CLUSTER] == 1


async def test_clusters_only_snapshot_on_delta_holds_routing(xds: Harness) -> None:
    full = base()
    xds.server.set_snapshot(clusters_first(full))
    client = xds.delta_ads(node="node-early")
    await client.delta(CLUSTER)
    cds = await client.recv()
    assert sorted(r.name for r in cds.resources) == ["c1", "c2"]
    await client.delta(CLUSTER, nonce=cds.nonce)
    await client.delta(LISTENER, ["*"])
    await client.quiet()  # not even the first (empty) wildcard answer: Envoy keeps what it holds
    xds.server.set_snapshot(full)
    listeners = await client.recv()
    assert listeners.type_url == LISTENER and [r.name for r in listeners.resources] == ["l1"]
