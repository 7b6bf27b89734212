"""The Ingress processor's memo: what a build replays must equal what a fresh processor computes.

One processor is kept across builds of one source cache while objects change; after each step
its DAG is compared with the DAG of a brand-new processor (a full recomputation) on the same
source, and the cases the memo must get right are also checked directly: a changed Service or
Secret, a deleted Ingress, overwrite order of identical matches, references kept registered.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from cpx import Config, KubeObject, ObjectKey, Processor, SourceView
from cpx.dag import DAG, HeadersPolicy, HeaderValue, PathKind, PathMatch, Route, Secret
from cpx.testing import Builder, ExternalNamePolicy, ListenerProcessor, ObjectFault, Resolver, SourceCache
from cpx_ingress import processor as module
from cpx_ingress.kinds import HTTP_LISTENER, HTTPS_LISTENER
from cpx_ingress.processor import IngressProcessor

TLS = [{"hosts": ["secure.example.com"], "secretName": "tls"}]


def view(dag: DAG) -> dict[str, Any]:
    """Everything the Ingress processor decides, in comparable form."""
    out: dict[str, Any] = {"notes": dag.notes, "statuses": dag.statuses}
    for name, listener in dag.listeners.items():
        out[name] = {
            "http": {h: (list(v.routes), dict(v.routes)) for h, v in listener.virtual_hosts.items()},
            "https": {
                h: (v.secret, v.tls, list(v.routes), dict(v.routes))
                for h, v in listener.secure_virtual_hosts.items()
            },
        }
    return out


class Incremental:
    """A source cache and one long-lived processor, checked against a fresh one on every build."""

    def __init__(self, options: dict[str, Any] | None = None, policy: Any = None) -> None:
        self.config = Config(options=options or {})
        self.source = SourceCache(secret_policy=policy) if policy else SourceCache()
        self.processor = IngressProcessor.from_config(self.config)

    def apply(self, *objects: KubeObject, remove: tuple[KubeObject, ...] = ()) -> DAG:
        for obj in objects:
            self.source.insert(obj)
        for obj in remove:
            self.source.remove(obj)
        return self.build()

    def build(self) -> DAG:
        listeners = ("listeners", ListenerProcessor(self.config))
        dag = Builder([listeners, ("ingress", self.processor)]).build(self.source)
        references = service_and_secret_references(self.source)
        fresh_processor = IngressProcessor.from_config(self.config)
        fresh = Builder([listeners, ("ingress", fresh_processor)]).build(self.source)
        assert view(dag) == view(fresh)
        # The replayed build registers the same references as a full one.
        assert references == service_and_secret_references(self.source)
        return dag


def service_and_secret_references(source: SourceCache) -> set[ObjectKey]:
    """The Services and Secrets the last build read: their changes trigger the next rebuild."""
    return {key for key in source.references() if key.kind in ("Service", "Secret") and not key.group}


def routes(dag: DAG, host: str, listener: str = HTTP_LISTENER) -> dict[str, Any]:
    vhosts = dag.listeners[listener].virtual_hosts if listener == HTTP_LISTENER else None
    if vhosts is None:
        return dict(dag.listeners[listener].secure_virtual_hosts[host].routes)
    return dict(vhosts[host].routes)


def with_version(obj: KubeObject, version: str) -> KubeObject:
    obj["metadata"]["resourceVersion"] = version
    return obj


def test_a_changed_service_reaches_the_routes_that_use_it(k8s: types.SimpleNamespace) -> None:
    inc = Incremental()
    ingress = k8s.ingress(rules=[k8s.rule("example.com", k8s.path("/", port="http"))])
    dag = inc.apply(ingress)
    [route] = routes(dag, "example.com").values()
    assert route.clusters == () and "not found" in dag.notes[ObjectKey.of(ingress)][0].message
    # The Service appears: the unchanged Ingress now resolves it.
    dag = inc.apply(k8s.service(ports=[("http", 80)]))
    [route] = routes(dag, "example.com").values()
    assert route.clusters[0].upstream.port == 80 and dag.notes == {}
    # The Service's port changes: the route follows, without the Ingress changing.
    dag = inc.apply(k8s.service(ports=[("http", 8080)]))
    [route] = routes(dag, "example.com").values()
    assert route.clusters[0].upstream.port == 8080
    # The Service goes away: 503 again.
    dag = inc.apply(remove=(k8s.service(),))
    [route] = routes(dag, "example.com").values()
    assert route.clusters == ()


def test_an_unrelated_service_change_replays_the_same_route_objects(k8s: types.SimpleNamespace) -> None:
    inc = Incremental()
    dag = inc.apply(k8s.service(), k8s.ingress(rules=[k8s.rule("example.com")]))
    [before] = routes(dag, "example.com").values()
    dag = inc.apply(k8s.service(name="other"))
    [after] = routes(dag, "example.com").values()
    assert after is before  # replayed, not recomputed: caches downstream hit by identity


def test_a_changed_secret_reaches_the_secure_vhost(k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    inc = Incremental()
    ingress = k8s.ingress(rules=[k8s.rule("secure.example.com")], tls=TLS)
    dag = inc.apply(k8s.service(), ingress, tls_secret(matching=False))
    assert HTTPS_LISTENER not in dag.listeners
    assert dag.notes[ObjectKey.of(ingress)][0].type == "TLSError"
    dag = inc.apply(tls_secret())
    svhost = dag.listeners[HTTPS_LISTENER].secure_virtual_hosts["secure.example.com"]
    assert svhost.secret is not None and svhost.routes and dag.notes == {}
    dag = inc.apply(remove=(tls_secret(),))
    assert HTTPS_LISTENER not in dag.listeners


def test_a_deleted_ingress_disappears(k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    inc = Incremental(options={"ingress_status_address": "192.0.2.1"})
    a = k8s.ingress("a", rules=[k8s.rule("example.com", k8s.path("/a")), k8s.rule("a.example.com")])
    b = k8s.ingress("b", rules=[k8s.rule("example.com", k8s.path("/b", service="missing"))])
    dag = inc.apply(k8s.service(), tls_secret(), a, b)
    assert len(routes(dag, "example.com")) == 2 and ObjectKey.of(b) in dag.notes
    assert set(dag.statuses) == {ObjectKey.of(a), ObjectKey.of(b)}
    dag = inc.apply(remove=(b,))
    assert list(routes(dag, "example.com")) == ["segment_prefix:/a"]
    assert dag.notes == {} and set(dag.statuses) == {ObjectKey.of(a)}
    dag = inc.apply(remove=(a,))
    assert HTTP_LISTENER not in dag.listeners and dag.statuses == {}


def test_identical_matches_keep_contour_overwrite_order(k8s: types.SimpleNamespace) -> None:
    inc = Incremental()
    first = k8s.ingress("a", rules=[k8s.rule("example.com", k8s.path("/", service="one"))])
    second = k8s.ingress("b", rules=[k8s.rule("example.com", k8s.path("/", service="two"))])
    one, two = k8s.service("one"), k8s.service("two")

    def winner(dag: DAG) -> str:
        [route] = routes(dag, "example.com").values()
        return str(route.clusters[0].upstream.name)

    assert winner(inc.apply(one, two, first, second)) == "two"  # the later Ingress by name wins
    # Changing the earlier Ingress does not make it the later one.
    first = copy.deepcopy(first)  # a new object, as a watch or a re-read file delivers
    first["metadata"]["annotations"] = {"projectcontour.io/response-timeout": "5s"}
    assert winner(inc.apply(first)) == "two"
    assert winner(inc.apply(remove=(second,))) == "one"
    assert winner(inc.apply(second)) == "two"


def test_last_tls_entry_for_a_host_wins(k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    inc = Incremental()
    a = k8s.ingress(
        "a",
        rules=[k8s.rule("secure.example.com")],
        tls=TLS,
        annotations={"projectcontour.io/tls-minimum-protocol-version": "1.3"},
    )
    other_tls = [{**TLS[0], "secretName": "other"}]
    b = k8s.ingress("b", rules=[k8s.rule("secure.example.com", k8s.path("/b"))], tls=other_tls)
    dag = inc.apply(k8s.service(), tls_secret(), tls_secret("other"), a, b)
    svhost = dag.listeners[HTTPS_LISTENER].secure_virtual_hosts["secure.example.com"]
    assert svhost.secret is not None and svhost.secret.name == "other" and svhost.tls.min_version == "1.2"
    dag = inc.apply(remove=(b,))
    svhost = dag.listeners[HTTPS_LISTENER].secure_virtual_hosts["secure.example.com"]
    assert svhost.secret is not None and svhost.secret.name == "tls" and svhost.tls.min_version == "1.3"


def test_references_stay_registered_when_replayed(k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    inc = Incremental()
    inc.apply(k8s.service(), tls_secret(), k8s.ingress(rules=[k8s.rule("secure.example.com")], tls=TLS))
    inc.build()  # nothing changed: everything replayed
    # So a change to either still asks for a rebuild.
    assert inc.source.insert(k8s.service(ports=[("http", 81)])) is True
    assert inc.source.insert(with_version(tls_secret(matching=False), "2")) is True
    assert inc.source.insert(k8s.service(name="unused")) is False


def test_cross_namespace_secrets_follow_the_policy_on_every_build(
    k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    allowed: set[str] = set()

    def policy(namespace: str, name: str, referrer: ObjectKey, source: SourceView) -> bool:
        return namespace == referrer.namespace or referrer.namespace in allowed

    inc = Incremental(policy=policy)
    ingress = k8s.ingress(
        rules=[k8s.rule("secure.example.com")],
        tls=TLS,
        annotations={"projectcontour.io/tls-cert-namespace": "certs"},
    )
    dag = inc.apply(k8s.service(), tls_secret(namespace="certs"), ingress)
    assert HTTPS_LISTENER not in dag.listeners
    allowed.add("default")  # e.g. a delegation appeared: nothing in the change log says so
    dag = inc.build()
    assert "secure.example.com" in dag.listeners[HTTPS_LISTENER].secure_virtual_hosts


def test_a_failing_build_leaves_no_half_applied_memo(
    k8s: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    inc = Incremental()
    inc.apply(k8s.service(), k8s.ingress("a", rules=[k8s.rule("a.example.com")]))
    original: Callable[..., Any] = module._IngressBuild.routes
    monkeypatch.setattr(module._IngressBuild, "routes", lambda self: 1 / 0)
    inc.source.insert(k8s.ingress("b", rules=[k8s.rule("b.example.com")]))
    with pytest.raises(ObjectFault, match="ZeroDivisionError") as raised:
        Builder([("listeners", ListenerProcessor(inc.config)), ("ingress", inc.processor)]).build(inc.source)
    assert str(raised.value.key) == "Ingress default/b"  # blamed on the Ingress being translated
    monkeypatch.setattr(module._IngressBuild, "routes", original)
    dag = inc.build()
    assert sorted(dag.listeners[HTTP_LISTENER].virtual_hosts) == ["a.example.com", "b.example.com"]


def test_many_steps_match_a_full_recomputation(k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    """A longer mixed sequence: every intermediate DAG equals a from-scratch build."""
    inc = Incremental(options={"ingress_status_address": "lb.example.com"})
    hosts = ["a.example.com", "b.example.com", "secure.example.com", None]
    ingresses = []
    for i in range(8):
        host = hosts[i % len(hosts)]
        paths = [k8s.path(f"/p{i % 3}", service=f"s{i % 3}"), k8s.path("/", service="s0")]
        annotations = {"ingress.kubernetes.io/force-ssl-redirect": "true"} if i % 4 == 2 else None
        tls = TLS if i % 2 else ()
        rules = [k8s.rule(host, *paths)]
        ingresses.append(k8s.ingress(f"i{i}", rules=rules, tls=tls, annotations=annotations))
    inc.apply(*ingresses)
    inc.apply(k8s.service("s0"), k8s.service("s1"))
    inc.apply(tls_secret())
    inc.apply(k8s.service("s2", ports=[("http", 80), ("admin", 9000)]))
    changed = copy.deepcopy(ingresses[3])
    changed["spec"]["rules"][0]["host"] = "moved.example.com"
    inc.apply(changed)
    inc.apply(remove=(ingresses[0], k8s.service("s1")))
    inc.apply(k8s.ingress("i0", rules=[k8s.rule("a.example.com", k8s.path("/p0", service="s1"))]))
    inc.apply(k8s.service("s1"))
    inc.apply(remove=(tls_secret(),))
    inc.apply(remove=tuple(ingresses[1:]))


class EarlierRoutes:
    """A processor running before Ingress that already fills the host Ingress also uses."""

    def __init__(self, secret: Any) -> None:
        self.secret = secret

    def run(self, dag: DAG, source: SourceView) -> None:
        vhost = dag.ensure_virtual_host(HTTP_LISTENER, "example.com")
        vhost.add_route(
            Route(
                path=PathMatch(kind=PathKind.PREFIX, value="/"),
                origin=ObjectKey("", "Earlier", "default", "earlier"),
            )
        )
        vhost.add_route(
            Route(
                path=PathMatch(kind=PathKind.PREFIX, value="/keep"),
                origin=ObjectKey("", "Earlier", "default", "earlier"),
            )
        )
        svhost = dag.ensure_secure_virtual_host(HTTPS_LISTENER, "example.com")
        svhost.secret = self.secret


class AddHeader:
    """A later processor that edits every route in place (like examples/plugins/response-header),
    through the DAG's accessor: the memo's frozen hosts are copied first."""

    def run(self, dag: DAG, source: SourceView) -> None:
        for vhost in dag.virtual_hosts():
            for key, route in list(vhost.routes.items()):
                policy = HeadersPolicy(set=(*route.response_headers.set, HeaderValue(name="x", value="y")))
                vhost.routes[key] = attrs.evolve(route, response_headers=policy)


def test_routes_merge_into_vhosts_of_an_earlier_processor(k8s: types.SimpleNamespace) -> None:
    secret = Secret(namespace="default", name="other", cert_pem=b"c", key_pem=b"k")
    inc = Incremental()
    inc.source.insert(k8s.service())
    inc.source.insert(k8s.ingress(rules=[k8s.rule("example.com", k8s.path("/"))]))
    processors: list[tuple[str, Processor]] = [
        ("listeners", ListenerProcessor(inc.config)),
        ("earlier", EarlierRoutes(secret)),
        ("ingress", inc.processor),
    ]
    for _ in range(2):  # the second build replays the memo
        dag = Builder(processors).build(inc.source)
        http = dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"].routes
        # The Ingress route with the same match replaces the earlier one, in its place.
        assert [(k, str(r.origin)) for k, r in http.items()] == [
            ("prefix:/", "Ingress default/web"),
            ("prefix:/keep", "Earlier default/earlier"),
        ]
        https = dag.listeners[HTTPS_LISTENER].secure_virtual_hosts["example.com"]
        # The earlier processor's secure vhost gets the Ingress route too (Contour's pass 2).
        assert https.secret == secret and [str(r.origin) for r in https.routes.values()] == [
            "Ingress default/web"
        ]


ALL_DECLARED = frozenset(("listeners", "ingress", "edit"))


def with_editor(
    k8s: types.SimpleNamespace, editor: Processor
) -> tuple[Incremental, list[tuple[str, Processor]]]:
    """One Ingress for example.com, and the processors: listeners, ingress, then ``editor``."""
    inc = Incremental()
    inc.source.insert(k8s.service())
    inc.source.insert(k8s.ingress(rules=[k8s.rule("example.com")]))
    return inc, [("listeners", ListenerProcessor(inc.config)), ("ingress", inc.processor), ("edit", editor)]


def test_later_processors_editing_routes_never_touch_the_memo(k8s: types.SimpleNamespace) -> None:
    inc, processors = with_editor(k8s, AddHeader())
    for _ in range(3):
        dag = Builder(processors, accessors_only=ALL_DECLARED).build(inc.source)
        [route] = dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"].routes.values()
        assert route.response_headers.set == (HeaderValue(name="x", value="y"),)


class EditBehindTheAccessors:
    """A later processor that edits a host it reached without the DAG's accessors."""

    def run(self, dag: DAG, source: SourceView) -> None:
        vhost = dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"]
        [key] = vhost.routes
        vhost.routes[key] = attrs.evolve(vhost.routes[key], websocket=True)


