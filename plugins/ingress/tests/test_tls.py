"""TLS: secure virtual hosts, Secret problems, redirects, allow-http, delegation, TLS versions."""

from __future__ import annotations

import types
from typing import Any

import pytest

from cpx import ObjectKey, SourceView
from cpx.dag import DAG, Note, Route, SecureVirtualHost, TLSParams
from cpx_ingress.kinds import HTTP_LISTENER, HTTPS_LISTENER

KEY = ObjectKey("networking.k8s.io", "Ingress", "default", "web")
TLS = [{"hosts": ["secure.example.com"], "secretName": "tls"}]
WILDCARD_TLS = [{"hosts": ["*.example.com"], "secretName": "tls"}]


def secure(dag: DAG, host: str) -> SecureVirtualHost:
    return dag.listeners[HTTPS_LISTENER].secure_virtual_hosts[host]


def only_route(routes: dict[str, Route]) -> Route:
    [route] = routes.values()
    return route


def test_tls_host_gets_a_secure_vhost(build: Any, k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(rules=[k8s.rule("secure.example.com"), k8s.rule("plain.example.com")], tls=TLS),
    )
    svhost = secure(dag, "secure.example.com")
    assert svhost.secret is not None
    assert (svhost.secret.namespace, svhost.secret.name) == ("default", "tls")
    assert svhost.tls == TLSParams(min_version="1.2", max_version="1.3")
    assert list(dag.listeners[HTTPS_LISTENER].secure_virtual_hosts) == ["secure.example.com"]
    # HTTP keeps serving both hosts: the same route, proxying, on both listeners.
    http = dag.listeners[HTTP_LISTENER].virtual_hosts
    assert sorted(http) == ["plain.example.com", "secure.example.com"]
    assert only_route(http["secure.example.com"].routes) == only_route(svhost.routes)
    assert not only_route(svhost.routes).https_redirect
    assert dag.notes == {}


@pytest.mark.parametrize(
    ("secret_kwargs", "expected"),
    [
        (None, "Secret default/tls not found"),
        ({"type_": "Opaque"}, "is of type 'Opaque'"),
        ({"matching": False}, "tls.key does not match the certificate"),
    ],
)
def test_bad_secret_leaves_the_host_http_only(
    build: Any,
    k8s: types.SimpleNamespace,
    tls_secret: Any,
    secret_kwargs: dict[str, Any] | None,
    expected: str,
) -> None:
    secrets = [] if secret_kwargs is None else [tls_secret(**secret_kwargs)]
    dag = build(k8s.service(), *secrets, k8s.ingress(rules=[k8s.rule("secure.example.com")], tls=TLS))
    assert HTTPS_LISTENER not in dag.listeners
    assert "secure.example.com" in dag.listeners[HTTP_LISTENER].virtual_hosts
    [note] = dag.notes[KEY]
    assert (note.type, note.reason, note.severity) == ("TLSError", "SecretNotValid", "error")
    assert note.message.startswith("spec.tls[0].secretName: ")
    assert expected in note.message
    assert note.message.endswith("secure.example.com served over HTTP only")


def test_tls_entry_without_secret_name(build: Any, k8s: types.SimpleNamespace) -> None:
    dag = build(
        k8s.service(),
        k8s.ingress(rules=[k8s.rule("secure.example.com")], tls=[{"hosts": ["secure.example.com"]}]),
    )
    assert HTTPS_LISTENER not in dag.listeners
    assert dag.notes[KEY] == [
        Note(
            type="TLSError",
            reason="SecretNotValid",
            message="spec.tls[0]: no secretName; secure.example.com served over HTTP only",
        )
    ]


def test_one_bad_secret_does_not_affect_another_host(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(
            rules=[k8s.rule("secure.example.com"), k8s.rule("example.com")],
            tls=[{"hosts": ["example.com"], "secretName": "missing"}, *TLS],
        ),
    )
    assert list(dag.listeners[HTTPS_LISTENER].secure_virtual_hosts) == ["secure.example.com"]
    assert [n.message.split(":")[0] for n in dag.notes[KEY]] == ["spec.tls[0].secretName"]


def test_rule_host_must_match_a_tls_host_exactly(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(
            rules=[k8s.rule("other.example.com")], tls=[{"hosts": ["*.example.com"], "secretName": "tls"}]
        ),
    )
    # The wildcard TLS host has no rule of its own, so nothing is served over TLS.
    assert HTTPS_LISTENER not in dag.listeners


def test_wildcard_tls_host(build: Any, k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(
            rules=[k8s.rule("*.example.com")], tls=[{"hosts": ["*.example.com"], "secretName": "tls"}]
        ),
    )
    route = only_route(secure(dag, "*.example.com").routes)
    assert route.path.value == "/"


