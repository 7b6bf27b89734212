"""Frozen virtual hosts kept between builds (docs/design/0021): the DAG's copy on write, and caches
that skip unchanged hosts by identity giving what a fresh cache gives for the same DAG."""

from __future__ import annotations

import copy
import random

import attrs
import pytest

from cpx.builtin.filters import with_builtin_filters
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol, SecureVirtualHost, VirtualHost
from cpx.dag.nodes import Cluster, HeadersPolicy, HeaderValue, PathKind, PathMatch, Route, Secret, ServicePort
from cpx.records import ResourceCache
from cpx.xds.caches.clusters import ClusterCache
from cpx.xds.caches.routes import RouteCache
from cpx.xds.caches.scopes import ScopeCache

HTTP, OTHER, HTTPS = "ingress_http", "other_http", "ingress_https"
SECURE_OTHER = "secure on other_http"  # a key of Tenants.kept, not a listener
SECRET = Secret(namespace="default", name="tls", cert_pem=b"c", key_pem=b"k")


def route(path: str, service: str = "svc") -> Route:
    upstream = Cluster(upstream=ServicePort(namespace="default", name=service, port=80))
    return Route(path=PathMatch(kind=PathKind.PREFIX, value=path), clusters=(upstream,))


def new_dag() -> DAG:
    dag = DAG()
    dag.ensure_listener(HTTP, Protocol.HTTP, "0.0.0.0", 8080)
    dag.ensure_listener(OTHER, Protocol.HTTP, "0.0.0.0", 8081)
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "0.0.0.0", 8443)
    return dag


def test_a_frozen_host_refuses_changes_and_the_accessors_hand_out_copies() -> None:
    kept = VirtualHost("a.test", {route("/").match_key(): route("/")}).freeze()
    with pytest.raises(TypeError, match="frozen"):
        kept.add_route(route("/x"))
    with pytest.raises(TypeError, match="frozen"):
        kept.routes.clear()
    dag = new_dag()
    dag.add_virtual_hosts(HTTP, {"a.test": kept})
    assert dag.listeners[HTTP].virtual_hosts["a.test"] is kept
    mine = dag.ensure_virtual_host(HTTP, "a.test")
    assert mine is not kept and not mine.frozen
    mine.add_route(route("/x"))
    assert dag.listeners[HTTP].virtual_hosts["a.test"] is mine
    assert list(kept.routes) == [route("/").match_key()]  # the kept one is as it was
    assert copy.deepcopy(kept).routes == kept.routes  # copies are plain dicts again
    with pytest.raises(ValueError, match="already has virtual hosts"):
        dag.add_virtual_hosts(HTTP, {"a.test": kept})


def test_sealing_freezes_every_host_and_keeps_only_valid_ones() -> None:
    dag = new_dag()
    dag.ensure_virtual_host(HTTP, "b.test").add_route(route("/"))
    dag.ensure_virtual_host(HTTP, "empty.test")
    dag.add_secure_virtual_hosts(HTTPS, {"s.test": SecureVirtualHost("s.test", {"/": route("/")})})
    dag.prune()
    dag.seal()
    assert list(dag.listeners[HTTP].virtual_hosts) == ["b.test"]
    assert HTTPS not in dag.listeners  # no secret: not valid
    assert all(v.frozen for listener in dag.listeners.values() for v in listener.virtual_hosts.values())
    assert [c.upstream.name for c in dag.clusters()] == ["svc"]


