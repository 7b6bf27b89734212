"""routebuild beyond routes: TCP proxies, virtual host policies, prefix rewrites; the helpers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from cpx import Config, DurationError, ObjectKey, parse_go_duration, parse_timeout
from cpx.dag import (
    Cluster,
    CORSPolicy,
    Duration,
    HealthCheck,
    IPFilter,
    IPRule,
    LocalRateLimit,
    PathKind,
    PathMatch,
    Route,
    ServicePort,
    TCPProxy,
    UpstreamProtocol,
)
from cpx.testing import ExternalNamePolicy, Resolver, SourceCache

from cpx_httpproxy import model
from cpx_httpproxy.durations import parse_max_age
from cpx_httpproxy.headers import canonical_header_key, escape_header_value
from cpx_httpproxy.routebuild import (
    VhostPolicies,
    build_tcp_proxy,
    build_vhost_policies,
    check_vhost_ip_filters,
    expand_prefix_routes,
    resolve_prefix_rewrite,
)
from cpx_httpproxy.status import ProxyStatus

NS = "default"
REF = ObjectKey("projectcontour.io", "HTTPProxy", NS, "tcp")


def service(name: str, *ports: int, external_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"name": f"p{p}", "port": p} for p in ports or (443,)]}
    if external_name:
        spec.update(type="ExternalName", externalName=external_name)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def tcp(spec: Mapping[str, Any], *, external_names: bool = False) -> tuple[object, ProxyStatus]:
    source = SourceCache()
    if external_names:
        # The core's --enable-external-name-service, with a resolver answering a public address.
        source.external_names = ExternalNamePolicy(enabled=True, resolver=Resolver(lambda n: ["192.0.2.10"]))
    for obj in (service("db", 443, 8443), service("ext", 443, external_name="db.example.com")):
        source.insert(obj)
    status = ProxyStatus()
    result = build_tcp_proxy(
        model.TCPProxy.from_dict(spec),
        namespace=NS,
        source=source,
        config=Config(),
        status=status,
        referrer=REF,
    )
    return result, status


def triples(items: list[Any]) -> list[tuple[str, str, str]]:
    return [(i.type, i.reason, i.message) for i in items]


DB = ServicePort(namespace=NS, name="db", port=443, port_name="p443", target_port=443)


# -- TCP proxies -----------------------------------------------------------------------------------


def test_tcp_proxy_services() -> None:
    result, status = tcp(
        {
            "services": [
                {"name": "db", "port": 443, "weight": 3},
                {"name": "db", "port": 8443, "protocol": "tls"},
            ],
            "loadBalancerPolicy": {"strategy": "WeightedLeastRequest"},
        }
    )
    assert status.valid and not status.warnings
    db8443 = ServicePort(
        namespace=NS, name="db", port=8443, port_name="p8443", target_port=8443, protocol=UpstreamProtocol.TLS
    )
    assert result == TCPProxy(
        clusters=(
            Cluster(upstream=DB, weight=3, load_balancer_policy="WeightedLeastRequest"),
            Cluster(upstream=db8443, weight=0, load_balancer_policy="WeightedLeastRequest"),
        )
    )


def test_tcp_proxy_health_check_and_external_name_sni() -> None:
    result, status = tcp(
        {
            "services": [{"name": "db", "port": 443, "healthPort": 8443}, {"name": "ext", "port": 443}],
            "healthCheckPolicy": {"intervalSeconds": 5},
        },
        external_names=True,
    )
    assert status.valid and isinstance(result, TCPProxy)
    db, ext = result.clusters
    assert db.health_check == HealthCheck(
        path="", interval=5.0, timeout=2.0, unhealthy_threshold=3, healthy_threshold=2, port=8443
    )
    assert ext.health_check == HealthCheck(path="", interval=5.0)
    assert (db.sni, ext.sni) == ("", "db.example.com")


@pytest.mark.parametrize("strategy", ["Cookie", "RequestHash"])
def test_tcp_proxy_ignores_hash_strategies(strategy: str) -> None:
    result, status = tcp(
        {"services": [{"name": "db", "port": 443}], "loadBalancerPolicy": {"strategy": strategy}}
    )
    assert isinstance(result, TCPProxy) and result.clusters[0].load_balancer_policy == "RoundRobin"
    assert status.valid
    assert triples(status.warnings) == [
        (
            "TCPProxyError",
            "IgnoredField",
            f'ignoring field "Spec.TCPProxy.LoadBalancerPolicy"; {strategy} load balancer policy is '
            "not supported "
            "for TCPProxies",
        )
    ]


def test_tcp_proxy_include_is_returned_for_the_processor() -> None:
    result, status = tcp({"include": {"name": "child", "namespace": "team"}})
    assert result == model.TCPProxyInclude(name="child", namespace="team")
    assert status.valid
    result, _ = tcp({"includes": {"name": "legacy"}})
    assert result == model.TCPProxyInclude(name="legacy")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {"services": [{"name": "db", "port": 443}], "include": {"name": "x"}},
            (
                "TCPProxyError",
                "NoServicesAndInclude",
                "cannot specify services and include in the same httpproxy",
            ),
        ),
        ({}, ("TCPProxyError", "NothingDefined", "either services or inclusion must be specified")),
        (
            {"services": [{"name": "db", "port": 443}, {"name": "nope", "port": 1}]},
            (
                "TCPProxyError",
                "ServiceUnresolvedReference",
                'Spec.TCPProxy unresolved service reference: service "default/nope" not found',
            ),
        ),
        (
            {"services": [{"name": "ext", "port": 443}]},
            (
                "TCPProxyError",
                "ServiceUnresolvedReference",
                "Spec.TCPProxy unresolved service reference: default/ext is an ExternalName service, "
                "these are not "
                "currently enabled. See the config.enableExternalNameService config file setting",
            ),
        ),
        (
            {"services": [{"name": "db", "port": 443, "protocol": "quic"}]},
            ("ServiceError", "UnsupportedProtocol", "unsupported protocol: quic"),
        ),
        (
            {"services": [{"name": "db", "port": 443, "protocol": "tls", "validation": {"caSecret": "ca"}}]},
            (
                "ServiceError",
                "TLSUpstreamValidation",
                'Service [db:443] TLS upstream validation policy error: invalid CA Secret "default/ca": '
                "Secret default/ca not found",
            ),
        ),
    ],
)
def test_tcp_proxy_errors(spec: dict[str, Any], error: tuple[str, str, str]) -> None:
    result, status = tcp(spec)
    assert result is None
    assert triples(status.errors) == [error]


# -- virtual host policies -----------------------------------------------------------------------------


def vhost(**fields: Any) -> tuple[VhostPolicies | None, ProxyStatus]:
    status = ProxyStatus()
    return build_vhost_policies(
        model.VirtualHost.from_dict({"fqdn": "example.com", **fields}), status=status
    ), status


def test_vhost_without_policies() -> None:
    policies, status = vhost()
    assert policies == VhostPolicies() and status.valid


def test_cors_policy() -> None:
    cors = {
        "allowCredentials": True,
        "allowOrigin": [
            "*",
            "https://example.com",
            "http://[::1]:8080",
            r"https://.*\.example\.com",
            "HTTPS://caps.com",
            "https://(paren)",
        ],
        "allowMethods": ["GET", "POST"],
        "allowHeaders": ["authorization"],
        "exposeHeaders": ["x-request-id"],
        "maxAge": "10m",
        "allowPrivateNetwork": True,
    }
    policies, status = vhost(corsPolicy=cors)
    assert status.valid and policies is not None
    assert policies.cors == CORSPolicy(
        allow_origin=(
            "*",
            "https://example.com",
            "http://[::1]:8080",
            r"regex:https://.*\.example\.com",
            # Go's url.Parse lower-cases the scheme, so this is no exact origin: it is a regex.
            "regex:HTTPS://caps.com",
            "https://(paren)",  # Go's url.Parse accepts sub-delimiters in hosts
        ),
        allow_methods=("GET", "POST"),
        allow_headers=("authorization",),
        expose_headers=("x-request-id",),
        allow_credentials=True,
        max_age="600",
        allow_private_network=True,
    )


@pytest.mark.parametrize(("max_age", "expected"), [("", None), ("0s", "0"), ("1.5s", "2"), ("90s", "90")])
def test_cors_max_age(max_age: str, expected: str | None) -> None:
    policies, _ = vhost(corsPolicy={"allowOrigin": ["*"], "allowMethods": ["GET"], "maxAge": max_age})
    assert policies is not None and policies.cors is not None and policies.cors.max_age == expected


@pytest.mark.parametrize(
    ("cors", "message"),
    [
        ({"allowMethods": ["GET"]}, "invalid allowed origin configuration with length 0"),
        ({"allowOrigin": ["*"]}, "invalid allowed methods configuration with length 0"),
        (
            {"allowOrigin": ["https://a.com/(x"], "allowMethods": ["GET"]},
            'invalid allowed origin "https://a.com/(x": allowed origin is invalid exact match and '
            "invalid regex match",
        ),
        (
            {"allowOrigin": ["*"], "allowMethods": ["GET"], "maxAge": "soon"},
            'unable to parse timeout string "soon": time: invalid duration "soon"',
        ),
        ({"allowOrigin": ["*"], "allowMethods": ["GET"], "maxAge": "-1s"}, 'invalid max age value "-1s"'),
    ],
)
def test_cors_errors(cors: dict[str, Any], message: str) -> None:
    policies, status = vhost(corsPolicy=cors)
    assert policies is None
    assert triples(status.errors) == [
        ("CORSError", "PolicyDidNotParse", f"Spec.VirtualHost.CORSPolicy: {message}")
    ]


def test_vhost_rate_limit_and_ip_filter() -> None:
    policies, status = vhost(
        rateLimitPolicy={"local": {"requests": 100, "unit": "second", "burst": 20}},
        ipDenyPolicy=[{"source": "Peer", "cidr": "192.0.2.0/24"}],
    )
    assert status.valid
    assert policies == VhostPolicies(
        local_rate_limit=LocalRateLimit(requests=100, unit_seconds=1.0, burst=20),
        ip_filter=IPFilter(allow=False, rules=(IPRule(cidr="192.0.2.0/24"),)),
    )


def test_vhost_rate_limit_error() -> None:
    policies, status = vhost(rateLimitPolicy={"local": {"requests": 1, "unit": "fortnight"}})
    assert policies is None
    assert triples(status.errors) == [
        (
            "VirtualHostError",
            "RateLimitPolicyNotValid",
            'Spec.VirtualHost.RateLimitPolicy is invalid: invalid unit "fortnight" in local rate '
            "limit policy",
        )
    ]


def test_vhost_ip_filter_errors() -> None:
    policies, status = vhost(ipAllowPolicy=[{"cidr": "10.0.0.0/8"}], ipDenyPolicy=[{"cidr": "10.0.0.1"}])
    assert policies is None
    assert triples(status.errors) == [
        (
            "IPFilterError",
            "IncompatibleIPAddressFilters",
            "Spec.VirtualHost.IPAllowFilterPolicy and Spec.VirtualHost.IPDepnyFilterPolicy cannot "
            "both be defined.",
        )
    ]
    check = ProxyStatus()
    assert not check_vhost_ip_filters(
        model.VirtualHost.from_dict({"ipAllowPolicy": [{}], "ipDenyPolicy": [{}]}), check
    )
    assert check_vhost_ip_filters(model.VirtualHost.from_dict({"ipAllowPolicy": [{}]}), check)

    policies, status = vhost(ipAllowPolicy=[{"cidr": "10.0.0.0/33"}])
    assert policies is None
    assert triples(status.errors) == [
        ("IPFilterError", "InvalidCIDR", "10.0.0.0/33 failed to parse: invalid CIDR address: 10.0.0.0/33"),
        (
            "IPFilterError",
            "IPFilterPolicyNotValid",
            "Spec.VirtualHost.IPAllowFilterPolicy or Spec.VirtualHost.IPDenyFilterPolicy is invalid: "
            "invalid CIDR address: 10.0.0.0/33",
        ),
    ]


# -- prefix rewriting ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("merged", "expected"),
    [("/api", "/v1"), ("/api/", "/default"), ("/other", "/default")],
)
def test_resolve_prefix_rewrite(merged: str, expected: str) -> None:
    pairs = (("/api", "/v1"), ("", "/default"), ("/api/", "/never-first"))
    assert resolve_prefix_rewrite(pairs[:2], merged) == expected


def test_resolve_prefix_rewrite_without_default() -> None:
    assert resolve_prefix_rewrite((("/a", "/b"),), "/c") is None
    assert resolve_prefix_rewrite((), "/c") is None


def _route(path: str, rewrite: str | None = None, kind: PathKind = PathKind.PREFIX) -> Route:
    return Route(path=PathMatch(kind=kind, value=path), prefix_rewrite=rewrite)


def _shape(routes: list[Route]) -> list[tuple[str, str | None]]:
    return [(r.path.value, r.prefix_rewrite) for r in routes]


@pytest.mark.parametrize(
    ("prefix", "rewrite", "expected"),
    [
        ("/foo", "/bar", [("/foo", "/bar"), ("/foo/", "/bar/")]),
        ("/foo", "/", [("/foo", "/"), ("/foo/", "/")]),
        ("/foo/", "/bar/", [("/foo", "/bar"), ("/foo/", "/bar/")]),
        ("/", "/app", [("/", "/app")]),
    ],
)
def test_expand_prefix_routes(prefix: str, rewrite: str, expected: list[tuple[str, str]]) -> None:
    assert _shape(expand_prefix_routes([_route(prefix, rewrite)])) == expected


def test_expand_prefix_routes_leaves_the_rest_alone() -> None:
    routes = [
        _route("/a", "/x"),
        _route("/a/", None),  # /a and /a/ both routed: no expansion
        _route("/b"),  # no rewrite
        _route("/c", kind=PathKind.EXACT),
        _route("/d.*", kind=PathKind.REGEX),
        _route("/e", "/y"),
    ]
    assert _shape(expand_prefix_routes(routes)) == [
        ("/a", "/x"),
        ("/a/", None),
        ("/b", None),
        ("/c", None),
        ("/d.*", None),
        ("/e", "/y"),
        ("/e/", "/y/"),
    ]


# -- helpers ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
        ("2us", 2e-6),
        ("3µs", 3e-6),
        ("-1s", -1.0),
        (".5m", 30.0),
    ],
)
def test_parse_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("s", 'time: invalid duration "s"'),
        (".s", 'time: invalid duration ".s"'),
        ("10", 'time: missing unit in duration "10"'),
        ("10x", 'time: unknown unit "x" in duration "10x"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("9999999999h", 'time: invalid duration "9999999999h"'),
    ],
)
def test_parse_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_go_duration(text)
    assert str(caught.value) == message


def test_parse_timeout_and_max_age() -> None:
    assert parse_timeout("") is None and parse_timeout("0s") is None
    assert parse_timeout("infinity") == Duration(seconds=None) == parse_timeout("infinite")
    assert parse_timeout("2m") == Duration(seconds=120.0)
    with pytest.raises(DurationError, match=r'^unable to parse timeout string "-2m": negative duration$'):
        parse_timeout("-2m")
    assert parse_max_age("") is None and parse_max_age("0") == "0" and parse_max_age("1h") == "3600"


@pytest.mark.parametrize(
    ("name", "canonical"),
    [("x-foo-bar", "X-Foo-Bar"), ("HOST", "Host"), ("x_y", "X_y"), ("a b", "a b"), ("", ""), ("1-a", "1-A")],
)
def test_canonical_header_key(name: str, canonical: str) -> None:
    assert canonical_header_key(name) == canonical


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("plain", "plain"),
        ("50%", "50%%"),
        ("%DOWNSTREAM_REMOTE_ADDRESS%", "%DOWNSTREAM_REMOTE_ADDRESS%"),
        ("%TLS_JA3_FINGERPRINT%/%TLS_JA4_FINGERPRINT%", "%TLS_JA3_FINGERPRINT%/%TLS_JA4_FINGERPRINT%"),
        ("%START_TIME%", "%%START_TIME%%"),
        ("%REQ(x-a)%", "%REQ(x-a)%"),
        ("%REQ(:authority)%", "%REQ(:authority)%"),
        ("%REQ(x-a?x-b):10%", "%REQ(x-a?x-b):10%"),
        ("%REQ(x a)%", "%%REQ(x a)%%"),
        ("%CONTOUR_NAMESPACE%", "ns"),
        ("%CONTOUR_SERVICE_NAME%", "%%CONTOUR_SERVICE_NAME%%"),
    ],
)
def test_escape_header_value(value: str, escaped: str) -> None:
    assert escape_header_value(value, {"CONTOUR_NAMESPACE": "ns"}) == escaped
