"""The scoped route shape (design 0018): how the RDS, SRDS and LDS caches split plain-HTTP routes.

What each virtual host holds is tested in the single shape (test_routes.py); here: where each
virtual host goes, the scopes that lead to it, and that one changed host changes one resource.
tests/e2e/test_route_shape_e2e.py sends the requests through a real Envoy.
"""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2 as route_v3
from envoy.config.route.v3 import scoped_route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm

from cpx.builtin.filters import with_builtin_filters
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol, VirtualHost
from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route, ServicePort
from cpx.xds.caches import routes
from cpx.xds.caches.listeners import ListenerCache
from cpx.xds.caches.routes import RouteCache
from cpx.xds.caches.scopes import ScopeCache
from cpx.xds.envoy.scoped import SCOPE_FILTER, SCOPE_HEADER, UPGRADE_FILTER

HTTP = "ingress_http"
SCOPED, SINGLE = Config(), Config(route_shape="single")


def route(path: str = "/", *, websocket: bool = False) -> Route:
    upstream = Cluster(upstream=ServicePort(namespace="default", name="svc", port=80))
    return Route(path=PathMatch(kind=PathKind.PREFIX, value=path), clusters=(upstream,), websocket=websocket)


def dag_of(*hosts: str, listener: str = HTTP) -> DAG:
    dag = DAG()
    dag.ensure_listener(listener, Protocol.HTTP, "0.0.0.0", 8080)
    for fqdn in hosts:
        dag.ensure_virtual_host(listener, fqdn).add_route(route())
    return dag


def configs(cache: RouteCache, dag: DAG) -> dict[str, route_v3.RouteConfiguration]:
    cache.on_change(dag)
    return {name: route_v3.RouteConfiguration.FromString(r.body) for name, r in cache.contents().items()}


def scopes(config: Config, dag: DAG) -> dict[str, scoped_route_pb2.ScopedRouteConfiguration]:
    cache = ScopeCache(config)
    cache.on_change(dag)
    return {
        name: scoped_route_pb2.ScopedRouteConfiguration.FromString(r.body)
        for name, r in cache.contents().items()
    }


def test_each_exact_host_gets_its_own_route_configuration() -> None:
    found = configs(with_builtin_filters(RouteCache(SCOPED)), dag_of("b.test", "*", "*.wild.test", "a.test"))
    assert sorted(found) == ["ingress_http", "ingress_http/a.test", "ingress_http/b.test"]
    assert [v.name for v in found[HTTP].virtual_hosts] == ["*", "*.wild.test"]
    for name in ("ingress_http/a.test", "ingress_http/b.test"):
        (vhost,) = found[name].virtual_hosts
        assert list(vhost.domains) == [name.split("/")[1]]
        # The marker the scope selector reads to know the exact host's scope answered.
        assert vhost.metadata.filter_metadata[SCOPE_FILTER].fields["exact"].bool_value
    assert not found[HTTP].virtual_hosts[0].metadata.filter_metadata
    for config in found.values():  # the selector's header never reaches a backend
        assert list(config.request_headers_to_remove) == [SCOPE_HEADER]
        assert [h.header.key for h in config.request_headers_to_add] == ["x-request-start"]


def test_the_single_shape_keeps_one_route_configuration() -> None:
    found = configs(with_builtin_filters(RouteCache(SINGLE)), dag_of("b.test", "*", "a.test"))
    assert list(found) == [HTTP]
    assert [v.name for v in found[HTTP].virtual_hosts] == ["*", "a.test", "b.test"]
    assert not found[HTTP].request_headers_to_remove
    assert scopes(SINGLE, dag_of("a.test")) == {}


def test_one_scope_per_exact_host_and_one_for_the_rest() -> None:
    found = scopes(SCOPED, dag_of("Mixed.Case.test", "*.wild.test", "plain.test"))
    assert {
        name: (s.route_configuration_name, s.key.fragments[0].string_key) for name, s in found.items()
    } == {
        "ingress_http": ("ingress_http", "ingress_http/*"),
        # Keys are lower case: the selector lower-cases the Host (Envoy's domain match ignores case).
        "ingress_http/Mixed.Case.test": ("ingress_http/Mixed.Case.test", "ingress_http/mixed.case.test"),
        "ingress_http/plain.test": ("ingress_http/plain.test", "ingress_http/plain.test"),
    }


def test_a_plugin_listener_has_scopes_of_its_own() -> None:
    found = scopes(SCOPED, dag_of("a.test", listener="gateway-http"))
    assert sorted(s.key.fragments[0].string_key for s in found.values()) == [
        "gateway-http/*",
        "gateway-http/a.test",
        "ingress_http/*",  # always there, as the ingress_http RouteConfiguration is
    ]


def test_one_changed_host_changes_one_resource() -> None:
    cache = with_builtin_filters(RouteCache(SCOPED))
    hosts = [f"h{i}.test" for i in range(50)]
    dag = dag_of(*hosts)
    cache.on_change(dag)
    before = dict(cache.contents())
    changed = dag_of(*hosts)
    changed.ensure_virtual_host(HTTP, "h7.test").add_route(route("/new"))
    cache.on_change(changed)
    after = cache.contents()
    assert sorted(after) == sorted(before)
    assert [name for name in after if after[name] is not before[name]] == ["ingress_http/h7.test"]
    scope_cache = ScopeCache(SCOPED)
    scope_cache.on_change(dag)
    kept = dict(scope_cache.contents())
    scope_cache.on_change(changed)
    assert scope_cache.contents() == kept  # the same hosts: the same scopes


