"""IngressProcessor: rules, paths, backends, default backend, annotations on routes, status."""

from __future__ import annotations

import logging
import types
from typing import Any

import pytest

from cpx import ObjectKey
from cpx.dag import (
    DAG,
    Cluster,
    Duration,
    Note,
    PathKind,
    PathMatch,
    RetryPolicy,
    Route,
    ServicePort,
    TimeoutPolicy,
)
from cpx_ingress.kinds import HTTP_LISTENER, HTTPS_LISTENER
from cpx_ingress.processor import IngressProcessor, path_match, validate_regex

KEY = ObjectKey("networking.k8s.io", "Ingress", "default", "web")
WEB_80 = ServicePort(namespace="default", name="web", port=80, port_name="http", target_port=80)


def http_routes(dag: DAG, host: str) -> dict[str, Route]:
    vhost = dag.listeners[HTTP_LISTENER].virtual_hosts[host]
    return {r.path.key(): r for r in vhost.routes.values()}


def notes(dag: DAG, key: ObjectKey = KEY) -> list[Note]:
    return dag.notes.get(key, [])


def test_prefix_rule_becomes_a_segment_prefix_route(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.ingress(rules=[k8s.rule("example.com", k8s.path("/foo/"))]),
    )
    assert list(dag.listeners) == [HTTP_LISTENER]  # nothing secure: ingress_https is pruned
    vhost = dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"]
    assert list(vhost.routes.values()) == [
        Route(
            path=PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/foo"),
            clusters=(Cluster(upstream=WEB_80),),
            origin=ObjectKey("networking.k8s.io", "Ingress", "default", "web"),
        )
    ]
    assert notes(dag) == []