class Tenants:
    """Random builds where, as with an incremental processor, unchanged hosts are the same objects."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.kept: dict[tuple[str, str], VirtualHost] = {}

    def step(self) -> DAG:
        rng = self.rng
        for _ in range(rng.randint(1, 4)):
            listener = rng.choice([HTTP, HTTP, OTHER, HTTPS, SECURE_OTHER])
            fqdn = rng.choice(["a.test", "b.test", "c.test", "*.w.test", "*", "D.test", "d.test", "e.test"])
            key = (listener, fqdn)
            if key in self.kept and rng.random() < 0.3:
                del self.kept[key]
                continue
            routes = {r.match_key(): r for r in (route(f"/{rng.randint(0, 3)}", rng.choice("xyz")),)}
            if listener in (HTTPS, SECURE_OTHER):
                if fqdn == "*":
                    continue
                self.kept[key] = SecureVirtualHost(fqdn, routes, secret=SECRET).freeze()
            else:
                self.kept[key] = VirtualHost(fqdn, routes).freeze()
        dag = new_dag()
        for (listener, _), vhost in self.kept.items():
            if isinstance(vhost, SecureVirtualHost):
                # SECURE_OTHER: secure hosts on a listener with plain ones, which may lose them all.
                target = OTHER if listener == SECURE_OTHER else listener
                dag.add_secure_virtual_hosts(target, {vhost.name: vhost})
            elif rng.random() < 0.2:  # now and then an equal copy instead of the kept object
                dag.add_virtual_hosts(listener, {vhost.name: vhost.thawed()})
            else:
                dag.add_virtual_hosts(listener, {vhost.name: vhost})
        dag.prune()
        dag.seal()
        return dag


def bodies(cache: ResourceCache) -> dict[str, bytes]:
    return {name: res.body for name, res in cache.contents().items()}


@pytest.mark.parametrize("shape", ["scoped", "single"])
@pytest.mark.parametrize("seed", range(6))
def test_caches_kept_across_builds_give_what_fresh_ones_give(shape: str, seed: int) -> None:
    config = Config(route_shape="scoped") if shape == "scoped" else Config(route_shape="single")

    def caches() -> list[ResourceCache]:
        return [with_builtin_filters(RouteCache(config)), ScopeCache(config), ClusterCache(config)]

    kept, tenants = caches(), Tenants(seed)
    for _ in range(40):
        dag = tenants.step()
        fresh = caches()
        for old, new in zip(kept, fresh, strict=True):
            old.on_change(dag)
            new.on_change(dag)
            assert bodies(old) == bodies(new), type(old).__name__


def test_a_kept_host_with_a_refused_route_is_refused_again_in_every_build() -> None:
    headers = HeadersPolicy(set=(HeaderValue(name="x-bad", value="a\nb"),))
    bad = attrs.evolve(route("/"), request_headers=headers)
    kept = {
        f"h{i}.test": VirtualHost(f"h{i}.test", {route("/").match_key(): route("/")}).freeze()
        for i in range(8)
    }
    kept["a.test"] = VirtualHost("a.test", {bad.match_key(): bad}).freeze()
    cache = with_builtin_filters(RouteCache(Config()))
    for _ in range(3):
        dag = new_dag()
        dag.add_virtual_hosts(HTTP, kept)
        dag.prune()
        dag.seal()
        cache.on_change(dag)
        [fault] = cache.faults()
        assert "'a.test'" in fault.note.message


def test_a_listener_losing_its_last_plain_host_loses_its_fallback_scope() -> None:
    plain = VirtualHost("a.test", {route("/").match_key(): route("/")}).freeze()
    secure = SecureVirtualHost("s.test", {route("/").match_key(): route("/")}, secret=SECRET).freeze()

    def dag_of(*hosts: VirtualHost) -> DAG:
        dag = new_dag()
        dag.add_virtual_hosts(HTTP, {"h.test": plain})
        for vhost in hosts:
            if isinstance(vhost, SecureVirtualHost):
                dag.add_secure_virtual_hosts(OTHER, {vhost.name: vhost})
            else:
                dag.add_virtual_hosts(OTHER, {vhost.name: vhost})
        dag.prune()
        dag.seal()
        return dag

    kept = ScopeCache(Config())
    kept.on_change(dag_of(plain, secure))
    assert any(name.startswith(f"{OTHER}/") or name == OTHER for name in kept.contents())
    dag = dag_of(secure)
    kept.on_change(dag)
    fresh = ScopeCache(Config())
    fresh.on_change(dag)
    assert bodies(kept) == bodies(fresh)
