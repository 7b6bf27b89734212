"""Scoped RDS with a real Envoy: the xDS server alone, serving a hand-built snapshot.

The listener's connection manager asks for scopes over ADS (SRDS, a wildcard subscription) keyed on
the ``x-scope`` request header; each scope names one RouteConfiguration (RDS). Requests must reach
the scope's route, a changed RouteConfiguration must be served, and a SotW RDS push after one
change must carry only that RouteConfiguration (Envoy decodes, and counts, only what it is sent).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, config_source_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2, scoped_route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from google.protobuf import duration_pb2

from cpx.testing import EnvoyProcess, envoy_binary, free_port, http_get
from cpx.xds import to_any
from cpx.xds.resource import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from cpx.xds.server.ads import XdsServer

pytestmark = pytest.mark.e2e

PREFIX = "scoped"  # the connection manager's stat prefix


def _ads() -> config_source_pb2.ConfigSource:
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(), resource_api_version=config_source_pb2.V3
    )


def scoped_listener(port: int) -> Resource:
    """An HTTP listener whose routes come by scope: the ``x-scope`` header picks the scope."""
    fragment = hcm.ScopedRoutes.ScopeKeyBuilder.FragmentBuilder(
        header_value_extractor=hcm.ScopedRoutes.ScopeKeyBuilder.FragmentBuilder.HeaderValueExtractor(
            name="x-scope", index=0
        )
    )
    manager = hcm.HttpConnectionManager(
        stat_prefix=PREFIX,
        scoped_routes=hcm.ScopedRoutes(
            name="scopes",
            scope_key_builder=hcm.ScopedRoutes.ScopeKeyBuilder(fragments=[fragment]),
            rds_config_source=_ads(),
            scoped_rds=hcm.ScopedRds(scoped_rds_config_source=_ads()),
        ),
        http_filters=[hcm.HttpFilter(name="router", typed_config=to_any(router_pb2.Router()))],
    )
    chain = listener_components_pb2.FilterChain(
        filters=[listener_components_pb2.Filter(name="hcm", typed_config=to_any(manager))]
    )
    sock = address_pb2.SocketAddress(address="127.0.0.1", port_value=port)
    message = listener_pb2.Listener(
        name="http", address=address_pb2.Address(socket_address=sock), filter_chains=[chain]
    )
    return Resource.from_message("http", LISTENER, message)


def scope(key: str) -> Resource:
    """The scope of header value ``key``, routed by RouteConfiguration ``routes/<key>``."""
    message = scoped_route_pb2.ScopedRouteConfiguration(
        name=f"scope/{key}",
        route_configuration_name=f"routes/{key}",
        key=scoped_route_pb2.ScopedRouteConfiguration.Key(
            fragments=[scoped_route_pb2.ScopedRouteConfiguration.Key.Fragment(string_key=key)]
        ),
    )
    return Resource.from_message(message.name, SCOPED_ROUTE, message)


def answering(key: str, body: str) -> Resource:
    """RouteConfiguration ``routes/<key>``: every request is answered 200 with ``body``."""
    route = route_components_pb2.Route(
        match=route_components_pb2.RouteMatch(prefix="/"),
        direct_response=route_components_pb2.DirectResponseAction(
            status=200, body=base_pb2.DataSource(inline_string=body)
        ),
    )
    vhost = route_components_pb2.VirtualHost(name=key, domains=["*"], routes=[route])
    name = f"routes/{key}"
    return Resource.from_message(name, ROUTE, route_pb2.RouteConfiguration(name=name, virtual_hosts=[vhost]))


def unused_cluster() -> list[Resource]:
    """An EDS cluster and its endpoints, so CDS/EDS are part of the exchange (and sequencing)."""
    cluster = cluster_pb2.Cluster(
        name="backend",
        type=cluster_pb2.Cluster.EDS,
        connect_timeout=duration_pb2.Duration(seconds=1),
        eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=_ads()),
    )
    sock = address_pb2.SocketAddress(address="127.0.0.1", port_value=9)
    endpoint = endpoint_components_pb2.Endpoint(address=address_pb2.Address(socket_address=sock))
    load = endpoint_pb2.ClusterLoadAssignment(
        cluster_name="backend",
        endpoints=[
            endpoint_components_pb2.LocalityLbEndpoints(
                lb_endpoints=[endpoint_components_pb2.LbEndpoint(endpoint=endpoint)]
            )
        ],
    )
    return [
        Resource.from_message("backend", CLUSTER, cluster),
        Resource.from_message("backend", ENDPOINT, load),
    ]


def snapshot_of(port: int, routes: Mapping[str, str]) -> Snapshot:
    """A listener on ``port`` and one scope plus one RouteConfiguration per ``routes`` key."""
    resources = [scoped_listener(port), *unused_cluster()]
    for key, body in routes.items():
        resources += [scope(key), answering(key, body)]
    by_type: dict[str, dict[str, Resource]] = {}
    for res in resources:
        by_type.setdefault(res.type_url, {})[res.name] = res
    return Snapshot({t: TypeSnapshot.of(t, named) for t, named in by_type.items()})


class ServerThread:
    """The xDS server on its own event loop thread, so the test may block on Envoy meanwhile."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = XdsServer(address="127.0.0.1", port=0)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    def set_snapshot(self, snapshot: Snapshot) -> None:
        self.loop.call_soon_threadsafe(self.server.set_snapshot, snapshot)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(0.2), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerThread, Callable[[str], EnvoyProcess]]]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    server = ServerThread()
    envoys: list[EnvoyProcess] = []

    def start(xds_api: str) -> EnvoyProcess:
        envoy = EnvoyProcess.with_xds(server.port, workdir=tmp_path / "envoy", xds_api=xds_api)
        envoys.append(envoy)
        return envoy.start()

    try:
        yield server, start
    finally:
        for envoy in envoys:
            envoy.stop()
        server.stop()


