"""HTTPProxyProcessor: roots, includes, conditions, TLS, TCP proxying, orphans and status.

Each test builds a DAG from HTTPProxies, Services and Secrets with the core's static listeners and
this processor, then checks what is served and the exact status Contour would write.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from cpx import (
    Config,
    KubeObject,
    ObjectKey,
    SourceView,
    WatchSpec,
    fixed_clock,
    ingress_class_accepts,
)
from cpx.dag import (
    DAG,
    ClientCertificateDetails,
    DirectResponse,
    HeaderMatch,
    HeaderMatchKind,
    Note,
    PathKind,
    PathMatch,
    QueryMatch,
    QueryMatchKind,
    Route,
    SecureVirtualHost,
    TCPProxy,
)
from cpx.testing import (
    Builder,
    ListenerProcessor,
    SecretPolicy,
    SourceCache,
    default_ca,
    make_ca_secret,
    make_crl,
    make_crl_secret,
    make_tls_secret,
    same_namespace_only,
)

from cpx_httpproxy.kinds import HTTP_LISTENER, HTTPPROXY, HTTPS_LISTENER
from cpx_httpproxy.processor import HTTPProxyProcessor

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
NOW_TEXT = "2026-01-02T03:04:05Z"


# -- objects ----------------------------------------------------------------------------------------


def httpproxy(  # noqa: PLR0913  (why: a builder: one keyword per field)
    name: str = "root",
    namespace: str = "default",
    *,
    fqdn: str | None = "example.com",
    routes: Iterable[Mapping[str, Any]] = (),
    includes: Iterable[Mapping[str, Any]] = (),
    tls: Mapping[str, Any] | None = None,
    tcpproxy: Mapping[str, Any] | None = None,
    vhost: Mapping[str, Any] | None = None,
    generation: int = 1,
    current_status: Mapping[str, Any] | None = None,
) -> KubeObject:
    """A root when ``fqdn`` is not None (extra virtualhost fields in ``vhost``), else a child."""
    spec: dict[str, Any] = {}
    if fqdn is not None:
        spec["virtualhost"] = {"fqdn": fqdn, **(vhost or {})}
        if tls is not None:
            spec["virtualhost"]["tls"] = dict(tls)
    if routes:
        spec["routes"] = [dict(r) for r in routes]
    if includes:
        spec["includes"] = [dict(i) for i in includes]
    if tcpproxy is not None:
        spec["tcpproxy"] = dict(tcpproxy)
    obj: KubeObject = {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": spec,
    }
    if current_status is not None:
        obj["status"] = dict(current_status)
    return obj


def child(name: str, namespace: str = "default", **kwargs: Any) -> KubeObject:
    return httpproxy(name, namespace, fqdn=None, **kwargs)


def route(*conditions: Mapping[str, Any], services: Iterable[str] = ("web",), **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(extra)
    if conditions:
        out["conditions"] = [dict(c) for c in conditions]
    if services and "directResponsePolicy" not in extra and "requestRedirectPolicy" not in extra:
        out["services"] = [{"name": s, "port": 80} for s in services]
    return out


def include(name: str, namespace: str | None = None, *conditions: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if namespace is not None:
        out["namespace"] = namespace
    if conditions:
        out["conditions"] = [dict(c) for c in conditions]
    return out


def prefix(value: str) -> dict[str, Any]:
    return {"prefix": value}


def header(name: str, **match: Any) -> dict[str, Any]:
    return {"header": {"name": name, **match}}


def query(name: str, **match: Any) -> dict[str, Any]:
    return {"queryParameter": {"name": name, **match}}


def service(name: str = "web", namespace: str = "default", port: int = 80) -> KubeObject:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": port, "protocol": "TCP", "targetPort": port}]},
    }


@functools.cache
def _tls_secret_template() -> dict[str, Any]:
    secret, _ca = make_tls_secret("default", "tls", ["example.com", "*.example.com"])
    return secret


def tls_secret(name: str = "tls", namespace: str = "default") -> KubeObject:
    secret = copy.deepcopy(_tls_secret_template())
    secret["metadata"] = {"name": name, "namespace": namespace}
    return secret


def key(name: str = "root", namespace: str = "default") -> ObjectKey:
    return ObjectKey("projectcontour.io", "HTTPProxy", namespace, name)


# -- building ---------------------------------------------------------------------------------------


def build(
    *objects: KubeObject,
    options: Mapping[str, Any] | None = None,
    secret_policy: SecretPolicy = same_namespace_only,
) -> DAG:
    config = Config(options=dict(options or {}))
    watch = WatchSpec(gvk=HTTPPROXY, accept=ingress_class_accepts)
    source = SourceCache(watches={HTTPPROXY.group_kind: watch}, secret_policy=secret_policy)
    for obj in objects:
        if ObjectKey.of(obj).group_kind == HTTPPROXY.group_kind and not ingress_class_accepts(obj, config):
            continue
        source.insert(obj)
    processor = HTTPProxyProcessor.from_config(config)
    processor.clock = fixed_clock(NOW)
    return Builder([("listeners", ListenerProcessor(config)), ("httpproxy", processor)]).build(source)


def allow_all(secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView) -> bool:
    return True


def http_routes(dag: DAG, host: str = "example.com") -> dict[str, Route]:
    listener = dag.listeners.get(HTTP_LISTENER)
    vhost = listener.virtual_hosts.get(host) if listener else None
    return {r.match_key(): r for r in vhost.routes.values()} if vhost else {}


def secure_vhost(dag: DAG, host: str = "example.com") -> SecureVirtualHost | None:
    listener = dag.listeners.get(HTTPS_LISTENER)
    return listener.secure_virtual_hosts.get(host) if listener else None


def https_routes(dag: DAG, host: str = "example.com") -> dict[str, Route]:
    vhost = secure_vhost(dag, host)
    return {r.match_key(): r for r in vhost.routes.values()} if vhost else {}


def paths(routes: Mapping[str, Route]) -> list[str]:
    return sorted(routes)


def errors(dag: DAG, obj_key: ObjectKey | None = None) -> list[tuple[str, str, str]]:
    condition = dag.statuses[obj_key or key()]["conditions"][0]
    return [(e["type"], e["reason"], e["message"]) for e in condition.get("errors", [])]


def warnings(dag: DAG, obj_key: ObjectKey | None = None) -> list[tuple[str, str, str]]:
    condition = dag.statuses[obj_key or key()]["conditions"][0]
    return [(e["type"], e["reason"], e["message"]) for e in condition.get("warnings", [])]


def current(dag: DAG, obj_key: ObjectKey | None = None) -> str:
    return str(dag.statuses[obj_key or key()]["currentStatus"])


def upstreams(r: Route | TCPProxy) -> list[str]:
    return [f"{c.upstream.namespace}/{c.upstream.name}" for c in r.clusters]


P = "prefix:"


# -- a simple root ------------------------------------------------------------------------------------


def test_root_with_one_route_is_served_and_valid() -> None:
    dag = build(service(), httpproxy(routes=[route(prefix("/"))]))
    routes = http_routes(dag)
    assert list(routes) == [P + "/"]
    r = routes[P + "/"]
    assert r.path == PathMatch(kind=PathKind.PREFIX, value="/")
    assert upstreams(r) == ["default/web"]
    assert not r.https_redirect
    assert str(r.origin) == "HTTPProxy default/root"
    assert HTTPS_LISTENER not in dag.listeners  # nothing secure: pruned
    assert dag.statuses[key()] == {
        "currentStatus": "valid",
        "description": "Valid HTTPProxy",
        "conditions": [
            {
                "type": "Valid",
                "status": "True",
                "reason": "Valid",
                "message": "Valid HTTPProxy",
                "observedGeneration": 1,
                "lastTransitionTime": NOW_TEXT,
            }
        ],
    }
    assert dag.notes.get(key(), []) == []


def test_no_conditions_means_prefix_slash_and_plain_string_prefixes() -> None:
    dag = build(service(), httpproxy(routes=[route(), route(prefix("/foo"))]))
    assert paths(http_routes(dag)) == [P + "/", P + "/foo"]
    assert http_routes(dag)[P + "/foo"].path.kind is PathKind.PREFIX  # /foo matches /foobar


def test_previous_transition_time_is_kept() -> None:
    previous = {
        "currentStatus": "valid",
        "conditions": [{"type": "Valid", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}],
    }
    dag = build(service(), httpproxy(routes=[route()], current_status=previous, generation=4))
    condition = dag.statuses[key()]["conditions"][0]
    assert condition["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert condition["observedGeneration"] == 4


def test_wildcard_fqdn_gets_its_own_virtual_host() -> None:
    dag = build(service(), httpproxy(fqdn="*.example.com", routes=[route()]))
    assert paths(http_routes(dag, "*.example.com")) == [P + "/"]
    assert current(dag) == "valid"


def test_unresolved_service_answers_503_and_reports() -> None:
    dag = build(httpproxy(routes=[route(services=["nope"])]))
    r = http_routes(dag)[P + "/"]
    assert r.clusters == ()
    assert errors(dag) == [
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            'Spec.Routes unresolved service reference: service "default/nope" not found',
        )
    ]
    assert current(dag) == "invalid"
    assert dag.notes[key()] == [
        Note(
            type="ServiceError",
            reason="ServiceUnresolvedReference",
            message='Spec.Routes unresolved service reference: service "default/nope" not found',
        )
    ]


# -- root-level validation ------------------------------------------------------------------------------


def test_duplicate_fqdn_invalidates_every_claimant_case_insensitively() -> None:
    dag = build(
        service(),
        service(namespace="other"),
        httpproxy("a", routes=[route()], includes=[include("kid", None, prefix("/kid"))]),
        httpproxy("b", "other", fqdn="EXAMPLE.com", routes=[route()]),
        child("kid", routes=[route()]),
        httpproxy("c", fqdn="unique.example.com", routes=[route()]),
    )
    message = 'fqdn "example.com" is used in multiple HTTPProxies: default/a, other/b'
    for k in (key("a"), key("b", "other")):
        assert errors(dag, k) == [("VirtualHostError", "DuplicateVhost", message)]
        assert current(dag, k) == "invalid"
    assert http_routes(dag) == {}
    assert http_routes(dag, "EXAMPLE.com") == {}
    assert paths(http_routes(dag, "unique.example.com")) == [P + "/"]
    # Children of a dropped root are not reached.
    assert current(dag, key("kid")) == "orphaned"


def test_fqdn_must_be_specified() -> None:
    dag = build(service(), httpproxy(fqdn="", routes=[route()]))
    assert errors(dag) == [
        ("VirtualHostError", "FQDNNotSpecified", "Spec.VirtualHost.Fqdn must be specified")
    ]
    assert dag.listeners == {}


def test_root_needs_the_core_listeners() -> None:
    source = SourceCache(
        watches={HTTPPROXY.group_kind: WatchSpec(gvk=HTTPPROXY, accept=ingress_class_accepts)}
    )
    for obj in (service(), httpproxy(routes=[route()])):
        source.insert(obj)
    processor = HTTPProxyProcessor.from_config(Config())
    processor.clock = fixed_clock(NOW)
    dag = Builder([("httpproxy", processor)]).build(source)  # no ListenerProcessor
    assert errors(dag) == [("ListenerError", "ErrorIdentifyingListener", "listener ingress_http not found")]
    assert dag.listeners == {}


@pytest.mark.parametrize("configured", [("roots",), ("a,roots",), "roots", ["x", "roots, y"]])
def test_roots_only_in_root_namespaces(configured: Any) -> None:
    dag = build(
        service(),
        service(namespace="roots"),
        httpproxy("outside", routes=[route()]),
        httpproxy("inside", "roots", fqdn="inside.example.com", routes=[route()]),
        options={"root_namespaces": configured},
    )
    assert errors(dag, key("outside")) == [
        (
            "RootNamespaceError",
            "RootProxyNotAllowedInNamespace",
            "root HTTPProxy cannot be defined in this namespace",
        )
    ]
    assert http_routes(dag) == {}
    assert paths(http_routes(dag, "inside.example.com")) == [P + "/"]
    assert current(dag, key("inside", "roots")) == "valid"


def test_root_namespaces_do_not_restrict_children() -> None:
    dag = build(
        service(namespace="team"),
        httpproxy("root", "roots", routes=[], includes=[include("kid", "team", prefix("/t"))]),
        child("kid", "team", routes=[route()]),
        options={"root_namespaces": ("roots",)},
    )
    assert paths(http_routes(dag)) == [P + "/t"]
    assert upstreams(http_routes(dag)[P + "/t"]) == ["team/web"]


def test_nothing_defined() -> None:
    dag = build(httpproxy())
    assert errors(dag) == [
        ("SpecError", "NothingDefined", "HTTPProxy.Spec must have at least one Route, Include, or a TCPProxy")
    ]


# -- client certificate validation (tls.clientValidation) -------------------------------------------


def _client_validation(**fields: Any) -> dict[str, Any]:
    return {"secretName": "tls", "clientValidation": fields}


def test_client_validation_with_ca_and_crl_reaches_the_secure_virtual_host() -> None:
    tls = _client_validation(
        caSecret="ca",
        crlSecret="crl",
        crlOnlyVerifyLeafCert=True,
        optionalClientCertificate=True,
        forwardClientCertificate={"subject": True, "dns": True},
    )
    crl = make_crl_secret("default", "crl", make_crl(default_ca()))
    dag = build(
        service(), tls_secret(), make_ca_secret("default", "ca"), crl, httpproxy(routes=[route()], tls=tls)
    )
    assert errors(dag) == []
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.downstream_validation is not None
    validation = svhost.downstream_validation
    assert validation.ca is not None and validation.ca.ca_pem == default_ca().cert_pem
    assert validation.crl is not None and validation.crl.crl_pem.startswith(b"-----BEGIN X509 CRL")
    assert (validation.optional, validation.skip_verification, validation.crl_only_verify_leaf) == (
        True,
        False,
        True,
    )
    assert validation.forward_client_certificate == ClientCertificateDetails(subject=True, dns=True)
    # The plain host is unaffected.
    assert http_routes(dag)


def test_skipped_validation_needs_no_ca() -> None:
    tls = _client_validation(skipClientCertValidation=True)
    dag = build(service(), tls_secret(), httpproxy(routes=[route()], tls=tls))
    assert errors(dag) == []
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.downstream_validation is not None
    assert svhost.downstream_validation.skip_verification and svhost.downstream_validation.ca is None


_BAD_TYPE = {**make_ca_secret("default", "ca"), "type": "kubernetes.io/basic-auth"}
_INVALID = "Spec.VirtualHost.TLS client validation is invalid"


@pytest.mark.parametrize(
    ("tls", "objects", "error"),
    [
        (
            _client_validation(),
            [],
            ("TLSError", "ClientValidationInvalid", f"{_INVALID}: CA Secret must be specified"),
        ),
        (
            _client_validation(caSecret="ca"),
            [_BAD_TYPE],
            (
                "TLSError",
                "ClientValidationInvalid",
                f'{_INVALID}: invalid CA Secret "default/ca": Secret default/ca: secret type is not '
                "'kubernetes.io/tls' or 'Opaque'",
            ),
        ),
        (
            _client_validation(caSecret="ca"),
            [make_crl_secret("default", "ca", b"")],
            (
                "TLSError",
                "ClientValidationInvalid",
                f'{_INVALID}: invalid CA Secret "default/ca": Secret default/ca has no ca.crt',
            ),
        ),
        (
            _client_validation(caSecret="missing"),
            [],
            (
                "TLSError",
                "ClientValidationInvalid",
                f'{_INVALID}: invalid CA Secret "default/missing": Secret default/missing not found',
            ),
        ),
        (
            _client_validation(caSecret="certs/ca"),
            [make_ca_secret("certs", "ca")],
            (
                "TLSError",
                "DelegationNotPermitted",
                'Spec.VirtualHost.TLS CA Secret "certs/ca" is invalid: certificate delegation not permitted',
            ),
        ),
        (
            _client_validation(caSecret="ca", crlSecret="crl"),
            [make_ca_secret("default", "ca"), make_ca_secret("default", "crl")],
            (
                "TLSError",
                "ClientValidationInvalid",
                f'{_INVALID}: invalid CRL Secret "default/crl": Secret default/crl has no crl.pem',
            ),
        ),
        (
            _client_validation(caSecret="ca", crlSecret="certs/crl"),
            [make_ca_secret("default", "ca"), make_crl_secret("certs", "crl", make_crl(default_ca()))],
            (
                "TLSError",
                "DelegationNotPermitted",
                'Spec.VirtualHost.TLS CRL Secret "certs/crl" is invalid: '
                "certificate delegation not permitted",
            ),
        ),
        (
            _client_validation(skipClientCertValidation=True, crlSecret="crl"),
            [make_crl_secret("default", "crl", make_crl(default_ca()))],
            ("TLSError", "ClientValidationInvalid", f"{_INVALID}: a CRL Secret requires a CA Secret"),
        ),
        (
            {"passthrough": True, "clientValidation": {"caSecret": "ca"}},
            [],
            (
                "TLSError",
                "TLSIncompatibleFeatures",
                "Spec.VirtualHost.TLS passthrough cannot be combined with tls.clientValidation",
            ),
        ),
        (
            {**_client_validation(caSecret="ca"), "enableFallbackCertificate": True},
            [make_ca_secret("default", "ca")],
            (
                "TLSError",
                "TLSIncompatibleFeatures",
                "Spec.Virtualhost.TLS fallback & client validation are incompatible",
            ),
        ),
    ],
    ids=[
        "no-ca",
        "wrong-type",
        "no-ca-crt",
        "missing",
        "ca-not-delegated",
        "no-crl-pem",
        "crl-not-delegated",
        "crl-without-ca",
        "passthrough",
        "fallback",
    ],
)
def test_invalid_client_validation_takes_only_that_root_offline(
    tls: dict[str, Any], objects: list[KubeObject], error: tuple[str, str, str]
) -> None:
    other = httpproxy("other", fqdn="other.example.com", routes=[route()], tls={"secretName": "tls"})
    dag = build(service(), tls_secret(), *objects, httpproxy(routes=[route()], tls=tls), other)
    assert errors(dag) == [error]
    assert secure_vhost(dag) is None and not http_routes(dag)
    assert errors(dag, key("other")) == [] and secure_vhost(dag, "other.example.com") is not None


def test_delegated_client_validation_secrets() -> None:
    tls = _client_validation(caSecret="certs/ca", crlSecret="certs/crl")
    crl = make_crl_secret("certs", "crl", make_crl(default_ca()))
    objects = (
        service(),
        tls_secret(),
        make_ca_secret("certs", "ca"),
        crl,
        httpproxy(routes=[route()], tls=tls),
    )
    dag = build(*objects, secret_policy=allow_all)
    assert errors(dag) == []
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.downstream_validation is not None
    assert (
        svhost.downstream_validation.crl is not None and svhost.downstream_validation.crl.ref == "certs/crl"
    )


def test_vhost_allow_and_deny_filters_are_exclusive() -> None:
    rules = [{"source": "Peer", "cidr": "10.0.0.0/8"}]
    dag = build(service(), httpproxy(routes=[route()], vhost={"ipAllowPolicy": rules, "ipDenyPolicy": rules}))
    assert errors(dag) == [
        (
            "IPFilterError",
            "IncompatibleIPAddressFilters",
            "Spec.VirtualHost.IPAllowFilterPolicy and Spec.VirtualHost.IPDepnyFilterPolicy "
            "cannot both be defined.",
        )
    ]
    assert dag.listeners == {}


def test_vhost_policies_apply_to_the_virtual_host() -> None:
    vhost = {
        "corsPolicy": {"allowOrigin": ["*"], "allowMethods": ["GET"]},
        "ipAllowPolicy": [{"source": "Peer", "cidr": "10.0.0.1"}],
        "rateLimitPolicy": {"local": {"requests": 10, "unit": "second"}},
    }
    dag = build(service(), httpproxy(routes=[route()], vhost=vhost))
    vh = dag.listeners[HTTP_LISTENER].virtual_hosts["example.com"]
    assert vh.cors is not None and vh.cors.allow_origin == ("*",)
    assert vh.ip_filter is not None and [r.cidr for r in vh.ip_filter.rules] == ["10.0.0.1/32"]
    assert vh.local_rate_limit is not None and vh.local_rate_limit.requests == 10


def test_invalid_cors_drops_the_proxy() -> None:
    vhost = {"corsPolicy": {"allowOrigin": ["*"], "allowMethods": []}}
    dag = build(service(), httpproxy(routes=[route()], vhost=vhost))
    assert errors(dag) == [
        (
            "CORSError",
            "PolicyDidNotParse",
            "Spec.VirtualHost.CORSPolicy: invalid allowed methods configuration with length 0",
        )
    ]
    assert http_routes(dag) == {}


# -- includes ---------------------------------------------------------------------------------------------


def test_include_merges_prefix_header_and_query_conditions() -> None:
    dag = build(
        service(namespace="team"),
        httpproxy(
            includes=[
                include(
                    "app",
                    "team",
                    prefix("/app/"),
                    header("x-env", exact="prod"),
                    query("debug", present=True),
                )
            ]
        ),
        child(
            "app",
            "team",
            routes=[
                route(),
                route(prefix("/v1"), header(":method", exact="GET")),
                route({"exact": "/status"}),
                route({"regex": "/v[0-9]+/.*"}),
            ],
        ),
    )
    routes = http_routes(dag)
    env = HeaderMatch(name="x-env", kind=HeaderMatchKind.EXACT, value="prod")
    debug = QueryMatch(name="debug", kind=QueryMatchKind.PRESENT)
    by_path = {r.path: r for r in routes.values()}
    assert set(by_path) == {
        PathMatch(kind=PathKind.PREFIX, value="/app/"),
        PathMatch(kind=PathKind.PREFIX, value="/app/v1"),
        PathMatch(kind=PathKind.EXACT, value="/app/status"),
        PathMatch(kind=PathKind.REGEX, value="/app/v[0-9]+/.*"),
    }
    for r in routes.values():
        assert r.headers[0] == env and r.query == (debug,)
        assert upstreams(r) == ["team/web"]  # the child's namespace
        assert str(r.origin) == "HTTPProxy team/app"
    assert by_path[PathMatch(kind=PathKind.PREFIX, value="/app/v1")].headers == (
        env,
        HeaderMatch(name=":method", kind=HeaderMatchKind.EXACT, value="GET"),
    )
    assert current(dag, key("app", "team")) == "valid"
    assert current(dag) == "valid"


def test_nested_includes_concatenate_and_collapse_slashes() -> None:
    dag = build(
        service(),
        httpproxy(includes=[include("a", None, prefix("/a/"))]),
        child("a", includes=[include("b", None, prefix("/b"))]),
        child("b", routes=[route(prefix("/c"))]),
    )
    assert paths(http_routes(dag)) == [P + "/a/b/c"]
    assert [current(dag, key(n)) for n in ("root", "a", "b")] == ["valid"] * 3


def test_include_defaults_to_the_includers_namespace() -> None:
    dag = build(
        service(namespace="team"),
        httpproxy("root", "team", includes=[include("kid", None, prefix("/k"))]),
        child("kid", "team", routes=[route()]),
    )
    assert paths(http_routes(dag)) == [P + "/k"]


def test_missing_include_gets_a_502_route_for_its_conditions() -> None:
    dag = build(
        service(),
        httpproxy(
            routes=[route()],
            includes=[
                include("missing", None, prefix("/missing"), header("x-a", present=True)),
                include("gone"),
            ],
        ),
    )
    routes = http_routes(dag)
    assert paths(routes) == [P + "/", P + "/missing|h:x-a:present::False:False"]
    bad = routes[P + "/missing|h:x-a:present::False:False"]
    assert bad.direct_response == DirectResponse(status_code=502)
    assert bad.clusters == ()
    # Without conditions there is no 502 route (it would take over the whole host).
    assert errors(dag) == [
        ("IncludeError", "IncludeNotFound", "include default/missing not found"),
        ("IncludeError", "IncludeNotFound", "include default/gone not found"),
    ]


def test_502_route_of_a_nested_missing_include_stays_under_its_parents_prefix() -> None:
    dag = build(
        service(),
        httpproxy(includes=[include("a", None, prefix("/a"))]),
        child("a", routes=[route()], includes=[include("missing", "elsewhere", prefix("/b"))]),
    )
    routes = http_routes(dag)
    assert paths(routes) == [P + "/a", P + "/a/b"]
    assert routes[P + "/a/b"].direct_response == DirectResponse(status_code=502)
    assert errors(dag, key("a")) == [
        ("IncludeError", "IncludeNotFound", "include elsewhere/missing not found")
    ]
    assert current(dag) == "valid"


def test_root_including_a_root_gets_a_502_route() -> None:
    dag = build(
        service(),
        httpproxy(routes=[route()], includes=[include("other", None, prefix("/other"))]),
        httpproxy("other", fqdn="other.example.com", routes=[route()]),
    )
    assert errors(dag) == [
        (
            "IncludeError",
            "RootIncludesRoot",
            "root httpproxy cannot include another root httpproxy (default/other)",
        )
    ]
    assert http_routes(dag)[P + "/other"].direct_response == DirectResponse(status_code=502)
    # The included root is still a root of its own.
    assert paths(http_routes(dag, "other.example.com")) == [P + "/"]
    assert current(dag, key("other")) == "valid"


def test_include_cycle_is_reported_on_the_proxy_entered_twice() -> None:
    dag = build(
        service(),
        httpproxy(includes=[include("a", None, prefix("/a"))]),
        child("a", routes=[route(prefix("/x"))], includes=[include("b", None, prefix("/b"))]),
        child("b", routes=[route(prefix("/y"))], includes=[include("a", None, prefix("/c"))]),
    )
    assert errors(dag, key("a")) == [
        (
            "IncludeError",
            "IncludeCreatesCycle",
            "include creates an include cycle: default/root -> default/a -> default/b -> default/a",
        )
    ]
    # That branch is empty; the rest of the tree is served.
    assert paths(http_routes(dag)) == [P + "/a/b/y", P + "/a/x"]
    assert current(dag, key("b")) == "valid"
    assert current(dag) == "valid"


def test_self_include_is_a_cycle() -> None:
    dag = build(
        service(),
        httpproxy(includes=[include("a", None, prefix("/a"))]),
        child("a", routes=[route()], includes=[include("a", None, prefix("/again"))]),
    )
    assert errors(dag, key("a")) == [
        (
            "IncludeError",
            "IncludeCreatesCycle",
            "include creates an include cycle: default/root -> default/a -> default/a",
        )
    ]
    assert paths(http_routes(dag)) == [P + "/a"]


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ([{"exact": "/a"}], "include: exact conditions are not allowed in includes block"),
        ([{"regex": "/a.*"}], "include: regex conditions are not allowed in includes block"),
        (
            [prefix("/a"), prefix("/b")],
            "include: more than one prefix, exact or regex is not allowed in a condition block",
        ),
        ([prefix("a")], "include: prefix conditions must start with /, a was supplied"),
    ],
)
def test_invalid_include_path_conditions_skip_the_include(
    conditions: list[dict[str, Any]], message: str
) -> None:
    dag = build(
        service(),
        httpproxy(routes=[route()], includes=[include("kid", None, *conditions)]),
        child("kid", routes=[route(prefix("/kid"))]),
    )
    assert errors(dag) == [("IncludeError", "PathMatchConditionsNotValid", message)]
    assert paths(http_routes(dag)) == [P + "/"]
    assert current(dag, key("kid")) == "orphaned"  # never reached


def test_invalid_include_header_and_query_conditions_skip_the_include() -> None:
    dag = build(
        service(),
        httpproxy(
            routes=[route()],
            includes=[
                include("a", None, prefix("/a"), header("x", present=True), header("x", notpresent=True)),
                include("b", None, prefix("/b"), query("q")),
            ],
        ),
        child("a", routes=[route()]),
        child("b", routes=[route()]),
    )
    assert errors(dag) == [
        (
            "RouteError",
            "HeaderMatchConditionsNotValid",
            "cannot specify contradictory 'present' and 'notpresent' conditions for the same route "
            "and header",
        ),
        (
            "RouteError",
            "QueryParameterMatchConditionsNotValid",
            "must specify at least one query parameter condition",
        ),
    ]
    assert paths(http_routes(dag)) == [P + "/"]


def test_duplicate_include_conditions_skip_the_later_include() -> None:
    dag = build(
        service(),
        httpproxy(
            includes=[
                include("a", None, prefix("/x"), header("h", exact="1")),
                include("b", None, header("h", exact="1"), prefix("/x")),
                include("c"),
                include("d", None, prefix("/")),
            ]
        ),
        child("a", routes=[route(prefix("/a"))]),
        child("b", routes=[route(prefix("/b"))]),
        child("c", routes=[route(prefix("/c"))]),
        child("d", routes=[route(prefix("/d"))]),
    )
    assert errors(dag) == [
        ("IncludeError", "DuplicateMatchConditions", "duplicate conditions defined on an include")
    ]
    assert [r.path.value for r in http_routes(dag).values()] == ["/x/a", "/c", "/d"]
    assert current(dag, key("b")) == "orphaned"


def test_a_child_included_twice_is_served_under_both() -> None:
    dag = build(
        service(),
        httpproxy("r1", routes=[], includes=[include("kid", None, prefix("/one"))]),
        httpproxy("r2", fqdn="two.example.com", includes=[include("kid", None, prefix("/two"))]),
        child("kid", routes=[route()]),
    )
    assert paths(http_routes(dag)) == [P + "/one"]
    assert paths(http_routes(dag, "two.example.com")) == [P + "/two"]
    assert current(dag, key("kid")) == "valid"


def test_child_errors_are_recorded_on_the_child() -> None:
    dag = build(
        service(),
        httpproxy(routes=[route(prefix("/root"))], includes=[include("kid", None, prefix("/kid"))]),
        child("kid", routes=[route(prefix("/ok")), route({"regex": "/a(b"})]),
    )
    [(type_, reason, message)] = errors(dag, key("kid"))
    assert (type_, reason) == ("RouteError", "PathMatchConditionsNotValid")
    assert message.startswith("route: supplied regex: /a(b invalid. error: ")
    assert current(dag) == "valid"
    assert current(dag, key("kid")) == "invalid"
    # The child's route set is dropped; the root's own routes stay.
    assert paths(http_routes(dag)) == [P + "/root"]


# -- orphans ----------------------------------------------------------------------------------------------


def test_unreached_children_are_orphaned() -> None:
    dag = build(service(), child("lonely", routes=[route()]))
    assert dag.statuses[key("lonely")] == {
        "currentStatus": "orphaned",
        "description": "this HTTPProxy is not part of a delegation chain from a root HTTPProxy",
        "conditions": [
            {
                "type": "Valid",
                "status": "False",
                "reason": "ErrorPresent",
                "message": "At least one error present, see Errors for details",
                "observedGeneration": 1,
                "lastTransitionTime": NOW_TEXT,
                "errors": [
                    {
                        "type": "Orphaned",
                        "status": "True",
                        "reason": "Orphaned",
                        "message": "this HTTPProxy is not part of a delegation chain from a root HTTPProxy",
                    }
                ],
            }
        ],
    }
    assert dag.listeners == {}


def test_children_of_a_root_dropped_before_its_routes_stay_orphaned() -> None:
    dag = build(
        httpproxy(includes=[include("kid")], tls={"secretName": "missing"}),
        child("kid", routes=[route()]),
    )
    assert current(dag, key("kid")) == "orphaned"


def test_children_of_a_root_whose_route_set_is_dropped_are_not_orphaned() -> None:
    dag = build(
        service(),
        httpproxy(routes=[route(prefix("a"))], includes=[include("kid")]),
        child("kid", routes=[route()]),
    )
    assert errors(dag) == [
        (
            "RouteError",
            "PathMatchConditionsNotValid",
            "route: prefix conditions must start with /, a was supplied",
        )
    ]
    assert current(dag, key("kid")) == "valid"
    assert http_routes(dag) == {}


# -- route conditions -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        (
            [prefix("/a"), {"exact": "/b"}],
            "route: more than one prefix, exact or regex is not allowed in a condition block",
        ),
        ([{"exact": "b"}], "route: exact conditions must start with /, b was supplied"),
        ([{"regex": "b.*"}], "route: regex conditions must start with /, b.* was supplied"),
    ],
)
def test_invalid_route_path_conditions_drop_the_route_set(
    conditions: list[dict[str, Any]], message: str
) -> None:
    dag = build(service(), httpproxy(routes=[route(prefix("/ok")), route(*conditions)]))
    assert errors(dag) == [("RouteError", "PathMatchConditionsNotValid", message)]
    assert http_routes(dag) == {}


def test_header_conditions_are_validated_along_the_chain() -> None:
    dag = build(
        service(),
        httpproxy(
            routes=[route(prefix("/root"))],
            includes=[include("kid", None, prefix("/k"), header("x", exact="1"))],
        ),
        child("kid", routes=[route(header("X", notexact="1"))]),
    )
    assert errors(dag, key("kid")) == [
        (
            "RouteError",
            "HeaderMatchConditionsNotValid",
            "cannot specify contradictory 'exact' and 'notexact' conditions for the same route and header",
        )
    ]
    assert paths(http_routes(dag)) == [P + "/root"]


def test_query_conditions_are_validated() -> None:
    dag = build(service(), httpproxy(routes=[route(query("a", exact="1", suffix="2"))]))
    assert errors(dag) == [
        (
            "RouteError",
            "QueryParameterMatchConditionsNotValid",
            "cannot specify more than one condition in the same match condition branch",
        )
    ]
    assert http_routes(dag) == {}


def test_header_and_query_matches_on_routes() -> None:
    dag = build(
        service(),
        httpproxy(
            routes=[
                route(
                    prefix("/"),
                    header("x-a", notcontains="b", treatMissingAsEmpty=True),
                    query("q", regex="a.*"),
                ),
                route(prefix("/")),
            ]
        ),
    )
    routes = list(http_routes(dag).values())
    assert len(routes) == 2
    assert routes[0].headers == (
        HeaderMatch(
            name="x-a", kind=HeaderMatchKind.CONTAINS, value="b", invert=True, treat_missing_as_empty=True
        ),
    )
    assert routes[0].query == (QueryMatch(name="q", kind=QueryMatchKind.REGEX, value="a.*"),)


def test_route_action_must_be_exactly_one() -> None:
    dag = build(service(), httpproxy(routes=[route(services=())]))
    assert errors(dag) == [
        (
            "RouteError",
            "RouteActionCountNotValid",
            "must set exactly one of route.services or route.requestRedirectPolicy or "
            "route.directResponsePolicy",
        )
    ]


def test_prefix_rewrite_uses_the_merged_prefix_and_expands() -> None:
    rewrite = {"replacePrefix": [{"prefix": "/app/v1", "replacement": "/"}, {"replacement": "/other"}]}
    dag = build(
        service(),
        httpproxy(includes=[include("kid", None, prefix("/app"))]),
        child(
            "kid",
            routes=[
                route(prefix("/v1"), pathRewritePolicy=rewrite),
                route(prefix("/v2"), pathRewritePolicy=rewrite),
            ],
        ),
    )
    rewrites = {r.path.value: r.prefix_rewrite for r in http_routes(dag).values()}
    assert rewrites == {"/app/v1": "/", "/app/v1/": "/", "/app/v2": "/other", "/app/v2/": "/other/"}


def test_prefix_rewrite_needs_a_prefix() -> None:
    rewrite = {"replacePrefix": [{"replacement": "/"}]}
    dag = build(
        service(),
        httpproxy(includes=[include("kid", None, prefix("/app"))]),
        child("kid", routes=[route({"exact": "/x"}, pathRewritePolicy=rewrite)]),
    )
    assert errors(dag, key("kid")) == [
        (
            "PrefixReplaceError",
            "MustHavePrefix",
            "cannot specify prefix replacements without a prefix condition",
        )
    ]


def test_redirect_and_direct_response_routes() -> None:
    dag = build(
        httpproxy(
            routes=[
                route(
                    prefix("/old"), requestRedirectPolicy={"hostname": "new.example.com", "statusCode": 301}
                ),
                route(prefix("/gone"), directResponsePolicy={"statusCode": 410, "body": "gone"}),
            ]
        )
    )
    routes = http_routes(dag)
    redirect = routes[P + "/old"].redirect
    assert redirect is not None and redirect.hostname == "new.example.com"
    assert routes[P + "/gone"].direct_response == DirectResponse(status_code=410, body="gone")
    assert current(dag) == "valid"


# -- TLS --------------------------------------------------------------------------------------------------


def test_tls_root_serves_https_and_redirects_http() -> None:
    dag = build(
        service(),
        tls_secret(),
        httpproxy(
            routes=[route(prefix("/")), route(prefix("/open"), permitInsecure=True)],
            tls={"secretName": "tls"},
        ),
    )
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.secret is not None and svhost.secret.ref == "default/tls"
    assert (svhost.tls.min_version, svhost.tls.max_version) == ("1.2", "1.3")
    assert not svhost.passthrough and svhost.tcp_proxy is None and svhost.fallback_certificate is None
    http, https = http_routes(dag), https_routes(dag)
    assert paths(http) == paths(https) == [P + "/", P + "/open"]
    assert http[P + "/"].https_redirect and not http[P + "/open"].https_redirect
    assert not any(r.https_redirect for r in https.values())
    assert upstreams(https[P + "/"]) == ["default/web"]
    assert current(dag) == "valid"


def test_disable_permit_insecure_redirects_every_route() -> None:
    dag = build(
        service(),
        tls_secret(),
        httpproxy(routes=[route(permitInsecure=True)], tls={"secretName": "tls"}),
        options={"disable_permit_insecure": True},
    )
    assert http_routes(dag)[P + "/"].https_redirect


def test_included_routes_follow_the_roots_tls() -> None:
    dag = build(
        service(),
        tls_secret(),
        httpproxy(includes=[include("kid", None, prefix("/k"))], tls={"secretName": "tls"}),
        child("kid", routes=[route(), route(prefix("/open"), permitInsecure=True)]),
    )
    http = http_routes(dag)
    assert http[P + "/k"].https_redirect and not http[P + "/k/open"].https_redirect
    assert paths(https_routes(dag)) == [P + "/k", P + "/k/open"]


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        ({"minimumProtocolVersion": "1.3"}, ("1.3", "1.3")),
        ({"maximumProtocolVersion": "1.2"}, ("1.2", "1.2")),
        ({"minimumProtocolVersion": "1.1", "maximumProtocolVersion": "2.0"}, ("1.2", "1.3")),
    ],
)
def test_tls_protocol_versions(versions: dict[str, str], expected: tuple[str, str]) -> None:
    dag = build(service(), tls_secret(), httpproxy(routes=[route()], tls={"secretName": "tls", **versions}))
    svhost = secure_vhost(dag)
    assert svhost is not None and (svhost.tls.min_version, svhost.tls.max_version) == expected


def test_minimum_above_maximum_is_invalid() -> None:
    tls = {"secretName": "tls", "minimumProtocolVersion": "1.3", "maximumProtocolVersion": "1.2"}
    dag = build(service(), tls_secret(), httpproxy(routes=[route()], tls=tls))
    assert errors(dag) == [
        (
            "TLSError",
            "TLSConfigNotValid",
            "Spec.Virtualhost.TLS the minimum protocol version is greater than the maximum protocol version",
        )
    ]
    assert dag.listeners == {}


def test_missing_secret_drops_the_proxy() -> None:
    dag = build(service(), httpproxy(routes=[route()], tls={"secretName": "tls"}))
    assert errors(dag) == [
        (
            "TLSError",
            "SecretNotValid",
            'Spec.VirtualHost.TLS Secret "tls" is invalid: Secret default/tls not found',
        )
    ]
    assert dag.listeners == {}  # not even plain HTTP


def test_invalid_secret_drops_the_proxy() -> None:
    secret = tls_secret()
    secret["data"] = {"tls.crt": secret["data"]["tls.crt"]}
    dag = build(service(), secret, httpproxy(routes=[route()], tls={"secretName": "tls"}))
    [(type_, reason, message)] = errors(dag)
    assert (type_, reason) == ("TLSError", "SecretNotValid")
    assert message.startswith('Spec.VirtualHost.TLS Secret "tls" is invalid: ')


def test_cross_namespace_secret_needs_delegation() -> None:
    objects = (
        service(),
        tls_secret(namespace="certs"),
        httpproxy(routes=[route()], tls={"secretName": "certs/tls"}),
    )
    dag = build(*objects)
    assert errors(dag) == [
        (
            "TLSError",
            "DelegationNotPermitted",
            'Spec.VirtualHost.TLS Secret "certs/tls" certificate delegation not permitted',
        )
    ]
    assert dag.listeners == {}
    dag = build(*objects, secret_policy=allow_all)
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.secret is not None and svhost.secret.ref == "certs/tls"


@pytest.mark.parametrize(
    ("tls", "message"),
    [
        (
            {"secretName": "tls", "passthrough": True},
            "Spec.VirtualHost.TLS: both Passthrough and SecretName were specified",
        ),
        ({}, "Spec.VirtualHost.TLS: neither Passthrough nor SecretName were specified"),
        ({"passthrough": False}, "Spec.VirtualHost.TLS: neither Passthrough nor SecretName were specified"),
    ],
)
def test_tls_needs_exactly_one_of_secret_and_passthrough(tls: dict[str, Any], message: str) -> None:
    dag = build(service(), tls_secret(), httpproxy(routes=[route()], tls=tls))
    assert errors(dag) == [("TLSError", "TLSConfigNotValid", message)]


def test_passthrough_with_fallback_is_incompatible() -> None:
    tls = {"passthrough": True, "enableFallbackCertificate": True}
    dag = build(service(), httpproxy(tcpproxy={"services": [{"name": "web", "port": 80}]}, tls=tls))
    assert errors(dag) == [
        (
            "TLSError",
            "TLSIncompatibleFeatures",
            "Spec.VirtualHost.TLS: both Passthrough and enableFallbackCertificate were specified",
        )
    ]
    assert dag.listeners == {}


def test_fallback_certificate_not_configured() -> None:
    dag = build(
        service(),
        tls_secret(),
        httpproxy(routes=[route()], tls={"secretName": "tls", "enableFallbackCertificate": True}),
    )
    assert errors(dag) == [
        (
            "TLSError",
            "FallbackNotPresent",
            "Spec.Virtualhost.TLS enabled fallback but the fallback Certificate Secret is not configured in "
            "Contour configuration file",
        )
    ]
    assert dag.listeners == {}


def test_fallback_certificate_configured() -> None:
    tls = {"secretName": "tls", "enableFallbackCertificate": True}
    objects = (service(), tls_secret(), tls_secret("fallback", "certs"), httpproxy(routes=[route()], tls=tls))
    dag = build(*objects, options={"fallback_certificate": "certs/fallback"}, secret_policy=allow_all)
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.fallback_certificate is not None
    assert svhost.fallback_certificate.ref == "certs/fallback"
    assert current(dag) == "valid"
    # Another namespace than the proxy's: the delegation policy applies, as in Contour.
    dag = build(*objects, options={"fallback_certificate": "certs/fallback"})
    assert errors(dag) == [
        (
            "TLSError",
            "FallbackNotDelegated",
            'Spec.VirtualHost.TLS Secret "certs/fallback" is not configured for certificate delegation',
        )
    ]


def test_fallback_certificate_invalid() -> None:
    tls = {"secretName": "tls", "enableFallbackCertificate": True}
    dag = build(
        service(),
        tls_secret(),
        httpproxy(routes=[route()], tls=tls),
        options={"fallback_certificate": "default/nope"},
    )
    assert errors(dag) == [
        (
            "TLSError",
            "FallbackNotValid",
            'Spec.Virtualhost.TLS Secret "default/nope" fallback certificate is invalid: '
            "Secret default/nope not found",
        )
    ]
    assert dag.listeners == {}


# -- TCP proxying -----------------------------------------------------------------------------------------

TCP_SERVICES = {"services": [{"name": "web", "port": 80}]}


def test_tcpproxy_requires_tls() -> None:
    dag = build(service(), httpproxy(tcpproxy=TCP_SERVICES))
    assert errors(dag) == [
        (
            "TCPProxyError",
            "TLSMustBeConfigured",
            "Spec.TCPProxy requires that either Spec.TLS.Passthrough or Spec.TLS.SecretName be set",
        )
    ]
    assert dag.listeners == {}


def test_passthrough_tcpproxy_with_http_routes() -> None:
    dag = build(
        service(),
        service("http"),
        httpproxy(
            tls={"passthrough": True},
            tcpproxy=TCP_SERVICES,
            routes=[route(services=["http"]), route(prefix("/open"), services=["http"], permitInsecure=True)],
        ),
    )
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.passthrough and svhost.secret is None
    assert svhost.tcp_proxy is not None and upstreams(svhost.tcp_proxy) == ["default/web"]
    assert svhost.routes == {}  # routes are not attached to a TCP-proxying virtual host
    http = http_routes(dag)
    assert http[P + "/"].https_redirect and not http[P + "/open"].https_redirect
    assert current(dag) == "valid"


def test_terminated_tcpproxy() -> None:
    dag = build(
        service(), tls_secret(), httpproxy(tls={"secretName": "tls"}, tcpproxy=TCP_SERVICES, routes=[route()])
    )
    svhost = secure_vhost(dag)
    assert svhost is not None and not svhost.passthrough and svhost.secret is not None
    assert svhost.tcp_proxy is not None and svhost.routes == {}


def test_passthrough_without_tcpproxy_serves_only_the_http_redirects() -> None:
    dag = build(service(), httpproxy(tls={"passthrough": True}, routes=[route()]))
    assert secure_vhost(dag) is None
    assert http_routes(dag)[P + "/"].https_redirect


def test_tcpproxy_include_follows_the_chain() -> None:
    dag = build(
        service(namespace="team"),
        httpproxy(tls={"passthrough": True}, tcpproxy={"include": {"name": "a", "namespace": "team"}}),
        child("a", "team", tcpproxy={"include": {"name": "b"}}),
        child("b", "team", tcpproxy=TCP_SERVICES),
    )
    svhost = secure_vhost(dag)
    assert svhost is not None and svhost.tcp_proxy is not None
    assert upstreams(svhost.tcp_proxy) == ["team/web"]
    assert [current(dag, k) for k in (key(), key("a", "team"), key("b", "team"))] == ["valid"] * 3


def test_tcpproxy_legacy_plural_include_and_singular_wins() -> None:
    legacy = build(
        service(),
        httpproxy(tls={"passthrough": True}, tcpproxy={"includes": {"name": "a"}}),
        child("a", tcpproxy=TCP_SERVICES),
    )
    svhost = secure_vhost(legacy)
    assert svhost is not None and svhost.tcp_proxy is not None
    both = build(
        service(),
        service("other"),
        httpproxy(tls={"passthrough": True}, tcpproxy={"include": {"name": "a"}, "includes": {"name": "b"}}),
        child("a", tcpproxy=TCP_SERVICES),
        child("b", tcpproxy={"services": [{"name": "other", "port": 80}]}),
    )
    svhost = secure_vhost(both)
    assert svhost is not None and svhost.tcp_proxy is not None
    assert upstreams(svhost.tcp_proxy) == ["default/web"]
    assert current(both, key("b")) == "orphaned"


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        ([], ("TCPProxyIncludeError", "IncludeNotFound", "include default/a not found")),
        (
            [httpproxy("a", fqdn="a.example.com", tls={"passthrough": True}, tcpproxy=TCP_SERVICES)],
            (
                "TCPProxyIncludeError",
                "RootIncludesRoot",
                "root httpproxy cannot include another root httpproxy (default/a)",
            ),
        ),
    ],
)
def test_tcpproxy_include_errors_drop_the_root(
    objects: list[KubeObject], expected: tuple[str, str, str]
) -> None:
    dag = build(
        service(),
        httpproxy(tls={"passthrough": True}, tcpproxy={"include": {"name": "a"}}, routes=[route()]),
        *objects,
    )
    assert errors(dag) == [expected]
    assert secure_vhost(dag) is None
    assert http_routes(dag) == {}


def test_tcpproxy_include_cycle() -> None:
    dag = build(
        service(),
        httpproxy(tls={"passthrough": True}, tcpproxy={"include": {"name": "a"}}),
        child("a", tcpproxy={"include": {"name": "b"}}),
        child("b", tcpproxy={"include": {"name": "a"}}),
    )
    assert errors(dag, key("b")) == [
        (
            "TCPProxyIncludeError",
            "IncludeCreatesCycle",
            "include creates a cycle: default/root -> default/a -> default/b -> default/a",
        )
    ]
    assert secure_vhost(dag) is None
    assert current(dag, key("a")) == "valid"


def test_tcpproxy_services_and_include_are_exclusive() -> None:
    dag = build(
        service(),
        httpproxy(tls={"passthrough": True}, tcpproxy={**TCP_SERVICES, "include": {"name": "a"}}),
        child("a", tcpproxy=TCP_SERVICES),
    )
    assert errors(dag) == [
        ("TCPProxyError", "NoServicesAndInclude", "cannot specify services and include in the same httpproxy")
    ]
    assert current(dag, key("a")) == "orphaned"


def test_tcpproxy_included_child_without_tcpproxy() -> None:
    dag = build(
        service(),
        httpproxy(tls={"passthrough": True}, tcpproxy={"include": {"name": "a"}}),
        child("a", routes=[route()]),
    )
    assert errors(dag, key("a")) == [
        (
            "TCPProxyError",
            "NothingDefined",
            "this HTTPProxy is included as a TCP proxy but has no spec.tcpproxy",
        )
    ]
    assert secure_vhost(dag) is None


def test_tcpproxy_unresolved_service_drops_the_root() -> None:
    dag = build(httpproxy(tls={"passthrough": True}, tcpproxy=TCP_SERVICES))
    assert errors(dag) == [
        (
            "TCPProxyError",
            "ServiceUnresolvedReference",
            'Spec.TCPProxy unresolved service reference: service "default/web" not found',
        )
    ]
    assert dag.listeners == {}


# -- class selection --------------------------------------------------------------------------------------


def test_other_classes_are_not_processed() -> None:
    other = httpproxy(routes=[route()])
    other["spec"]["ingressClassName"] = "other"
    dag = build(service(), other)
    assert dag.listeners == {} and dag.statuses == {}