def test_a_host_the_memo_keeps_is_copied_for_processors_editing_behind_the_accessors(
    k8s: types.SimpleNamespace,
) -> None:
    inc, processors = with_editor(k8s, EditBehindTheAccessors())
    # Declared to use the accessors only: a frozen host it edits behind them refuses.
    with pytest.raises(TypeError, match="frozen"):
        Builder(processors, accessors_only=ALL_DECLARED).build(inc.source)
    # Not declared (a processor written before frozen hosts): it gets copies of every host.
    for _ in range(2):
        dag = Builder(processors).build(inc.source)
        [route] = dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"].routes.values()
        assert route.websocket
    dag = Builder(processors[:2]).build(inc.source)
    [route] = dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"].routes.values()
    assert not route.websocket  # the memo's host is as it was


def test_an_external_name_verdict_follows_dns_without_any_object_changing(k8s: types.SimpleNamespace) -> None:
    answers = {"api.example.com": ["192.0.2.10"]}
    inc = Incremental()
    # The core's --enable-external-name-service, with a resolver that re-resolves at every build.
    resolver = Resolver(lambda name: answers[name], ttl=0, negative_ttl=0)
    inc.source.external_names = ExternalNamePolicy(enabled=True, resolver=resolver)
    service = k8s.service(ports=[("http", 80)])
    service["spec"].update(type="ExternalName", externalName="api.example.com")
    dag = inc.apply(service, k8s.ingress(rules=[k8s.rule("example.com", k8s.path("/", port="http"))]))
    [route] = routes(dag, "example.com").values()
    assert route.clusters[0].upstream.external_name == "api.example.com"
    # The name now resolves to loopback: the next build refuses it, though nothing else changed.
    answers["api.example.com"] = ["127.0.0.1"]
    dag = inc.build()
    [route] = routes(dag, "example.com").values()
    assert route.clusters == ()
    [note] = next(iter(dag.notes.values()))
    assert '"api.example.com" resolves to 127.0.0.1' in note.message
