"""HTTP filters as plugin contributions: their order, the errors, and a third-party filter with
per-virtual-host, per-route and per-weighted-cluster configs read from DAG attachments."""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from envoy.config.listener.v3 import listener_pb2 as listener_v3
from envoy.config.route.v3 import route_components_pb2 as route_components
from envoy.config.route.v3 import route_pb2 as route_v3
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2 as header_mutation
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm

from cpx import HttpFilterSpec, hookimpl
from cpx.builtin import plugin as core
from cpx.config import Config
from cpx.dag import AttachmentKey, Attachments
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route, Secret, ServicePort
from cpx.errors import PluginError
from cpx.plugins import PluginHost
from cpx.sources.cache import SourceCache
from cpx.xds.caches.clusters import cds_shape
from cpx.xds.caches.listeners import ListenerCache
from cpx.xds.caches.routes import RouteCache
from cpx.xds.envoy.route import build_route
from cpx.xds.naming import cluster_name

# Contour's single-RouteConfiguration shape: what these tests inspect (the scoped shape's split of
# it is tested in test_scoped_routes.py).
SINGLE = Config(route_shape="single")

ROOT = Path(__file__).resolve().parents[2]
HTTP, HTTPS = "ingress_http", "ingress_https"
MUTATION = "envoy.filters.http.header_mutation"
BUILTIN = [
    "envoy.filters.http.lua",
    "envoy.filters.http.compressor",
    "envoy.filters.http.grpc_web",
    "envoy.filters.http.grpc_stats",
    "envoy.filters.http.cors",
    "envoy.filters.http.local_ratelimit",
    "envoy.filters.http.lua.cookie_rewrite",
    "envoy.filters.http.rbac",
    "router",
]
SECRET = Secret(namespace="default", name="tls", cert_pem=b"cert", key_pem=b"key")
WEB = ServicePort(namespace="default", name="web", port=80)


def _load_test_plugin() -> Any:
    path = ROOT / "tests" / "plugins" / "cpx_test_header_mutation.py"
    spec = importlib.util.spec_from_file_location("cpx_test_header_mutation", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


MUTATE = _load_test_plugin()


def _inert(site: object) -> header_mutation.HeaderMutation:
    return header_mutation.HeaderMutation()


def _filter(name: str, **fields: Any) -> HttpFilterSpec:
    return HttpFilterSpec(name=name, config=_inert, **fields)


def _plugin(name: str, *specs: HttpFilterSpec) -> tuple[str, object]:
    module = types.ModuleType(name)

    @hookimpl
    def cpx_http_filters() -> Iterator[HttpFilterSpec]:
        yield from specs

    module.cpx_http_filters = cpx_http_filters  # type: ignore[attr-defined]
    return name, module


def _order(*plugins: tuple[str, object]) -> list[str]:
    return [s.name for s in PluginHost.from_modules([("core", core), *plugins]).http_filters()]


# -- order ------------------------------------------------------------------------------------------


def test_builtin_filters_come_in_contours_order() -> None:
    assert _order() == BUILTIN


def test_a_filter_without_constraints_goes_after_the_cores_just_before_the_router() -> None:
    assert _order(_plugin("x", _filter("x.one"))) == [*BUILTIN[:-1], "x.one", "router"]


def test_after_and_before_place_a_filter_and_ties_go_by_plugin_then_name() -> None:
    first = _plugin(
        "first",
        _filter("b.early", after=("envoy.filters.http.lua",), before=("envoy.filters.http.compressor",)),
        _filter("z.late"),
        _filter("a.late"),
    )
    second = _plugin(
        "second", _filter("0.second"), _filter("c.early", before=("envoy.filters.http.compressor",))
    )
    expected = [BUILTIN[0], "b.early", "c.early", *BUILTIN[1:-1], "a.late", "z.late", "0.second", "router"]
    assert _order(first, second) == expected
    # Plugins' order decides ties between them, not the order of their filters.
    assert _order(second, first) == [
        BUILTIN[0],
        "c.early",
        "b.early",
        *BUILTIN[1:-1],
        "0.second",
        "a.late",
        "z.late",
        "router",
    ]


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (
            (_filter("envoy.filters.http.cors"),),
            "'envoy.filters.http.cors' is registered by both 'core' and 'x'",
        ),
        ((_filter("x.a", after=("x.nope",)),), "'x.a' of plugin 'x' is ordered against 'x.nope', which no"),
        ((_filter("x.a", before=("x.b",)), _filter("x.b", before=("x.a",))), r"cycle: .*'x.\w' \(x\)"),
        ((_filter("x.a", after=("router",)),), r"cycle: .*'router' \(core\)"),
        (
            (_filter("x.a", per_route=lambda r: None, per_route_at=lambda r, s: None),),
            "'x.a' of plugin 'x' sets both per_route and per_route_at",
        ),
        (
            (_filter("x.a", per_route=lambda r: None, route_fields=("cors", "colour")),),
            r"'x.a' of plugin 'x' reads \['colour'\], which are neither Route nor Cluster attributes",
        ),
    ],
)
def test_bad_contributions_are_start_up_errors_naming_the_plugins(
    specs: tuple[HttpFilterSpec, ...], message: str
) -> None:
    with pytest.raises(PluginError, match=message):
        _order(_plugin("x", *specs))