def test_tls_from_another_ingress_applies_to_the_same_host(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    """Contour: a secure vhost exists for the host, so every Ingress's routes for it go there too."""
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress("a", rules=[k8s.rule("secure.example.com", k8s.path("/a"))], tls=TLS),
        k8s.ingress("b", rules=[k8s.rule("secure.example.com", k8s.path("/b"))]),
    )
    paths = sorted(r.path.value for r in secure(dag, "secure.example.com").routes.values())
    assert paths == ["/a", "/b"]


def test_force_ssl_redirect(build: Any, k8s: types.SimpleNamespace, tls_secret: Any) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(
            annotations={"ingress.kubernetes.io/force-ssl-redirect": "true"},
            rules=[k8s.rule("secure.example.com")],
            tls=TLS,
        ),
    )
    http = only_route(dag.listeners[HTTP_LISTENER].virtual_hosts["secure.example.com"].routes)
    https = only_route(secure(dag, "secure.example.com").routes)
    assert http.https_redirect
    assert not https.https_redirect
    assert https.clusters == http.clusters and https.clusters


def test_allow_http_false_drops_the_http_routes(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(
            annotations={"kubernetes.io/ingress.allow-http": "false"},
            rules=[k8s.rule("secure.example.com")],
            tls=TLS,
        ),
    )
    assert HTTP_LISTENER not in dag.listeners
    assert not only_route(secure(dag, "secure.example.com").routes).https_redirect


def test_force_ssl_redirect_wins_over_allow_http_false(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(
            annotations={
                "kubernetes.io/ingress.allow-http": "false",
                "ingress.kubernetes.io/force-ssl-redirect": "true",
            },
            rules=[k8s.rule("secure.example.com")],
            tls=TLS,
        ),
    )
    assert only_route(dag.listeners[HTTP_LISTENER].virtual_hosts["secure.example.com"].routes).https_redirect


def test_default_backend_is_never_served_over_tls(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    dag = build(k8s.service(), tls_secret(), k8s.ingress(default_backend=k8s.backend(), tls=TLS))
    assert list(dag.listeners[HTTP_LISTENER].virtual_hosts) == ["*"]
    assert HTTPS_LISTENER not in dag.listeners


CROSS_NS = {"projectcontour.io/tls-cert-namespace": "certs"}


def test_cross_namespace_secret_is_denied_by_default(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    dag = build(
        k8s.service(),
        tls_secret(namespace="certs"),
        k8s.ingress(annotations=CROSS_NS, rules=[k8s.rule("secure.example.com")], tls=TLS),
    )
    assert HTTPS_LISTENER not in dag.listeners
    [note] = dag.notes[KEY]
    assert (note.type, note.reason) == ("TLSError", "DelegationNotPermitted")
    assert "certs/tls" in note.message


def test_cross_namespace_secret_allowed_by_the_policy(
    build: Any, k8s: types.SimpleNamespace, tls_secret: Any
) -> None:
    asked: list[tuple[str, str, ObjectKey]] = []

    def delegated(namespace: str, name: str, referrer: ObjectKey, source: SourceView) -> bool:
        asked.append((namespace, name, referrer))
        return namespace == "certs"

    dag = build(
        k8s.service(),
        tls_secret(namespace="certs"),
        k8s.ingress(annotations=CROSS_NS, rules=[k8s.rule("secure.example.com")], tls=TLS),
        secret_policy=delegated,
    )
    svhost = secure(dag, "secure.example.com")
    assert svhost.secret is not None and svhost.secret.ref == "certs/tls"
    assert asked == [("certs", "tls", KEY)]


@pytest.mark.parametrize(
    ("annotations", "outcome"),
    [
        ({"projectcontour.io/tls-minimum-protocol-version": "1.3"}, (("1.3", "1.3"), None)),
        ({"projectcontour.io/tls-maximum-protocol-version": "1.2"}, (("1.2", "1.2"), None)),
        ({"projectcontour.io/tls-minimum-protocol-version": "1.1"}, (("1.2", "1.3"), "'1.1' is not one of")),
        (
            {
                "projectcontour.io/tls-minimum-protocol-version": "1.3",
                "projectcontour.io/tls-maximum-protocol-version": "1.2",
            },
            (("1.2", "1.3"), "above maximum version"),
        ),
    ],
)
def test_tls_protocol_versions(
    build: Any,
    k8s: types.SimpleNamespace,
    tls_secret: Any,
    annotations: dict[str, str],
    outcome: tuple[tuple[str, str], str | None],
) -> None:
    expected, problem = outcome
    dag = build(
        k8s.service(),
        tls_secret(),
        k8s.ingress(annotations=annotations, rules=[k8s.rule("secure.example.com")], tls=TLS),
    )
    tls = secure(dag, "secure.example.com").tls
    assert (tls.min_version, tls.max_version) == expected
    assert tls == TLSParams(min_version=expected[0], max_version=expected[1])  # only the versions
    found = dag.notes.get(KEY, [])
    if problem is None:
        assert found == []
    else:
        [note] = found
        assert (note.type, note.reason, note.severity) == ("TLSError", "TLSConfigNotValid", "warning")
        assert problem in note.message