def test_a_changed_wildcard_host_or_a_new_host_rebuilds_only_what_holds_it() -> None:
    cache = with_builtin_filters(RouteCache(SCOPED))
    hosts = ["*", "*.wild.test", *(f"h{i}.test" for i in range(20))]
    cache.on_change(dag_of(*hosts))
    before = dict(cache.contents())
    wild = dag_of(*hosts)
    wild.ensure_virtual_host(HTTP, "*.wild.test").add_route(route("/new"))
    cache.on_change(wild)
    assert [n for n, r in cache.contents().items() if before.get(n) is not r] == [HTTP]
    (wildcard,) = (v for v in configs(cache, wild)[HTTP].virtual_hosts if v.name == "*.wild.test")
    assert {r.match.prefix for r in wildcard.routes} == {"/", "/new"}
    middle = dict(cache.contents())
    wild.ensure_virtual_host(HTTP, "new.test").add_route(route())  # a new host: the others stay
    cache.on_change(wild)
    after = cache.contents()
    assert [n for n, r in after.items() if middle.get(n) is not r] == ["ingress_http/new.test"]
    assert list(
        route_v3.RouteConfiguration.FromString(after["ingress_http/new.test"].body).virtual_hosts[0].domains
    ) == ["new.test"]


def test_routes_that_allow_an_upgrade_say_so_for_the_guard() -> None:
    dag = dag_of()
    vhost = dag.ensure_virtual_host(HTTP, "ws.test")
    vhost.add_route(route("/ws", websocket=True))
    vhost.add_route(route("/plain"))
    (config,) = (c for n, c in configs(with_builtin_filters(RouteCache(SCOPED)), dag).items() if n != HTTP)
    marked = {r.match.prefix: dict(r.metadata.filter_metadata) for r in config.virtual_hosts[0].routes}
    assert marked["/plain"] == {}
    assert marked["/ws"][UPGRADE_FILTER].fields["websocket"].bool_value
    (single,) = configs(with_builtin_filters(RouteCache(SINGLE)), dag).values()
    assert all(not r.HasField("metadata") for r in single.virtual_hosts[0].routes)


def test_the_connection_manager_selects_the_scope_first() -> None:
    cache = with_builtin_filters(ListenerCache(SCOPED))
    cache.on_change(dag_of("a.test"))
    listener = listener_pb2.Listener.FromString(cache.contents()[HTTP].body)
    manager = hcm.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    assert not manager.HasField("rds")
    scoped = manager.scoped_routes
    assert scoped.name == HTTP
    assert scoped.scope_key_builder.fragments[0].header_value_extractor.name == SCOPE_HEADER
    assert scoped.scoped_rds.scoped_rds_config_source.HasField("ads")
    assert scoped.rds_config_source.HasField("ads")
    names = [f.name for f in manager.http_filters]
    assert names[:2] == [SCOPE_FILTER, UPGRADE_FILTER] and names[-1] == "router"


def frozen_dag(hosts: dict[str, VirtualHost]) -> DAG:
    """A sealed DAG serving these (frozen) hosts, as a build that keeps them does."""
    dag = DAG()
    dag.ensure_listener(HTTP, Protocol.HTTP, "0.0.0.0", 8080)
    dag.add_virtual_hosts(HTTP, hosts)
    dag.prune()
    dag.seal()
    return dag


def host(fqdn: str, path: str = "/") -> VirtualHost:
    vhost = VirtualHost(fqdn)
    vhost.add_route(route(path))
    return vhost.freeze()


@pytest.mark.parametrize("config", [SCOPED, SINGLE], ids=["scoped", "single"])
def test_a_change_names_what_it_touched_and_a_failed_one_leaves_nothing_stale(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts = {f"h{i}.test": host(f"h{i}.test") for i in range(20)}
    cache = with_builtin_filters(RouteCache(config))
    cache.on_change(frozen_dag(hosts))
    before = cache.contents()
    cache.on_change(frozen_dag(hosts | {"h7.test": host("h7.test", "/a")}))
    assert cache.changed_since(before) == {"ingress_http/h7.test" if config is SCOPED else HTTP}
    assert cache.changed_since({}) is None  # not the contents it changed from
    # A build that fails after h3 was translated again (in place) and before it was done ...
    refresh = routes._Build._refresh

    def failing(self: routes._Build, done: Any, vhost: VirtualHost, secure: bool) -> Any:
        if vhost.name == "h9.test":
            raise RuntimeError("boom")
        return refresh(self, done, vhost, secure)

    monkeypatch.setattr(routes._Build, "_refresh", failing)
    changed = hosts | {"h3.test": host("h3.test", "/b"), "h9.test": host("h9.test", "/b")}
    with pytest.raises(RuntimeError):
        cache.on_change(frozen_dag(changed))
    monkeypatch.undo()
    # ... then one with h3 as it was: what the cache serves is what a fresh one builds.
    latest = frozen_dag(changed | {"h3.test": hosts["h3.test"]})
    cache.on_change(latest)
    fresh = with_builtin_filters(RouteCache(config))
    fresh.on_change(latest)
    assert {n: r.body for n, r in cache.contents().items()} == {
        n: r.body for n, r in fresh.contents().items()
    }