# -- a third-party filter in every connection manager and its per-route config -------------------


def _dag(*secure_hosts: str, plain_hosts: tuple[str, ...] = (), fallback: bool = False) -> DAG:
    dag = DAG()
    dag.ensure_listener(HTTP, Protocol.HTTP, "0.0.0.0", 8080)
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "0.0.0.0", 8443)
    route = Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), clusters=(Cluster(upstream=WEB),))
    for host in plain_hosts:
        dag.ensure_virtual_host(HTTP, host).add_route(route)
    for host in secure_hosts:
        vhost = dag.ensure_secure_virtual_host(HTTPS, host)
        vhost.secret = SECRET
        vhost.fallback_certificate = SECRET if fallback else None
        vhost.add_route(route)
    return dag


def _translate(host: PluginHost, dag: DAG) -> tuple[dict[str, Any], dict[str, Any]]:
    dag.prune()
    dag.seal()
    contributions = host.xds_contributions()
    listeners, routes = ListenerCache(SINGLE), RouteCache(SINGLE)
    for cache in (listeners, routes):
        cache.bind_contributions(contributions)
        cache.on_change(dag)
    return (
        {n: listener_v3.Listener.FromString(r.body) for n, r in listeners.contents().items()},
        {n: route_v3.RouteConfiguration.FromString(r.body) for n, r in routes.contents().items()},
    )


def _managers(listeners: dict[str, Any]) -> dict[str, hcm.HttpConnectionManager]:
    out = {}
    for listener in listeners.values():
        for chain in listener.filter_chains:
            manager = hcm.HttpConnectionManager()
            chain.filters[0].typed_config.Unpack(manager)
            out[chain.name or ",".join(chain.filter_chain_match.server_names) or listener.name] = manager
    return out


def test_third_party_filter_sits_before_the_router_of_every_connection_manager() -> None:
    host = PluginHost.from_modules([("core", core), ("mutate", MUTATE)])
    dag = _dag("mutate.secure.example.com", "*", plain_hosts=("mutate.example.com",), fallback=True)
    managers = _managers(_translate(host, dag)[0])
    # The "*" chain has no server name: it goes by the listener's name.
    assert set(managers) == {HTTP, "mutate.secure.example.com", HTTPS, "fallback-certificate"}
    for name, manager in managers.items():
        names = [f.name for f in manager.http_filters]
        sni = name == "mutate.secure.example.com"  # the only chain with the 421 check
        assert names == [*BUILTIN[0 if sni else 1 : -1], MUTATION, "router"], name
        assert manager.http_filters[-2].typed_config.Is(header_mutation.HeaderMutation.DESCRIPTOR)


def test_per_route_config_appears_where_the_attachment_is_set() -> None:
    host = PluginHost.from_modules([("core", core), ("mutate", MUTATE)])
    dag = _dag("mutate.secure.example.com", plain_hosts=("mutate.example.com", "plain.example.com"))
    for name, processor in [(s.name, s.factory(Config())) for s in host.processors()]:
        if name == "test-header-mutation":
            processor.run(dag, SourceCache())
    routes = _translate(host, dag)[1]
    found = {}
    for config in routes.values():
        for vhost in config.virtual_hosts:
            (route,) = vhost.routes
            found[vhost.domains[0]] = route.typed_per_filter_config.get(MUTATION)
    assert found["plain.example.com"] is None
    for fqdn in ("mutate.example.com", "mutate.secure.example.com"):
        per_route = header_mutation.HeaderMutationPerRoute()
        assert found[fqdn] is not None and found[fqdn].Unpack(per_route)
        (mutation,) = per_route.mutations.response_mutations
        assert (mutation.append.header.key, mutation.append.header.value) == ("x-mutated", fqdn)


@attrs.frozen
class Tag:
    value: str


VHOST_TAG = AttachmentKey("test/vhost", Tag)
CLUSTER_TAG = AttachmentKey("test/cluster", Tag)