Served = tuple[ServerThread, Callable[[str], EnvoyProcess]]


def body_for(port: int, key: str) -> bytes:
    return http_get(f"http://127.0.0.1:{port}/", headers={"x-scope": key}).body


@pytest.mark.parametrize("xds_api", ["sotw", "delta"])
def test_the_scope_header_picks_the_route_configuration(served: Served, xds_api: str) -> None:
    server, start = served
    port = free_port()
    server.set_snapshot(snapshot_of(port, {"a": "alpha", "b": "beta"}))
    envoy = start(xds_api)
    envoy.wait_ready()
    eventually(lambda: body_for(port, "b") == b"beta")
    assert body_for(port, "a") == b"alpha"
    assert http_get(f"http://127.0.0.1:{port}/", headers={"x-scope": "c"}).status == 404  # no such scope

    server.set_snapshot(snapshot_of(port, {"a": "alpha, changed", "b": "beta"}))
    eventually(lambda: body_for(port, "a") == b"alpha, changed")
    server.set_snapshot(snapshot_of(port, {"a": "alpha, changed", "b": "beta", "c": "gamma"}))  # a new scope
    eventually(lambda: body_for(port, "c") == b"gamma")
    stats = envoy.stats(f"http.{PREFIX}.")
    assert stats[f"http.{PREFIX}.scoped_rds.scopes.update_rejected"] == 0
    assert stats[f"http.{PREFIX}.scoped_rds.scopes.active_scopes"] == 3


def test_a_sotw_route_push_carries_only_the_changed_route_configuration(served: Served) -> None:
    server, start = served
    port = free_port()
    keys = [f"k{i}" for i in range(20)]
    server.set_snapshot(snapshot_of(port, {key: key for key in keys}))
    envoy = start("sotw")
    envoy.wait_ready()
    eventually(lambda: body_for(port, "k19") == b"k19")

    def updates() -> dict[str, int]:
        stats = envoy.stats(rf"http\.{PREFIX}\.rds\..*\.update_success")
        return {key: stats[f"http.{PREFIX}.rds.routes/{key}.update_success"] for key in keys}

    before = updates()
    server.set_snapshot(snapshot_of(port, {key: key for key in keys} | {"k3": "k3, changed"}))
    eventually(lambda: body_for(port, "k3") == b"k3, changed")
    after = updates()
    # Envoy decoded and applied the changed one; the others were not in the response.
    assert {key for key in keys if after[key] != before[key]} == {"k3"}