@pytest.mark.parametrize(
    ("value", "path_type", "expected"),
    [
        ("/", "Prefix", PathMatch(kind=PathKind.PREFIX, value="/")),
        ("/foo", "Prefix", PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/foo")),
        ("/foo///", "Prefix", PathMatch(kind=PathKind.SEGMENT_PREFIX, value="/foo")),
        ("/foo/", "Exact", PathMatch(kind=PathKind.EXACT, value="/foo/")),
        ("/foo", "ImplementationSpecific", PathMatch(kind=PathKind.PREFIX, value="/foo")),
        ("/foo.bar", "ImplementationSpecific", PathMatch(kind=PathKind.PREFIX, value="/foo.bar")),
        ("/foo.*", "ImplementationSpecific", PathMatch(kind=PathKind.REGEX, value="/foo.*")),
        ("/v[12]/x", "ImplementationSpecific", PathMatch(kind=PathKind.REGEX, value="/v[12]/x")),
        ("/a+", "ImplementationSpecific", PathMatch(kind=PathKind.REGEX, value="/a+")),
        ("^/a", "ImplementationSpecific", PathMatch(kind=PathKind.REGEX, value="^/a")),
        ("/%2F", "ImplementationSpecific", PathMatch(kind=PathKind.REGEX, value="/%2F")),
    ],
)
def test_path_match(value: str, path_type: str, expected: PathMatch) -> None:
    assert path_match(value, path_type) == expected


def test_path_defaults_in_the_dag(build: Any, k8s: types.SimpleNamespace) -> None:
    """No path means "/", no pathType means ImplementationSpecific (string prefix)."""
    dag = build(k8s.service(), k8s.ingress(rules=[k8s.rule("example.com", k8s.path(None, path_type=None))]))
    assert list(http_routes(dag, "example.com")) == ["prefix:/"]


@pytest.mark.parametrize("pattern", ["/(?=api).*", "/(?!admin).*", r"/(a)\1*", "/[z-a]*", "/(*"])
def test_regexes_re2_rejects_are_dropped_with_a_note(
    build: Any, k8s: types.SimpleNamespace, pattern: str
) -> None:
    dag = build(
        k8s.service(),
        k8s.ingress(
            rules=[
                k8s.rule(
                    "example.com",
                    k8s.path("/ok", path_type="Exact"),
                    k8s.path(pattern, path_type="ImplementationSpecific"),
                )
            ]
        ),
    )
    # The bad path never reaches Envoy; the good one on the same rule is unaffected.
    assert list(http_routes(dag, "example.com")) == ["exact:/ok"]
    [note] = notes(dag)
    assert (note.type, note.reason, note.severity) == ("RouteError", "PathMatchConditionsNotValid", "error")
    assert note.message.startswith("spec.rules[0].http.paths[1]: invalid regex")
    assert pattern in note.message


def test_validate_regex_uses_re2_not_python_re() -> None:
    validate_regex("/foo/[0-9]+")
    with pytest.raises(ValueError, match="invalid regex"):
        validate_regex("/(?<=x)y")  # Python's re accepts look-behind; RE2 does not


def test_empty_host_is_the_wildcard_vhost_on_http_only(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(rules=[k8s.rule(None, k8s.path("/"))], tls=[{"hosts": ["*"], "secretName": "tls"}]),
    )
    assert list(dag.listeners[HTTP_LISTENER].virtual_hosts) == ["*"]
    assert HTTPS_LISTENER not in dag.listeners


def test_wildcard_host_gets_its_own_vhost(build: Any, k8s: types.SimpleNamespace) -> None:
    """The one-label `:authority` restriction is added by the core's route translation."""
    dag = build(k8s.service(), k8s.ingress(rules=[k8s.rule("*.example.com", k8s.path("/"))]))
    [route] = http_routes(dag, "*.example.com").values()
    assert route.headers == ()


def test_exact_host_has_no_header_match(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(k8s.service(), k8s.ingress(rules=[k8s.rule("example.com")]))
    [route] = http_routes(dag, "example.com").values()
    assert route.headers == ()


def test_service_port_by_name_and_by_number(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(ports=[("http", 80), ("admin", 8080)]),
        k8s.ingress(
            rules=[
                k8s.rule("example.com", k8s.path("/by-name", port="admin"), k8s.path("/by-number", port=8080))
            ]
        ),
    )
    routes = http_routes(dag, "example.com")
    expected = ServicePort(namespace="default", name="web", port=8080, port_name="admin", target_port=8080)
    assert routes["segment_prefix:/by-name"].clusters == (Cluster(upstream=expected),)
    assert routes["segment_prefix:/by-number"].clusters == (Cluster(upstream=expected),)


def test_service_annotations_reach_the_cluster(build: Any, k8s: types.SimpleNamespace) -> None:
    svc = k8s.service(
        annotations={
            "projectcontour.io/max-connections": "7",
            "projectcontour.io/upstream-protocol.h2c": "http",
        }
    )
    dag = build(svc, k8s.ingress(rules=[k8s.rule("example.com")]))
    [route] = http_routes(dag, "example.com").values()
    upstream = route.clusters[0].upstream
    assert upstream.protocol.value == "h2c"
    assert upstream.circuit_breakers.max_connections == 7


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ([], 'service "default/web" not found'),
        ([("other", 81)], 'port "80" on service "default/web" not matched'),
    ],
)
def test_unresolvable_backend_answers_503_without_breaking_other_routes(
    build: Any, k8s: types.SimpleNamespace, objects: list[tuple[str, int]], message: str
) -> None:
    services = [k8s.service(ports=objects)] if objects else []
    dag = build(
        *services,
        k8s.service("api"),
        k8s.ingress(rules=[k8s.rule("example.com", k8s.path("/broken"), k8s.path("/api", service="api"))]),
    )
    routes = http_routes(dag, "example.com")
    assert routes["segment_prefix:/broken"].clusters == ()  # Route without clusters: Envoy answers 503
    assert routes["segment_prefix:/api"].clusters[0].upstream.name == "api"
    [note] = notes(dag)
    assert (note.type, note.reason) == ("ServiceError", "ServiceUnresolvedReference")
    assert note.message.startswith("spec.rules[0].http.paths[0].backend.service:")
    assert message in note.message


