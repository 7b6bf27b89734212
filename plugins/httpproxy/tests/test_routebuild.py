"""build_route: one HTTPProxy route to DAG parts, with Contour's validation and status messages."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
from cpx import Config, ObjectKey, SourceView
from cpx.dag import (
    Cluster,
    CookieRewrite,
    DirectResponse,
    Duration,
    HashPolicy,
    HeadersPolicy,
    HeaderValue,
    HealthCheck,
    InternalRedirectPolicy,
    IPFilter,
    IPRule,
    LocalRateLimit,
    MirrorPolicy,
    Redirect,
    RetryPolicy,
    ServicePort,
    SlowStart,
    TimeoutPolicy,
    UpstreamProtocol,
)
from cpx.testing import ExternalNamePolicy, Resolver, SourceCache, default_ca

from cpx_httpproxy import model
from cpx_httpproxy.routebuild import RouteParts, build_route
from cpx_httpproxy.status import ProxyStatus

NS = "default"
REF = ObjectKey("projectcontour.io", "HTTPProxy", NS, "web")


def service(
    name: str,
    ports: tuple[tuple[int, str], ...] = ((80, "http"),),
    *,
    namespace: str = NS,
    external_name: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"name": n, "port": p, "protocol": "TCP"} for p, n in ports]}
    if external_name:
        spec.update(type="ExternalName", externalName=external_name)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def ca_secret(name: str, namespace: str = NS, pem: bytes | None = None) -> dict[str, Any]:
    data = base64.b64encode(default_ca().cert_pem if pem is None else pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {"ca.crt": data},
    }


# ExternalName Services enabled (the core's option), with a resolver that answers a public address.
EXTERNAL_NAMES = ExternalNamePolicy(enabled=True, resolver=Resolver(lambda name: ["192.0.2.10"]))


def cache(*objs: dict[str, Any], policy: Any = None, external_names: bool = False) -> SourceCache:
    source = SourceCache() if policy is None else SourceCache(secret_policy=policy)
    if external_names:
        source.external_names = EXTERNAL_NAMES
    for obj in objs or (service("web"), service("other", ((80, "http"), (8080, "admin")))):
        source.insert(obj)
    return source


def build(
    route: Mapping[str, Any],
    *,
    source: SourceCache | None = None,
    options: Mapping[str, Any] | None = None,
    **kw: Any,
) -> tuple[RouteParts | None, ProxyStatus]:
    status = ProxyStatus()
    parts = build_route(
        model.Route.from_dict(route),
        namespace=NS,
        source=source if source is not None else cache(),
        config=Config(options=dict(options or {})),
        status=status,
        referrer=REF,
        **kw,
    )
    return parts, status


def errors(status: ProxyStatus) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in status.errors]


def warnings(status: ProxyStatus) -> list[tuple[str, str, str]]:
    return [(w.type, w.reason, w.message) for w in status.warnings]


def only_error(route: Mapping[str, Any], **kw: Any) -> tuple[str, str, str]:
    parts, status = build(route, **kw)
    assert parts is None
    (error,) = errors(status)
    return error


def svc_route(*services: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {"services": [dict(s) for s in services] or [{"name": "web", "port": 80}], **fields}


WEB = ServicePort(namespace=NS, name="web", port=80, port_name="http", target_port=80)


# -- services --------------------------------------------------------------------------------------


def test_single_service_defaults() -> None:
    parts, status = build(svc_route())
    assert status.valid and not status.warnings
    assert parts == RouteParts(clusters=(Cluster(upstream=WEB, weight=0),))
    (cluster,) = parts.clusters
    assert cluster.load_balancer_policy == "RoundRobin"
    assert cluster.health_check is None and cluster.validation is None and cluster.sni == ""
    assert parts.timeout_policy == TimeoutPolicy() and parts.retry_policy is None
    assert parts.redirect is None and parts.direct_response is None and not parts.mirrors


def test_weights_are_kept_as_given() -> None:
    parts, _ = build(
        svc_route(
            {"name": "web", "port": 80, "weight": 90},
            {"name": "other", "port": 8080},
            {"name": "web", "port": 80},
        )
    )
    assert parts is not None
    assert [(c.upstream.name, c.upstream.port, c.weight) for c in parts.clusters] == [
        ("web", 80, 90),
        ("other", 8080, 0),  # unweighted next to weighted: 0 (Contour)
        ("web", 80, 0),
    ]
    assert parts.clusters[1].upstream.port_name == "admin"


def test_unresolved_service_skips_only_that_service() -> None:
    parts, status = build(svc_route({"name": "missing", "port": 80}, {"name": "web", "port": 80}))
    assert parts is not None
    assert [c.upstream.name for c in parts.clusters] == ["web"]
    assert errors(status) == [
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            'Spec.Routes unresolved service reference: service "default/missing" not found',
        )
    ]


def test_route_whose_services_all_fail_answers_503() -> None:
    parts, status = build(svc_route({"name": "web", "port": 8080}, {"name": "nope", "port": 80}))
    assert parts is not None  # the route set stays: the route has no clusters and no other action
    assert parts.clusters == () and parts.redirect is None and parts.direct_response is None
    assert [e[2] for e in errors(status)] == [
        'Spec.Routes unresolved service reference: port "8080" on service "default/web" not matched',
        'Spec.Routes unresolved service reference: service "default/nope" not found',
    ]


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_service_port_out_of_range(port: int) -> None:
    assert only_error(svc_route({"name": "web", "port": port})) == (
        "ServiceError",
        "ServicePortInvalid",
        'service "web": port must be in the range 1-65535',
    )


def test_external_name_needs_the_core_option() -> None:
    source = cache(service("ext", external_name="api.example.com"))
    parts, status = build(svc_route({"name": "ext", "port": 80}), source=source)
    assert parts is not None and parts.clusters == ()
    assert errors(status) == [
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            "Spec.Routes unresolved service reference: default/ext is an ExternalName service, these are not "
            "currently enabled. See the config.enableExternalNameService config file setting",
        )
    ]
    source = cache(service("ext", external_name="api.example.com"), external_names=True)
    parts, status = build(svc_route({"name": "ext", "port": 80}), source=source)
    assert status.valid and parts is not None
    (cluster,) = parts.clusters
    assert cluster.upstream.external_name == "api.example.com"
    assert cluster.sni == "api.example.com"  # Contour's determineSNI falls back to the ExternalName


def test_external_name_to_localhost_is_refused_even_when_enabled() -> None:
    source = cache(service("ext", external_name="localhost"), external_names=True)
    parts, status = build(svc_route({"name": "ext", "port": 80}), source=source)
    assert parts is not None and parts.clusters == ()
    assert "points to localhost" in errors(status)[0][2]


@pytest.mark.parametrize(
    ("protocol", "expected"),
    [("h2", UpstreamProtocol.H2), ("h2c", UpstreamProtocol.H2C), ("tls", UpstreamProtocol.TLS)],
)
def test_protocol_overrides_the_service(protocol: str, expected: UpstreamProtocol) -> None:
    annotated = service("web", annotations={"projectcontour.io/upstream-protocol.h2c": "80"})
    parts, _ = build(svc_route({"name": "web", "port": 80, "protocol": protocol}), source=cache(annotated))
    assert parts is not None and parts.clusters[0].upstream.protocol is expected


def test_service_protocol_comes_from_the_service_without_override() -> None:
    annotated = service("web", annotations={"projectcontour.io/upstream-protocol.tls": "http"})
    parts, _ = build(svc_route(), source=cache(annotated))
    assert parts is not None and parts.clusters[0].upstream.protocol is UpstreamProtocol.TLS


def test_unsupported_protocol_drops_the_route_set() -> None:
    assert only_error(svc_route({"name": "web", "port": 80, "protocol": "h3"})) == (
        "ServiceError",
        "UnsupportedProtocol",
        "unsupported protocol: h3",
    )


def test_unresolved_service_is_reported_before_its_protocol() -> None:
    parts, status = build(svc_route({"name": "nope", "port": 80, "protocol": "h3"}))
    assert parts is not None and [e[1] for e in errors(status)] == ["ServiceUnresolvedReference"]


# -- upstream validation -----------------------------------------------------------------------------


def _tls_service(**validation: Any) -> dict[str, Any]:
    return {"name": "web", "port": 80, "protocol": "tls", "validation": validation}


def test_upstream_validation() -> None:
    source = cache(service("web"), ca_secret("ca"))
    parts, status = build(
        svc_route(_tls_service(caSecret="ca", subjectName="web.example.com")), source=source
    )
    assert status.valid and parts is not None
    validation = parts.clusters[0].validation
    assert validation is not None
    assert validation.ca.ref == "default/ca" and validation.ca.ca_pem == default_ca().cert_pem
    assert validation.subject_names == ("web.example.com",)

    parts, _ = build(
        svc_route(_tls_service(caSecret="default/ca", subjectName="a", subjectNames=["a", "b"])),
        source=source,
    )
    assert parts is not None and parts.clusters[0].validation is not None
    assert parts.clusters[0].validation.subject_names == ("a", "b")


def test_upstream_validation_is_ignored_without_tls() -> None:
    parts, status = build(svc_route({"name": "web", "port": 80, "validation": {"caSecret": "missing"}}))
    assert status.valid and parts is not None and parts.clusters[0].validation is None


@pytest.mark.parametrize(
    ("validation", "message"),
    [
        (
            {"caSecret": "nope", "subjectName": "a"},
            'invalid CA Secret "default/nope": Secret default/nope not found',
        ),
        (
            {"caSecret": "bad", "subjectName": "a"},
            'invalid CA Secret "default/bad": Secret default/bad: ca.crt is not a PEM-encoded certificate',
        ),
        ({"caSecret": "ca"}, "missing subject alternative name"),
        (
            {"caSecret": "ca", "subjectName": "a", "subjectNames": ["b", "a"]},
            "first entry of SubjectNames (b) does not match SubjectName (a)",
        ),
    ],
)
def test_upstream_validation_errors(validation: dict[str, Any], message: str) -> None:
    source = cache(service("web"), ca_secret("ca"), ca_secret("bad", pem=b"not a certificate"))
    service_spec = {"name": "web", "port": 80, "protocol": "h2", "validation": validation}
    assert only_error(svc_route(service_spec), source=source) == (
        "ServiceError",
        "TLSUpstreamValidation",
        f"Service [web:80] TLS upstream validation policy error: {message}",
    )


def test_upstream_validation_ca_in_another_namespace_needs_delegation() -> None:
    source = cache(service("web"), ca_secret("ca", namespace="certs"))
    assert only_error(svc_route(_tls_service(caSecret="certs/ca", subjectName="a")), source=source) == (
        "TLSError",
        "CACertificateNotDelegated",
        'service.UpstreamValidation.CACertificate Secret "certs/ca" is not configured for '
        "certificate delegation",
    )

    def delegated(namespace: str, name: str, referrer: ObjectKey, _source: SourceView) -> bool:
        return (namespace, name, referrer.namespace) == ("certs", "ca", NS)

    source = cache(service("web"), ca_secret("ca", namespace="certs"), policy=delegated)
    parts, status = build(svc_route(_tls_service(caSecret="certs/ca", subjectName="a")), source=source)
    assert status.valid and parts is not None and parts.clusters[0].validation is not None
    assert parts.clusters[0].validation.ca.ref == "certs/ca"


def test_lookup_ca_secret_is_memoised_and_invalidated() -> None:
    source = cache(ca_secret("ca"))
    first = source.lookup_ca_secret(NS, "ca", REF)
    assert source.lookup_ca_secret(NS, "ca", REF) is first
    source.insert(ca_secret("ca", pem=b"garbage"))
    with pytest.raises(ValueError, match="not a PEM-encoded certificate"):
        source.lookup_ca_secret(NS, "ca", REF)
    # A CA bundle is not a TLS Secret: both validations are kept apart.
    source.insert(ca_secret("ca"))
    with pytest.raises(ValueError, match=r"kubernetes\.io/tls"):
        source.lookup_tls_secret(NS, "ca", REF)
    assert source.lookup_ca_secret(NS, "ca", REF).ca_pem == default_ca().cert_pem


# -- mirrors ---------------------------------------------------------------------------------------------


def test_mirror_weight_is_the_percentage() -> None:
    parts, _ = build(svc_route({"name": "web", "port": 80}, {"name": "other", "port": 80, "mirror": True}))
    assert parts is not None and [c.upstream.name for c in parts.clusters] == ["web"]
    (mirror,) = parts.mirrors
    assert mirror == MirrorPolicy(cluster=Cluster(upstream=mirror.cluster.upstream, weight=0), percent=100.0)
    assert mirror.cluster.upstream.name == "other"
    parts, _ = build(
        svc_route({"name": "web", "port": 80}, {"name": "other", "port": 80, "mirror": True, "weight": 5})
    )
    assert parts is not None and parts.mirrors[0].percent == 5.0


def test_only_one_mirror() -> None:
    route = svc_route(
        {"name": "web", "port": 80},
        {"name": "other", "port": 80, "mirror": True},
        {"name": "web", "port": 80, "mirror": True},
    )
    assert only_error(route) == (
        "ServiceError",
        "OnlyOneMirror",
        "only one service per route may be nominated as mirror",
    )


# -- health checks -----------------------------------------------------------------------------------------


def test_health_check_defaults() -> None:
    parts, _ = build(svc_route(healthCheckPolicy={"path": "/healthz"}))
    assert parts is not None
    assert parts.clusters[0].health_check == HealthCheck(
        path="/healthz",
        host="contour-envoy-healthcheck",
        interval=10.0,
        timeout=2.0,
        unhealthy_threshold=3,
        healthy_threshold=2,
    )


def test_health_check_fields_and_health_port() -> None:
    policy = {
        "path": "/ready",
        "host": "probe.example.com",
        "intervalSeconds": 3,
        "timeoutSeconds": 1,
        "unhealthyThresholdCount": 5,
        "healthyThresholdCount": 1,
        "expectedStatuses": [{"start": 200, "end": 300}, {"start": 418, "end": 419}],
    }
    parts, status = build(
        svc_route({"name": "other", "port": 80, "healthPort": 8080}, healthCheckPolicy=policy)
    )
    assert status.valid and parts is not None
    assert parts.clusters[0].health_check == HealthCheck(
        path="/ready",
        host="probe.example.com",
        interval=3.0,
        timeout=1.0,
        unhealthy_threshold=5,
        healthy_threshold=1,
        port=8080,
        expected_statuses=((200, 300), (418, 419)),
    )


def test_health_port_without_health_check_is_ignored() -> None:
    parts, status = build(svc_route({"name": "web", "port": 80, "healthPort": 9999}))
    assert status.valid and parts is not None and parts.clusters[0].health_check is None


def test_health_port_must_be_a_service_port() -> None:
    parts, status = build(
        svc_route({"name": "web", "port": 80, "healthPort": 9999}, healthCheckPolicy={"path": "/"})
    )
    assert parts is not None and parts.clusters == ()
    assert errors(status) == [
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            'Spec.Routes unresolved service reference: port "9999" on service "default/web" not matched',
        )
    ]


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (99, 200, "expected status range start 99 is not in the range 100-599"),
        (200, 601, "expected status range end 601 is not in the range 101-600"),
        (300, 300, "expected status range [300, 300) is empty: start must be less than end"),
    ],
)
def test_health_check_expected_statuses_bounds(start: int, end: int, message: str) -> None:
    route = svc_route(healthCheckPolicy={"path": "/", "expectedStatuses": [{"start": start, "end": end}]})
    assert only_error(route) == ("RouteError", "HealthCheckPolicyInvalid", message)


# -- slow start ------------------------------------------------------------------------------------------


def test_slow_start() -> None:
    slow = {"window": "10s", "aggression": "1.5", "minWeightPercent": 20}
    parts, _ = build(svc_route({"name": "web", "port": 80, "slowStartPolicy": slow}))
    assert parts is not None
    assert parts.clusters[0].slow_start == SlowStart(window=10.0, aggression=1.5, min_weight_percent=20)
    parts, _ = build(
        svc_route(
            {"name": "web", "port": 80, "slowStartPolicy": {"window": "1m"}},
            loadBalancerPolicy={"strategy": "WeightedLeastRequest"},
        )
    )
    assert parts is not None
    assert parts.clusters[0].slow_start == SlowStart(window=60.0, aggression=1.0, min_weight_percent=10)
    assert parts.clusters[0].load_balancer_policy == "WeightedLeastRequest"


@pytest.mark.parametrize(
    ("slow", "lb", "message"),
    [
        (
            {"window": "10s"},
            {"strategy": "Cookie"},
            "slow start is only supported with RoundRobin or WeightedLeastRequest load balancer strategy",
        ),
        (
            {"window": "10s"},
            {"strategy": "Random"},
            "slow start is only supported with RoundRobin or WeightedLeastRequest load balancer strategy",
        ),
        ({"window": "ten"}, None, 'error parsing window: time: invalid duration "ten" on slow start'),
        ({"window": "10"}, None, 'error parsing window: time: missing unit in duration "10" on slow start'),
        (
            {"window": "1s", "aggression": "fast"},
            None,
            'error parsing aggression: "fast" is not a decimal number on slow start',
        ),
    ],
)
def test_slow_start_invalid(slow: dict[str, Any], lb: dict[str, Any] | None, message: str) -> None:
    route = svc_route({"name": "web", "port": 80, "slowStartPolicy": slow})
    if lb is not None:
        route["loadBalancerPolicy"] = lb
    assert only_error(route) == ("ServiceError", "SlowStartInvalid", message)


def test_slow_start_with_request_hash_fallen_back_to_round_robin() -> None:
    route = svc_route(
        {"name": "web", "port": 80, "slowStartPolicy": {"window": "5s"}},
        loadBalancerPolicy={"strategy": "RequestHash", "requestHashPolicies": [{}]},
    )
    parts, status = build(route)
    assert status.valid and parts is not None and parts.clusters[0].slow_start is not None
    assert parts.clusters[0].load_balancer_policy == "RoundRobin"


# -- header policies -------------------------------------------------------------------------------------


def test_route_header_policies() -> None:
    route = svc_route(
        requestHeadersPolicy={
            "set": [
                {"name": "x-foo", "value": "bar"},
                {"name": "X-Pct", "value": "100% %HOSTNAME% %UNKNOWN% %REQ(x-id)%"},
                {"name": "X-Ns", "value": "%CONTOUR_NAMESPACE%/%CONTOUR_SERVICE_NAME%"},
            ],
            "remove": ["x-b", "X-A"],
        },
        responseHeadersPolicy={
            "set": [{"name": "x-envoy", "value": "%RESPONSE_FLAGS%"}],
            "remove": ["server"],
        },
    )
    parts, status = build(route)
    assert status.valid and parts is not None
    assert parts.request_headers == HeadersPolicy(
        set=(
            HeaderValue(name="X-Foo", value="bar"),
            HeaderValue(name="X-Pct", value="100%% %HOSTNAME% %%UNKNOWN%% %REQ(x-id)%"),
            # Route level: only the namespace is known (Contour leaves the service variables literal).
            HeaderValue(name="X-Ns", value="default/%%CONTOUR_SERVICE_NAME%%"),
        ),
        remove=("X-A", "X-B"),
    )
    assert parts.response_headers == HeadersPolicy(
        set=(HeaderValue(name="X-Envoy", value="%RESPONSE_FLAGS%"),), remove=("Server",)
    )
    # Route-level policies stay on the route; clusters have none.
    assert parts.clusters[0].request_headers == HeadersPolicy()


def test_route_host_rewrite_literal_and_sni() -> None:
    parts, _ = build(
        svc_route(requestHeadersPolicy={"set": [{"name": "host", "value": "backend.example.com"}]})
    )
    assert parts is not None
    assert parts.request_headers == HeadersPolicy(host_rewrite="backend.example.com")
    assert parts.clusters[0].sni == "backend.example.com"
    assert parts.clusters[0].request_headers == HeadersPolicy()


def test_route_host_rewrite_from_a_header() -> None:
    parts, _ = build(
        svc_route(requestHeadersPolicy={"set": [{"name": "Host", "value": "%REQ(x-target-host)%"}]})
    )
    assert parts is not None
    assert parts.request_headers == HeadersPolicy(host_rewrite_header="X-Target-Host")
    assert parts.clusters[0].sni == ""


@pytest.mark.parametrize(
    ("policy", "reason", "message"),
    [
        (
            {"requestHeadersPolicy": {"set": [{"name": "x-a", "value": "1"}, {"name": "X-A", "value": "2"}]}},
            "RequestHeadersPolicyInvalid",
            'duplicate header addition: "X-A" on request headers',
        ),
        (
            {
                "requestHeadersPolicy": {
                    "set": [{"name": "Host", "value": "a"}, {"name": "host", "value": "b"}]
                }
            },
            "RequestHeadersPolicyInvalid",
            'duplicate header addition: "Host" on request headers',
        ),
        (
            {"requestHeadersPolicy": {"set": [{"name": "x_a", "value": "1"}]}},
            "RequestHeadersPolicyInvalid",
            "invalid set header \"X_a\": [a valid HTTP header must consist of alphanumeric characters or '-' "
            "(e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')] on request headers",
        ),
        (
            {"requestHeadersPolicy": {"remove": ["x-a", "X-a"]}},
            "RequestHeadersPolicyInvalid",
            'duplicate header removal: "X-A" on request headers',
        ),
        (
            {"requestHeadersPolicy": {"remove": ["x a"]}},
            "RequestHeadersPolicyInvalid",
            'invalid remove header "x a": [a valid HTTP header must consist of alphanumeric '
            "characters or '-' "
            "(e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')] on request headers",
        ),
        (
            {"responseHeadersPolicy": {"set": [{"name": "host", "value": "a"}]}},
            "ResponseHeaderPolicyInvalid",
            'rewriting "Host" header is not supported on response headers',
        ),
    ],
)
def test_route_header_policy_errors(policy: dict[str, Any], reason: str, message: str) -> None:
    assert only_error(svc_route(**policy)) == ("RouteError", reason, message)


def test_service_header_policies_and_dynamic_variables() -> None:
    request = {
        "set": [
            {
                "name": "l5d-dst-override",
                "value": "%CONTOUR_SERVICE_NAME%.%CONTOUR_NAMESPACE%:%CONTOUR_SERVICE_PORT%",
            },
            {"name": "Host", "value": "svc.example.com"},
        ],
        "remove": ["x-internal"],
    }
    response = {"set": [{"name": "x-served-by", "value": "%CONTOUR_SERVICE_NAME%"}]}
    route = svc_route(
        {"name": "web", "port": 80, "requestHeadersPolicy": request, "responseHeadersPolicy": response},
        {"name": "other", "port": 8080, "responseHeadersPolicy": response},
        requestHeadersPolicy={"set": [{"name": "Host", "value": "route.example.com"}]},
    )
    parts, status = build(route)
    assert status.valid and parts is not None
    web, other = parts.clusters
    assert web.request_headers == HeadersPolicy(
        set=(HeaderValue(name="L5d-Dst-Override", value="web.default:80"),),
        remove=("X-Internal",),
        host_rewrite="svc.example.com",
    )
    assert web.response_headers == HeadersPolicy(set=(HeaderValue(name="X-Served-By", value="web"),))
    assert other.response_headers == HeadersPolicy(set=(HeaderValue(name="X-Served-By", value="other"),))
    # SNI: the service's Host rewrite wins over the route's.
    assert (web.sni, other.sni) == ("svc.example.com", "route.example.com")


@pytest.mark.parametrize(
    ("field", "policy", "reason", "message"),
    [
        (
            "requestHeadersPolicy",
            {"set": [{"name": "Host", "value": "%REQ(x-host)%"}]},
            "RequestHeadersPolicyInvalid",
            'rewriting "Host" header from a request header is only supported on routes on request headers',
        ),
        (
            "responseHeadersPolicy",
            {"set": [{"name": "Host", "value": "x"}]},
            "ResponseHeadersPolicyInvalid",
            'rewriting "Host" header is not supported on response headers',
        ),
        (
            "requestHeadersPolicy",
            {"set": [{"name": "a", "value": "1"}, {"name": "A", "value": "1"}]},
            "RequestHeadersPolicyInvalid",
            'duplicate header addition: "A" on request headers',
        ),
    ],
)
def test_service_header_policy_errors(field: str, policy: dict[str, Any], reason: str, message: str) -> None:
    assert only_error(svc_route({"name": "web", "port": 80, field: policy})) == (
        "ServiceError",
        reason,
        message,
    )


# -- cookie rewriting --------------------------------------------------------------------------------------


def test_cookie_rewrites() -> None:
    cookie = {"name": "session", "pathRewrite": {"value": "/app"}, "secure": False, "sameSite": "Lax"}
    route = svc_route(
        {
            "name": "web",
            "port": 80,
            "cookieRewritePolicies": [{"name": "s", "domainRewrite": {"value": "x.com"}}],
        },
        cookieRewritePolicies=[cookie],
    )
    parts, status = build(route)
    assert status.valid and parts is not None
    assert parts.cookie_rewrites == (
        CookieRewrite(name="session", path="/app", secure=False, same_site="Lax"),
    )
    assert parts.clusters[0].cookie_rewrites == (CookieRewrite(name="s", domain="x.com"),)


@pytest.mark.parametrize(
    ("where", "policies", "message"),
    [
        (
            "route",
            [{"name": "a", "secure": True}, {"name": "a", "secure": True}],
            'duplicate cookie rewrite rule for cookie "a"',
        ),
        ("route", [{"name": "a"}], 'no attributes rewritten for cookie "a"'),
        ("service", [{"name": "b"}], 'no attributes rewritten for cookie "b"'),
    ],
)
def test_cookie_rewrite_errors(where: str, policies: list[dict[str, Any]], message: str) -> None:
    if where == "route":
        route = svc_route(cookieRewritePolicies=policies)
    else:
        route = svc_route({"name": "web", "port": 80, "cookieRewritePolicies": policies})
    assert only_error(route) == (
        "RouteError",
        "CookieRewritePoliciesInvalid",
        f"{message} on {where} cookie rewrite rules",
    )


# -- timeouts and retries --------------------------------------------------------------------------------


def test_timeout_policy() -> None:
    parts, _ = build(
        svc_route(timeoutPolicy={"response": "1m30s", "idle": "infinity", "idleConnection": "1h"})
    )
    assert parts is not None
    assert parts.timeout_policy == TimeoutPolicy(response=Duration(seconds=90.0), idle=Duration(seconds=None))
    assert parts.clusters[0].idle_connection_timeout == Duration(seconds=3600.0)
    parts, _ = build(svc_route(timeoutPolicy={"response": "0s", "idle": "infinite", "idleConnection": ""}))
    assert parts is not None
    assert parts.timeout_policy == TimeoutPolicy(response=None, idle=Duration(seconds=None))
    assert parts.clusters[0].idle_connection_timeout is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "response",
            "abc",
            'error parsing response timeout: unable to parse timeout string "abc": time: invalid '
            'duration "abc"',
        ),
        (
            "idle",
            "5",
            'error parsing idle timeout: unable to parse timeout string "5": time: missing unit in '
            'duration "5"',
        ),
        (
            "idleConnection",
            "5d",
            'error parsing idle connection timeout: unable to parse timeout string "5d": '
            'time: unknown unit "d" in duration "5d"',
        ),
    ],
)
def test_timeout_policy_errors(field: str, value: str, message: str) -> None:
    assert only_error(svc_route(timeoutPolicy={field: value})) == (
        "RouteError",
        "TimeoutPolicyNotValid",
        f"route.timeoutPolicy failed to parse: {message}",
    )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({}, RetryPolicy(retry_on="5xx", num_retries=1)),
        ({"count": -1}, RetryPolicy(retry_on="5xx", num_retries=0)),
        ({"count": 0}, RetryPolicy(retry_on="5xx", num_retries=1)),
        (
            {
                "count": 5,
                "perTryTimeout": "250ms",
                "retryOn": ["gateway-error", "reset"],
                "retriableStatusCodes": [503],
            },
            RetryPolicy(
                retry_on="gateway-error,reset",
                num_retries=5,
                per_try_timeout=Duration(seconds=0.25),
                retriable_status_codes=(503,),
            ),
        ),
        # An unparsable per-try timeout means Envoy's default (Contour).
        ({"perTryTimeout": "soon"}, RetryPolicy(retry_on="5xx", num_retries=1)),
    ],
)
def test_retry_policy(policy: dict[str, Any], expected: RetryPolicy) -> None:
    parts, _ = build(svc_route(retryPolicy=policy))
    assert parts is not None and parts.retry_policy == expected


# -- load balancing ----------------------------------------------------------------------------------------


def test_cookie_load_balancing() -> None:
    parts, _ = build(svc_route(loadBalancerPolicy={"strategy": "Cookie"}))
    assert parts is not None
    assert parts.hash_policies == (
        HashPolicy(cookie="X-Contour-Session-Affinity", cookie_ttl=0.0, cookie_path="/"),
    )
    assert parts.clusters[0].load_balancer_policy == "Cookie"


def test_request_hash_load_balancing() -> None:
    lb = {
        "strategy": "RequestHash",
        "requestHashPolicies": [
            {"terminal": True, "headerHashOptions": {"headerName": "x-user"}},
            {"queryParameterHashOptions": {"parameterName": "ID"}},
            {"hashSourceIP": True},
            {"hashSourceIP": True},
            {"headerHashOptions": {"headerName": "X-User"}},
            {"headerHashOptions": {"headerName": "bad name"}},
            {"queryParameterHashOptions": {"parameterName": ""}},
            {"queryParameterHashOptions": {"parameterName": "id"}},
            {"hashSourceIP": True, "headerHashOptions": {"headerName": "x"}},
        ],
    }
    parts, status = build(svc_route(loadBalancerPolicy=lb))
    assert status.valid and parts is not None
    assert parts.hash_policies == (
        HashPolicy(header="X-User", terminal=True),
        HashPolicy(query_parameter="id"),
        HashPolicy(source_ip=True),
    )
    assert parts.clusters[0].load_balancer_policy == "RequestHash"
    assert warnings(status) == [
        (
            "SpecError",
            "IgnoredField",
            "ignoring invalid request hash policy, hashSourceIP specified multiple times",
        ),
        (
            "SpecError",
            "IgnoredField",
            "ignoring invalid header hash policy options with duplicated header name X-User",
        ),
        (
            "SpecError",
            "IgnoredField",
            'ignoring invalid header hash policy options with invalid header name "bad name": [a '
            "valid HTTP header "
            "must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for "
            "validation is "
            "'[-A-Za-z0-9]+')]",
        ),
        (
            "SpecError",
            "IgnoredField",
            "ignoring invalid query parameter hash policy options with an invalid empty query parameter name",
        ),
        (
            "SpecError",
            "IgnoredField",
            "ignoring invalid query parameter hash policy options with duplicated query parameter name id",
        ),
        (
            "SpecError",
            "IgnoredField",
            "ignoring invalid request hash policy, must set exactly one of hashSourceIP or "
            "headerHashOptions or "
            "queryParameterHashOptions",
        ),
    ]


def test_request_hash_without_valid_policies_falls_back_to_round_robin() -> None:
    parts, status = build(svc_route(loadBalancerPolicy={"strategy": "RequestHash"}))
    assert status.valid and parts is not None
    assert parts.hash_policies == () and parts.clusters[0].load_balancer_policy == "RoundRobin"
    assert warnings(status) == [
        (
            "SpecError",
            "IgnoredField",
            "ignoring invalid request hash policy options, setting load balancer strategy to default "
            "RoundRobin",
        )
    ]


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("Random", "Random"),
        ("WeightedLeastRequest", "WeightedLeastRequest"),
        ("Maglev", "RoundRobin"),
        ("", "RoundRobin"),
    ],
)
def test_load_balancer_strategies(strategy: str, expected: str) -> None:
    parts, status = build(svc_route(loadBalancerPolicy={"strategy": strategy}))
    assert status.valid and not status.warnings and parts is not None
    assert parts.clusters[0].load_balancer_policy == expected and parts.hash_policies == ()


# -- other actions and route fields -------------------------------------------------------------------------


def test_redirect() -> None:
    parts, status = build(
        {
            "requestRedirectPolicy": {
                "scheme": "https",
                "hostname": "new.example.com",
                "port": 8443,
                "prefix": "/v2",
            }
        }
    )
    assert status.valid and parts is not None
    assert parts == RouteParts(
        redirect=Redirect(
            scheme="https", hostname="new.example.com", port=8443, prefix="/v2", status_code=302
        )
    )
    parts, _ = build({"requestRedirectPolicy": {"path": "/new", "statusCode": 301}})
    assert parts is not None and parts.redirect == Redirect(path="/new", status_code=301)


def test_redirect_with_path_and_prefix() -> None:
    assert only_error({"requestRedirectPolicy": {"path": "/a", "prefix": "/b"}}) == (
        "RouteError",
        "RequestRedirectPolicy",
        "route.requestRedirectPolicy is invalid: cannot specify both redirect path and redirect prefix",
    )


def test_direct_response() -> None:
    parts, _ = build({"directResponsePolicy": {"statusCode": 418, "body": "teapot"}})
    assert parts == RouteParts(direct_response=DirectResponse(status_code=418, body="teapot"))
    parts, _ = build({"directResponsePolicy": {"statusCode": 204}})
    assert parts == RouteParts(direct_response=DirectResponse(status_code=204))


@pytest.mark.parametrize(
    "route",
    [
        {},
        {"services": [{"name": "web", "port": 80}], "directResponsePolicy": {"statusCode": 200}},
        {"requestRedirectPolicy": {"hostname": "a"}, "directResponsePolicy": {"statusCode": 200}},
    ],
)
def test_route_action_count(route: dict[str, Any]) -> None:
    assert only_error(route) == (
        "RouteError",
        "RouteActionCountNotValid",
        "must set exactly one of route.services or route.requestRedirectPolicy or route.directResponsePolicy",
    )


def test_internal_redirect() -> None:
    policy = {
        "maxInternalRedirects": 3,
        "redirectResponseCodes": [301, 307],
        "allowCrossSchemeRedirect": "SafeOnly",
        "denyRepeatedRouteRedirect": True,
    }
    parts, _ = build(svc_route(internalRedirectPolicy=policy))
    assert parts is not None
    assert parts.internal_redirect == InternalRedirectPolicy(
        max_internal_redirects=3,
        redirect_response_codes=(301, 307),
        allow_cross_scheme_redirect="SafeOnly",
        deny_repeated_route_redirect=True,
    )
    parts, _ = build(svc_route(internalRedirectPolicy={}))
    assert parts is not None
    assert parts.internal_redirect == InternalRedirectPolicy(max_internal_redirects=0)


def test_websockets_and_permit_insecure() -> None:
    parts, _ = build(svc_route(enableWebsockets=True, permitInsecure=True))
    assert parts is not None and parts.websocket and parts.permit_insecure
    parts, _ = build(svc_route(permitInsecure=True), options={"disable_permit_insecure": True})
    assert parts is not None and not parts.permit_insecure


def test_local_rate_limit() -> None:
    local = {
        "requests": 10,
        "unit": "minute",
        "burst": 5,
        "responseStatusCode": 503,
        "responseHeadersToAdd": [{"name": "x-limited", "value": "100%"}],
    }
    parts, _ = build(svc_route(rateLimitPolicy={"local": local}))
    assert parts is not None
    assert parts.local_rate_limit == LocalRateLimit(
        requests=10,
        unit_seconds=60.0,
        burst=5,
        status_code=503,
        response_headers=(HeaderValue(name="X-Limited", value="100%%"),),
    )
    parts, _ = build(svc_route(rateLimitPolicy={"local": {"requests": 1, "unit": "hour"}}))
    assert parts is not None
    assert parts.local_rate_limit == LocalRateLimit(requests=1, unit_seconds=3600.0, status_code=429)


@pytest.mark.parametrize(
    ("local", "message"),
    [
        ({"requests": 0, "unit": "second"}, "invalid requests value 0 in local rate limit policy"),
        ({"requests": 1, "unit": "day"}, 'invalid unit "day" in local rate limit policy'),
        (
            {
                "requests": 1,
                "unit": "second",
                "responseHeadersToAdd": [{"name": "a", "value": "1"}, {"name": "A", "value": "2"}],
            },
            'duplicate header addition: "A"',
        ),
    ],
)
def test_local_rate_limit_errors(local: dict[str, Any], message: str) -> None:
    assert only_error(svc_route(rateLimitPolicy={"local": local})) == (
        "RouteError",
        "RateLimitPolicyNotValid",
        f"route.rateLimitPolicy is invalid: {message}",
    )


def test_ip_filters() -> None:
    allow = [
        {"source": "Peer", "cidr": "10.1.2.3/8"},
        {"source": "Remote", "cidr": "2001:db8::1"},
        {"cidr": "192.0.2.7"},
    ]
    parts, status = build(svc_route(ipAllowPolicy=allow))
    assert status.valid and parts is not None
    assert parts.ip_filter == IPFilter(
        allow=True,
        rules=(
            IPRule(cidr="10.0.0.0/8"),
            IPRule(cidr="2001:db8::1/128", remote=True),
            IPRule(cidr="192.0.2.7/32"),
        ),
    )
    parts, _ = build(svc_route(ipDenyPolicy=[{"source": "Remote", "cidr": "0.0.0.0/0"}]))
    assert parts is not None
    assert parts.ip_filter == IPFilter(allow=False, rules=(IPRule(cidr="0.0.0.0/0", remote=True),))


def test_ip_filters_both_lists() -> None:
    route = svc_route(ipAllowPolicy=[{"cidr": "10.0.0.0/8"}], ipDenyPolicy=[{"cidr": "10.0.0.1"}])
    assert only_error(route) == (
        "IPFilterError",
        "IncompatibleIPAddressFilters",
        "cannot specify both `ipAllowPolicy` and `ipDenyPolicy`",
    )


def test_ip_filters_bad_cidrs() -> None:
    route = svc_route(ipAllowPolicy=[{"cidr": "10.0.0.300"}, {"cidr": "10.0.0.0/8"}, {"cidr": "::1/129"}])
    parts, status = build(route)
    assert parts is None
    assert errors(status) == [
        ("IPFilterError", "InvalidCIDR", "10.0.0.300 failed to parse: invalid CIDR address: 10.0.0.300/32"),
        ("IPFilterError", "InvalidCIDR", "::1/129 failed to parse: invalid CIDR address: ::1/129"),
    ]


def test_path_rewrite_pairs_and_errors() -> None:
    rewrite = {"replacePrefix": [{"prefix": "/api", "replacement": "/"}, {"replacement": "/app"}]}
    parts, status = build(svc_route(pathRewritePolicy=rewrite))
    assert status.valid and parts is not None
    assert parts.replace_prefix == (("/api", "/"), ("", "/app")) and parts.prefix_rewrite is None
    assert only_error(svc_route(pathRewritePolicy=rewrite), path_is_prefix=False) == (
        "PrefixReplaceError",
        "MustHavePrefix",
        "cannot specify prefix replacements without a prefix condition",
    )
    duplicate = {
        "replacePrefix": [{"prefix": "/a", "replacement": "/"}, {"prefix": "/a", "replacement": "/b"}]
    }
    assert only_error(svc_route(pathRewritePolicy=duplicate)) == (
        "PrefixReplaceError",
        "DuplicateReplacement",
        "duplicate replacement prefix '/a'",
    )
    ambiguous = {"replacePrefix": [{"replacement": "/a"}, {"replacement": "/b"}]}
    assert only_error(svc_route(pathRewritePolicy=ambiguous)) == (
        "PrefixReplaceError",
        "AmbiguousReplacement",
        "ambiguous prefix replacement",
    )


def test_checks_run_in_contours_order() -> None:
    # Request headers are checked before timeouts, timeouts before services.
    route = svc_route(
        {"name": "web", "port": 0},
        requestHeadersPolicy={"set": [{"name": "a b", "value": "1"}]},
        timeoutPolicy={"response": "x"},
    )
    assert only_error(route)[1] == "RequestHeadersPolicyInvalid"
    del route["requestHeadersPolicy"]
    assert only_error(route)[1] == "TimeoutPolicyNotValid"