def _tagged(tag: Tag | None) -> header_mutation.HeaderMutationPerRoute | None:
    if tag is None:
        return None
    return header_mutation.HeaderMutationPerRoute(
        mutations=header_mutation.Mutations(request_mutations=[{"remove": tag.value}])
    )


ROUTE_TAG = AttachmentKey("test/route", Tag)


def test_a_filter_naming_its_route_keys_is_called_only_for_routes_carrying_one() -> None:
    seen: list[str] = []

    def per_route(route: Route) -> header_mutation.HeaderMutationPerRoute | None:
        seen.append(route.path.value)
        return _tagged(route.attachments.get(ROUTE_TAG))

    def per_cluster(route: Route, cluster: Cluster) -> header_mutation.HeaderMutationPerRoute | None:
        seen.append("cluster " + route.path.value)
        return _tagged(cluster.attachments.get(CLUSTER_TAG))

    keyed = _filter(
        MUTATION,
        per_route=per_route,
        per_weighted_cluster=per_cluster,
        route_keys=(ROUTE_TAG.name, CLUSTER_TAG.name),
    )
    filters = (keyed,)
    plain = Route(path=PathMatch(kind=PathKind.PREFIX, value="/plain"), clusters=(Cluster(upstream=WEB),))
    other = attrs.evolve(
        plain,
        path=PathMatch(kind=PathKind.PREFIX, value="/other"),
        attachments=Attachments().set(VHOST_TAG, Tag("x")),
    )
    tagged = attrs.evolve(
        plain,
        path=PathMatch(kind=PathKind.PREFIX, value="/tagged"),
        attachments=Attachments().set(ROUTE_TAG, Tag("x-route")),
    )
    on_cluster = attrs.evolve(
        plain,
        path=PathMatch(kind=PathKind.PREFIX, value="/cluster"),
        clusters=(Cluster(upstream=WEB, attachments=Attachments().set(CLUSTER_TAG, Tag("x-cluster"))),),
    )
    built = {r.path.value: build_route(r, False, filters=filters) for r in (plain, other, tagged, on_cluster)}
    assert set(seen) == {"cluster /tagged", "/tagged", "cluster /cluster", "/cluster"}
    assert MUTATION not in built["/plain"].typed_per_filter_config
    assert MUTATION not in built["/other"].typed_per_filter_config
    assert MUTATION in built["/tagged"].typed_per_filter_config
    (entry,) = built["/cluster"].route.weighted_clusters.clusters
    assert MUTATION in entry.typed_per_filter_config


def test_a_filter_naming_the_attributes_it_reads_is_called_only_where_one_is_set() -> None:
    seen: list[str] = []

    def per_route(route: Route) -> header_mutation.HeaderMutationPerRoute | None:
        seen.append(route.path.value)
        return _tagged(Tag(route.prefix_rewrite)) if route.prefix_rewrite else None

    filters = (_filter(MUTATION, per_route=per_route, route_fields=("prefix_rewrite", "sni")),)
    plain = Route(path=PathMatch(kind=PathKind.PREFIX, value="/plain"), clusters=(Cluster(upstream=WEB),))
    rewritten = attrs.evolve(plain, path=PathMatch(kind=PathKind.PREFIX, value="/r"), prefix_rewrite="/x")
    sni = attrs.evolve(
        plain, path=PathMatch(kind=PathKind.PREFIX, value="/sni"), clusters=(Cluster(upstream=WEB, sni="a"),)
    )
    built = {r.path.value: build_route(r, False, filters=filters) for r in (plain, rewritten, sni)}
    assert seen == ["/r", "/sni"]
    assert MUTATION in built["/r"].typed_per_filter_config
    assert MUTATION not in built["/plain"].typed_per_filter_config