def test_missing_port_name_answers_503(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(k8s.service(), k8s.ingress(rules=[k8s.rule("example.com", k8s.path("/", port="grpc"))]))
    [route] = http_routes(dag, "example.com").values()
    assert route.clusters == ()
    assert 'port "grpc"' in notes(dag)[0].message


def test_resource_backend_is_unsupported(build: Any, k8s: types.SimpleNamespace) -> None:
    bucket = {"backend": {"resource": {"apiGroup": "k8s.example.com", "kind": "Bucket", "name": "b"}}}
    dag = build(k8s.ingress(rules=[{"host": "example.com", "http": {"paths": [{"path": "/", **bucket}]}}]))
    [route] = http_routes(dag, "example.com").values()
    assert route.clusters == ()
    [note] = notes(dag)
    assert (note.type, note.reason) == ("ServiceError", "UnsupportedBackend")
    assert note.message.startswith("spec.rules[0].http.paths[0].backend:")


def test_default_backend_is_a_synthetic_first_rule(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.service("other"),
        k8s.ingress(
            default_backend=k8s.backend(), rules=[k8s.rule("example.com", k8s.path("/", service="other"))]
        ),
    )
    [route] = http_routes(dag, "*").values()
    assert route.path == PathMatch(kind=PathKind.PREFIX, value="/")
    assert route.clusters == (Cluster(upstream=WEB_80),)
    assert http_routes(dag, "example.com")["prefix:/"].clusters[0].upstream.name == "other"


def test_later_rule_overrides_the_default_backend(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.service("other"),
        k8s.ingress(default_backend=k8s.backend(), rules=[k8s.rule(None, k8s.path("/", service="other"))]),
    )
    [route] = http_routes(dag, "*").values()
    assert route.clusters[0].upstream.name == "other"


def test_default_backend_problems_name_the_field(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(k8s.ingress(default_backend=k8s.backend("missing")))
    assert notes(dag)[0].message.startswith("spec.defaultBackend.service:")


def test_identical_matches_from_a_later_ingress_win(build: Any, k8s: types.SimpleNamespace) -> None:
    """Ingresses are processed in namespace/name order; a later identical route replaces one."""
    dag = build(
        k8s.service("a"),
        k8s.service("b"),
        k8s.ingress("a", rules=[k8s.rule("example.com", k8s.path("/", service="a"))]),
        k8s.ingress("b", rules=[k8s.rule("example.com", k8s.path("/", service="b"))]),
    )
    [route] = http_routes(dag, "example.com").values()
    assert (route.clusters[0].upstream.name, str(route.origin)) == ("b", "Ingress default/b")


def test_annotations_apply_to_every_route(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.ingress(
            annotations={
                "projectcontour.io/response-timeout": "1m30s",
                "projectcontour.io/retry-on": "5xx,gateway-error",
                "projectcontour.io/num-retries": "3",
                "projectcontour.io/per-try-timeout": "500ms",
                "projectcontour.io/websocket-routes": "/ws , /chat",
            },
            rules=[
                k8s.rule(
                    "example.com", k8s.path("/ws"), k8s.path("/api"), k8s.path("/chat/", path_type="Exact")
                )
            ],
        ),
    )
    routes = http_routes(dag, "example.com")
    for route in routes.values():
        assert route.timeout_policy == TimeoutPolicy(response=Duration(seconds=90.0))
        assert route.retry_policy == RetryPolicy(
            retry_on="5xx,gateway-error", num_retries=3, per_try_timeout=Duration(seconds=0.5)
        )
    # Websockets on the route whose Ingress path equals a listed one (before any normalisation).
    assert routes["segment_prefix:/ws"].websocket
    assert not routes["segment_prefix:/api"].websocket
    assert not routes["exact:/chat/"].websocket
    assert notes(dag) == []


def test_infinite_timeout_and_disabled_retries(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.ingress(
            annotations={
                "projectcontour.io/request-timeout": "infinity",
                "projectcontour.io/retry-on": "reset",
                "projectcontour.io/num-retries": "-1",
            },
            rules=[k8s.rule("example.com")],
        ),
    )
    [route] = http_routes(dag, "example.com").values()
    assert route.timeout_policy.response == Duration(seconds=None)
    assert route.retry_policy == RetryPolicy(retry_on="reset", num_retries=0)


def test_bad_annotation_values_are_ignored_with_a_note(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.ingress(
            annotations={"projectcontour.io/response-timeout": "soon"}, rules=[k8s.rule("example.com")]
        ),
    )
    [route] = http_routes(dag, "example.com").values()
    assert route.timeout_policy == TimeoutPolicy()
    [note] = notes(dag)
    assert (note.type, note.reason, note.severity) == ("RouteError", "TimeoutPolicyNotValid", "warning")
    assert "projectcontour.io/response-timeout" in note.message


def test_status_load_balancer_for_every_ingress(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.ingress("a", rules=[k8s.rule("a.example.com")]),
        k8s.ingress("b", namespace="other", rules=[k8s.rule("b.example.com")]),  # its Service is missing
        options={"ingress_status_address": "192.0.2.10, lb.example.com"},
    )
    expected = {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}, {"hostname": "lb.example.com"}]}}
    assert dag.statuses == {
        ObjectKey("networking.k8s.io", "Ingress", "default", "a"): expected,
        ObjectKey("networking.k8s.io", "Ingress", "other", "b"): expected,
    }
    a, b = dag.statuses.values()
    assert a is not b  # each Ingress owns its status dict