def test_per_virtual_host_and_per_weighted_cluster_configs_come_from_attachments() -> None:
    spec = _filter(
        "test.tags",
        per_virtual_host=lambda vhost: _tagged(vhost.attachments.get(VHOST_TAG)),
        per_weighted_cluster=lambda route, cluster: _tagged(cluster.attachments.get(CLUSTER_TAG)),
    )
    host = PluginHost.from_modules([("core", core), _plugin("tags", spec)])
    dag = _dag(plain_hosts=("tagged.example.com", "plain.example.com"))
    tagged = dag.listeners[HTTP].virtual_hosts["tagged.example.com"]
    tagged.attachments = tagged.attachments.set(VHOST_TAG, Tag("x-vhost"))
    (key, route), *_ = tagged.routes.items()
    cluster = attrs.evolve(route.clusters[0], attachments=Attachments().set(CLUSTER_TAG, Tag("x-cluster")))
    tagged.routes[key] = attrs.evolve(route, clusters=(cluster,))
    (config,) = _translate(host, dag)[1].values()
    vhosts = {v.domains[0]: v for v in config.virtual_hosts}
    assert "test.tags" not in vhosts["plain.example.com"].typed_per_filter_config
    assert vhosts["plain.example.com"].routes[0].route.cluster  # a single plain cluster stays simple
    per_vhost = header_mutation.HeaderMutationPerRoute()
    assert vhosts["tagged.example.com"].typed_per_filter_config["test.tags"].Unpack(per_vhost)
    assert per_vhost.mutations.request_mutations[0].remove == "x-vhost"
    # A single cluster with a config of its own goes on weighted_clusters, like cookie rewrites.
    (entry,) = vhosts["tagged.example.com"].routes[0].route.weighted_clusters.clusters
    per_cluster = header_mutation.HeaderMutationPerRoute()
    assert entry.typed_per_filter_config["test.tags"].Unpack(per_cluster)
    assert per_cluster.mutations.request_mutations[0].remove == "x-cluster"
    assert entry.name == cluster_name(Cluster(upstream=WEB))


def _rate_limit(tag: Tag | None) -> list[route_components.RateLimit]:
    if tag is None:
        return []
    action = route_components.RateLimit.Action(generic_key={"descriptor_value": tag.value})
    return [route_components.RateLimit(actions=[action])]


def test_route_action_and_virtual_host_fields_merge_into_the_route_and_the_host() -> None:
    """Settings Envoy reads from the RouteAction / VirtualHost itself (rate_limits), from attachments."""
    spec = _filter(
        "test.limits",
        route_action=lambda route: (
            route_components.RouteAction(rate_limits=_rate_limit(route.attachments.get(VHOST_TAG)))
            if VHOST_TAG in route.attachments
            else None
        ),
        virtual_host_fields=lambda vhost: (
            route_components.VirtualHost(rate_limits=_rate_limit(vhost.attachments.get(VHOST_TAG)))
            if VHOST_TAG in vhost.attachments
            else None
        ),
    )
    host = PluginHost.from_modules([("core", core), _plugin("limits", spec)])
    dag = _dag(plain_hosts=("limited.example.com", "plain.example.com"))
    limited = dag.listeners[HTTP].virtual_hosts["limited.example.com"]
    limited.attachments = limited.attachments.set(VHOST_TAG, Tag("host"))
    (key, route), *_ = limited.routes.items()
    limited.routes[key] = attrs.evolve(route, attachments=route.attachments.set(VHOST_TAG, Tag("route")))
    (config,) = _translate(host, dag)[1].values()
    vhosts = {v.domains[0]: v for v in config.virtual_hosts}
    assert not vhosts["plain.example.com"].rate_limits
    assert not vhosts["plain.example.com"].routes[0].route.rate_limits
    (host_limit,) = vhosts["limited.example.com"].rate_limits
    assert host_limit.actions[0].generic_key.descriptor_value == "host"
    action = vhosts["limited.example.com"].routes[0].route
    assert action.cluster == cluster_name(Cluster(upstream=WEB))  # the rest of the action is kept
    (route_limit,) = action.rate_limits
    assert route_limit.actions[0].generic_key.descriptor_value == "route"


def test_filters_are_contributed_with_the_configuration() -> None:
    module = types.ModuleType("configured")

    @hookimpl
    def cpx_http_filters(config: Config) -> Iterator[HttpFilterSpec]:
        if config.option("configured_filter"):
            yield _filter("test.configured")

    module.cpx_http_filters = cpx_http_filters  # type: ignore[attr-defined]
    host = PluginHost.from_modules([("core", core), ("configured", module)])
    assert "test.configured" not in [s.name for s in host.http_filters()]  # the defaults before
    host.configure(Config(options={"configured_filter": True}))
    assert "test.configured" in [s.name for s in host.http_filters()]


# -- attachments ------------------------------------------------------------------------------------


def test_attachments_are_typed_immutable_and_hashable() -> None:
    empty = Attachments()
    one = empty.set(VHOST_TAG, Tag("a"))
    assert empty.get(VHOST_TAG) is None and len(empty) == 0 and VHOST_TAG not in empty
    assert one.get(VHOST_TAG) == Tag("a") and VHOST_TAG in one and list(one) == [VHOST_TAG]
    assert one.get(CLUSTER_TAG) is None
    both = one.set(CLUSTER_TAG, Tag("c"))
    # Equal contents are equal (and hash equal) whatever order they were set in.
    assert both == empty.set(CLUSTER_TAG, Tag("c")).set(VHOST_TAG, Tag("a"))
    assert hash(both) == hash(empty.set(CLUSTER_TAG, Tag("c")).set(VHOST_TAG, Tag("a")))
    assert one.set(VHOST_TAG, Tag("b")).get(VHOST_TAG) == Tag("b") and len(one.set(VHOST_TAG, Tag("b"))) == 1
    assert both.remove(CLUSTER_TAG) == one
    with pytest.raises(TypeError, match="attachment 'test/vhost' takes Tag, not str"):
        empty.set(VHOST_TAG, "a")  # type: ignore[misc]
    with pytest.raises(TypeError, match="unhashable"):
        empty.set(AttachmentKey("test/list", list), [1])


def test_cluster_attachments_change_neither_its_name_nor_its_cds_resource() -> None:
    plain = Cluster(upstream=WEB)
    tagged = attrs.evolve(plain, attachments=Attachments().set(CLUSTER_TAG, Tag("x")))
    assert tagged != plain
    assert cluster_name(tagged) == cluster_name(plain)
    assert cds_shape(tagged) == plain


def test_a_chain_level_config_reads_its_sni_hosts_attachments() -> None:
    # Per-host filters (external authorization, JWT) configure the SNI chain from its host's data.
    def tagged_chain(site: Any) -> header_mutation.HeaderMutation | None:
        tag = site.attachments.get(VHOST_TAG)
        if tag is None:
            return None
        return header_mutation.HeaderMutation(
            mutations=header_mutation.Mutations(request_mutations=[{"remove": tag.value}])
        )

    host = PluginHost.from_modules(
        [("core", core), _plugin("tags", HttpFilterSpec(name="test.chain", config=tagged_chain))]
    )
    dag = _dag("tagged.example.com", "plain.example.com", plain_hosts=("http.example.com",))
    vhost = dag.listeners[HTTPS].secure_virtual_hosts["tagged.example.com"]
    vhost.attachments = vhost.attachments.set(VHOST_TAG, Tag("x-chain"))
    managers = _managers(_translate(host, dag)[0])
    names = {name: [f.name for f in manager.http_filters] for name, manager in managers.items()}
    assert "test.chain" in names["tagged.example.com"]
    assert "test.chain" not in names["plain.example.com"] and "test.chain" not in names[HTTP]
    (chosen,) = [f for f in managers["tagged.example.com"].http_filters if f.name == "test.chain"]
    config = header_mutation.HeaderMutation()
    assert chosen.typed_config.Unpack(config)
    assert config.mutations.request_mutations[0].remove == "x-chain"

    # A listener's own attachments configure its plain HTTP chain (e.g. a global ext_authz).
    dag.listeners[HTTP].attachments = dag.listeners[HTTP].attachments.set(VHOST_TAG, Tag("x-listener"))
    managers = _managers(_translate(host, dag)[0])
    (chosen,) = [f for f in managers[HTTP].http_filters if f.name == "test.chain"]
    assert chosen.typed_config.Unpack(config)
    assert config.mutations.request_mutations[0].remove == "x-listener"
    assert "test.chain" not in [f.name for f in managers["plain.example.com"].http_filters]


def test_a_chain_level_config_reads_the_dags_attachments_on_every_chain() -> None:
    # A filter whose settings an object decides (the rate limit service's ExtensionService).
    def tagged_everywhere(site: Any) -> header_mutation.HeaderMutation | None:
        tag = site.dag_attachments.get(VHOST_TAG)
        if tag is None:
            return None
        return header_mutation.HeaderMutation(
            mutations=header_mutation.Mutations(request_mutations=[{"remove": tag.value}])
        )

    host = PluginHost.from_modules(
        [("core", core), _plugin("tags", HttpFilterSpec(name="test.dag", config=tagged_everywhere))]
    )

    def filters(tag: Tag | None) -> dict[str, list[str]]:
        dag = _dag("secure.example.com", plain_hosts=("http.example.com",), fallback=True)
        if tag is not None:
            dag.attachments = dag.attachments.set(VHOST_TAG, tag)
        managers = _managers(_translate(host, dag)[0])
        return {
            name: [
                header_mutation.HeaderMutation.FromString(f.typed_config.value)
                .mutations.request_mutations[0]
                .remove
                for f in manager.http_filters
                if f.name == "test.dag"
            ]
            for name, manager in managers.items()
        }

    assert filters(Tag("x-dag")) == {
        HTTP: ["x-dag"],
        "secure.example.com": ["x-dag"],
        "fallback-certificate": ["x-dag"],
    }
    assert filters(None) == {HTTP: [], "secure.example.com": [], "fallback-certificate": []}