def test_no_status_without_a_status_address(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(k8s.service(), k8s.ingress(rules=[k8s.rule("example.com")]))
    assert dag.statuses == {}


def test_unsupported_annotations_are_logged_once(
    build: Any, k8s: types.SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    processor = IngressProcessor()
    annotations = {"projectcontour.io/nonsense": "x", "ingress.kubernetes.io/rewrite-target": "/"}
    objects = (k8s.service(), k8s.ingress(annotations=annotations, rules=[k8s.rule("example.com")]))
    with caplog.at_level(logging.WARNING, logger="cpx.ingress"):
        first = build(*objects, processor=processor)
        build(*objects, processor=processor)
    messages = [r.getMessage() for r in caplog.records if r.name == "cpx.ingress"]
    prefix = "Ingress default/web: ignoring invalid or unsupported annotation"
    assert messages == [
        f"{prefix} ingress.kubernetes.io/rewrite-target",
        f"{prefix} projectcontour.io/nonsense",
    ]
    assert notes(first) == []  # logged only: these never make the Ingress look broken


def test_processor_keeps_no_build_state(build: Any, k8s: types.SimpleNamespace) -> None:
    processor = IngressProcessor()
    objects = (
        k8s.service(),
        k8s.ingress(rules=[k8s.rule("example.com", k8s.path("/(?=x).*", path_type=None))]),
    )
    first, second = build(*objects, processor=processor), build(*objects, processor=processor)
    assert first.notes == second.notes and len(notes(second)) == 1
    assert not hasattr(processor, "dag") and not hasattr(processor, "source")


def test_malformed_spec_never_crashes_the_build(build: Any, k8s: types.SimpleNamespace) -> None:
    bad = k8s.ingress(rules=[{"host": "example.com", "http": {"paths": "nope"}}, "junk"], tls=["junk"])
    bad["spec"]["rules"].append(
        {"host": "ok.example.com", "http": {"paths": [{"path": "/", "pathType": "Sideways", **k8s.path()}]}}
    )
    bad["spec"]["rules"][-1]["http"]["paths"][0]["pathType"] = "Sideways"
    dag = build(k8s.service(), bad)
    assert HTTP_LISTENER not in dag.listeners
    [note] = notes(dag)
    assert 'unsupported pathType "Sideways"' in note.message
