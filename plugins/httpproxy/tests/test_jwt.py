"""JWT verification: virtualhost.jwtProviders and routes' jwtVerificationPolicy, translated the way
Contour does (statuses with its reasons and messages, the jwt_authn filter per SNI chain, the
per-route requirement and the dnsname cluster of a remote JWKS)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from cpx import Config, ObjectKey, WatchSpec
from cpx.dag import DAG
from cpx.testing import (
    Builder,
    ListenerProcessor,
    SourceCache,
    Translation,
    make_ca_secret,
    make_tls_secret,
    translate_yaml,
)
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from cpx_httpproxy import jwt, model
from cpx_httpproxy.kinds import HTTPPROXY, HTTPS_LISTENER
from cpx_httpproxy.processor import HTTPProxyProcessor
from cpx_httpproxy.status import ProxyStatus
from cpx_httpproxy.testing import child, include, prefix, root, route, service, tls

JWT_FILTER = "envoy.filters.http.jwt_authn"
JWT_CONFIG = "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"
PROVIDER: dict[str, Any] = {
    "name": "provider-1",
    "issuer": "example.com",
    "audiences": ["audience-1", "audience-2"],
    "remoteJWKS": {"uri": "https://jwks.example.com:8443/jwks.json", "timeout": "2s", "cacheDuration": "5m"},
    "forwardJWT": True,
}


def objects_yaml(*objects: Mapping[str, Any]) -> str:
    secret, _ca = make_tls_secret("default", "tls", ["example.com"])
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s1", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]},
    }
    return yaml.safe_dump_all([secret, svc, *objects])


def translate(*objects: Mapping[str, Any], **options: Any) -> Translation:
    return translate_yaml(objects_yaml(*objects), ["httpproxy"], options=options)


def proxy(*routes: Mapping[str, Any], providers: Any = (PROVIDER,), **vhost: Any) -> dict[str, Any]:
    routes = routes or (route(services=[service("s1")]),)
    return root(
        "jwt",
        "example.com",
        *routes,
        tls=vhost.pop("tls", tls("tls")),
        jwt_providers=list(providers),
        **vhost,
    )


def errors(result: Translation, name: str = "jwt") -> list[tuple[str, str, str]]:
    condition = result.status("HTTPProxy", name)["conditions"][0]
    return [(e["type"], e["reason"], e["message"]) for e in condition.get("errors", [])]


def https_chain_filters(result: Translation) -> dict[str, Any]:
    [listener] = [x for x in result.envoy_json()["listeners"] if x["name"] == "ingress_https"]
    [chain] = [c for c in listener["filterChains"] if c.get("filterChainMatch", {}).get("serverNames")]
    [hcm] = chain["filters"]
    return {f["name"]: f.get("typedConfig") for f in hcm["typedConfig"]["httpFilters"]}


def https_routes(result: Translation) -> dict[str, dict[str, Any]]:
    [config] = [c for c in result.envoy_json()["routes"] if c["name"] == "https/example.com"]
    [vhost] = config["virtualHosts"]
    return {r["match"].get("prefix", r["match"].get("path", "")): r for r in vhost["routes"]}


def requirement(r: Mapping[str, Any]) -> str | None:
    config = r.get("typedPerFilterConfig", {}).get(JWT_FILTER)
    return None if config is None else str(config["requirementName"])


# -- what Envoy gets -------------------------------------------------------------------------------


def test_documented_provider_becomes_the_filter_a_requirement_and_a_dnsname_cluster() -> None:
    result = translate(
        proxy(
            route(prefix("/"), services=[service("s1")], jwt_verification_policy={"require": "provider-1"}),
            route(prefix("/css"), services=[service("s1")]),
        )
    )
    assert result.status("HTTPProxy", "jwt")["currentStatus"] == "valid"
    filters = https_chain_filters(result)
    names = list(filters)
    assert names.index("envoy.filters.http.rbac") < names.index(JWT_FILTER) < names.index("router")
    assert filters[JWT_FILTER] == {
        "@type": JWT_CONFIG,
        "providers": {
            "provider-1": {
                "issuer": "example.com",
                "audiences": ["audience-1", "audience-2"],
                "remoteJwks": {
                    "httpUri": {
                        "uri": "https://jwks.example.com:8443/jwks.json",
                        "cluster": "dnsname/https/jwks.example.com",
                        "timeout": "2s",
                    },
                    "cacheDuration": "300s",
                },
                "forward": True,
            }
        },
        "requirementMap": {"provider-1": {"providerName": "provider-1"}},
    }
    routes = https_routes(result)
    assert requirement(routes["/"]) == "provider-1"
    assert requirement(routes["/css"]) is None
    [cluster] = [c for c in result.envoy_json()["clusters"] if c["name"].startswith("dnsname/")]
    assert cluster["type"] == "STRICT_DNS"
    assert cluster.get("dnsLookupFamily", "AUTO") == "AUTO"
    socket = cluster["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"][
        "socketAddress"
    ]
    assert socket == {"address": "jwks.example.com", "portValue": 8443}
    assert cluster["transportSocket"]["typedConfig"]["sni"] == "jwks.example.com"
    assert "validationContext" not in cluster["transportSocket"]["typedConfig"].get("commonTlsContext", {})
    # The plain HTTP chain has no jwt_authn (its routes redirect to HTTPS).
    [http] = [x for x in result.envoy_json()["listeners"] if x["name"] == "ingress_http"]
    assert JWT_FILTER not in json.dumps(http)


def test_default_provider_applies_to_included_routes_unless_disabled() -> None:
    provider = {**PROVIDER, "default": True}
    result = translate(
        proxy(
            route(prefix("/css"), services=[service("s1")], jwt_verification_policy={"disabled": True}),
            providers=[provider],
            includes=[include("blog", prefix("/blog")), include("missing", prefix("/gone"))],
        ),
        child("blog", route(services=[service("s1")])),
    )
    routes = https_routes(result)
    assert requirement(routes["/blog"]) == "provider-1"
    assert requirement(routes["/css"]) is None
    # The 502 stand-in of a missing include needs no token, as Contour's.
    assert requirement(routes["/gone"]) is None


def test_remote_jwks_defaults_http_scheme_and_dns_family() -> None:
    provider = {"name": "p", "remoteJWKS": {"uri": "http://10.0.0.1/keys", "dnsLookupFamily": "v4"}}
    result = translate(proxy(providers=[provider]))
    http_uri = https_chain_filters(result)[JWT_FILTER]["providers"]["p"]["remoteJwks"]["httpUri"]
    assert http_uri == {"uri": "http://10.0.0.1/keys", "cluster": "dnsname/http/10.0.0.1", "timeout": "1s"}
    [cluster] = [c for c in result.envoy_json()["clusters"] if c["name"] == "dnsname/http/10.0.0.1"]
    assert cluster["type"] == "STRICT_DNS" and cluster["dnsLookupFamily"] == "V4_ONLY"
    assert "transportSocket" not in cluster


def test_remote_jwks_validation_uses_the_ca_secret() -> None:
    provider = {
        "name": "p",
        "remoteJWKS": {
            "uri": "https://idp.example.com/jwks",
            "validation": {"caSecret": "ca", "subjectName": "idp.example.com"},
        },
    }
    result = translate(proxy(providers=[provider]), make_ca_secret("default", "ca"))
    [cluster] = [c for c in result.envoy_json()["clusters"] if c["name"] == "dnsname/https/idp.example.com"]
    context = cluster["transportSocket"]["typedConfig"]["commonTlsContext"]["validationContext"]
    assert context["matchTypedSubjectAltNames"] == [
        {"sanType": "DNS", "matcher": {"exact": "idp.example.com"}}
    ]


ONE_KEY = '{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}'
LOCAL = {"name": "p", "issuer": "example.com", "localJWKS": {"secretName": "my-jwks", "key": "jwks.json"}}
OTHER_KEY = '{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}'


@pytest.mark.parametrize(
    "keys",
    [
        [],
        [{"kty": "oct"}],
        [{"kty": "RSA", "n": "", "e": "AQAB"}],
        [{"kty": "EC", "crv": "P-256", "x": "AQ", "y": "AQ"}],  # not a point on the curve
        [{"kty": "OKP", "crv": "X25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}],
        [{"kty": "dsa"}, "not a key"],
    ],
)
def test_a_local_jwks_without_a_usable_key_is_refused_as_envoy_would(keys: list[Any]) -> None:
    secret = jwks_secret(json.dumps({"keys": keys}))
    provider = {
        "name": "p",
        "issuer": "example.com",
        "localJWKS": {"secretName": "my-jwks", "key": "jwks.json"},
    }
    result = translate(proxy(providers=[provider]), secret)
    message = (
        'Spec.VirtualHost.JWTProviders.LocalJWKS for provider "p" is invalid: JWKS has no valid public key'
    )
    assert ("JWTVerificationError", "LocalJWKSInvalid", message) in errors(result)


def test_a_local_jwks_with_real_rsa_and_ec_keys_is_used() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_numbers()
    ec_key = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()

    def b64(number: int, size: int) -> str:
        return base64.urlsafe_b64encode(number.to_bytes(size, "big")).decode().rstrip("=")

    keys = [
        {"kty": "RSA", "n": b64(rsa_key.n, 256), "e": b64(rsa_key.e, 3)},
        {"kty": "EC", "crv": "P-256", "x": b64(ec_key.x, 32), "y": b64(ec_key.y, 32)},
    ]
    for key in keys:
        provider = {
            "name": "p",
            "issuer": "e.com",
            "localJWKS": {"secretName": "my-jwks", "key": "jwks.json"},
        }
        result = translate(proxy(providers=[provider]), jwks_secret(json.dumps({"keys": [key]})))
        assert JWT_FILTER in https_chain_filters(result), key


def test_local_jwks_from_an_opaque_secret() -> None:
    jwks = ONE_KEY
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "my-jwks", "namespace": "default"},
        "type": "Opaque",
        "data": {"jwks.json": base64.b64encode(jwks.encode()).decode()},
    }
    provider = {
        "name": "p",
        "issuer": "example.com",
        "localJWKS": {"secretName": "my-jwks", "key": "jwks.json"},
    }
    result = translate(proxy(providers=[provider]), secret)
    assert https_chain_filters(result)[JWT_FILTER]["providers"]["p"]["localJwks"] == {"inlineString": jwks}


def test_two_hosts_share_one_jwks_cluster() -> None:
    other = root("other", "other.example.com", route(services=[service("s1")]), tls=tls("tls"))
    other["spec"]["virtualhost"]["jwtProviders"] = [PROVIDER]
    result = translate(proxy(), other)
    assert result.status("HTTPProxy", "other")["currentStatus"] == "valid"
    names = [c["name"] for c in result.envoy_json()["clusters"] if c["name"].startswith("dnsname/")]
    assert names == ["dnsname/https/jwks.example.com"]


# -- Contour's reasons for every invalid case -------------------------------------------------------

E = "JWTVerificationError"
P = "Spec.VirtualHost.JWTProviders"


def remote(uri: str, **fields: Any) -> dict[str, Any]:
    return {"name": "p", "remoteJWKS": {"uri": uri, **fields}}


@pytest.mark.parametrize(
    ("providers", "expected"),
    [
        (
            [PROVIDER, PROVIDER],
            (E, "DuplicateProviderName", f"{P} is invalid: duplicate name provider-1"),
        ),
        (
            [
                {**remote("https://a/"), "default": True},
                {**remote("https://b/"), "name": "q", "default": True},
            ],
            (
                E,
                "MultipleDefaultProvidersSpecified",
                f"{P} is invalid: at most one provider can be set as the default",
            ),
        ),
        (
            [remote("example.com/jwks.json")],
            (
                E,
                "RemoteJWKSSchemeInvalid",
                f'{P}.RemoteJWKS.URI has invalid scheme "", must be http or https',
            ),
        ),
        (
            [remote("ftp://example.com/jwks.json")],
            (
                E,
                "RemoteJWKSSchemeInvalid",
                f'{P}.RemoteJWKS.URI has invalid scheme "ftp", must be http or https',
            ),
        ),
        (
            [remote("https://example.com:abc/jwks")],
            (
                E,
                "RemoteJWKSURIInvalid",
                f"{P}.RemoteJWKS.URI is invalid: "
                'parse "https://example.com:abc/jwks": invalid port ":abc" after host',
            ),
        ),
        (
            [remote("https://example.com:99999/jwks")],
            (E, "RemoteJWKSPortInvalid", f"{P}.RemoteJWKS.URI has an invalid port: 99999"),
        ),
        (
            [remote("http://example.com/", validation={"caSecret": "ca", "subjectName": "x"})],
            (
                E,
                "RemoteJWKSUpstreamValidationInvalid",
                f"{P}.RemoteJWKS.UpstreamValidation must not be specified when URI scheme is http.",
            ),
        ),
        (
            [remote("https://example.com/", validation={"caSecret": "nope", "subjectName": "x"})],
            (
                E,
                "RemoteJWKSUpstreamValidationInvalid",
                f"{P}.RemoteJWKS.UpstreamValidation is invalid: "
                'invalid CA Secret "default/nope": Secret default/nope not found',
            ),
        ),
        (
            [remote("https://example.com/", validation={"caSecret": "other/ca", "subjectName": "x"})],
            (
                E,
                "RemoteJWKSCACertificateNotDelegated",
                f'{P}.RemoteJWKS.UpstreamValidation.CACertificate Secret "other/ca" '
                "is not configured for certificate delegation",
            ),
        ),
        (
            [{"name": "p", "localJWKS": {"secretName": "absent", "key": "k"}}],
            (E, "LocalJWKSInvalid", f'{P}.LocalJWKS for provider "p" is invalid: Secret not found'),
        ),
    ],
)
def test_invalid_providers_drop_the_root_with_contours_reason(
    providers: Any, expected: tuple[str, str, str]
) -> None:
    result = translate(proxy(providers=providers), make_ca_secret("other", "ca"))
    assert errors(result) == [expected]
    assert "https/example.com" not in [c["name"] for c in result.envoy_json()["routes"]]
    assert not [c for c in result.envoy_json()["clusters"] if c["name"].startswith("dnsname/")]


# The CRD's schema refuses these before any processor sees them; Contour's processor checks anyway.
@pytest.mark.parametrize(
    ("providers", "expected"),
    [
        (
            [{**remote("https://a/"), "localJWKS": {"secretName": "s", "key": "k"}}],
            (
                E,
                "JWKSSourceConflict",
                f'{P} for provider "p" is invalid: at most one of remoteJWKS or localJWKS may be set',
            ),
        ),
        (
            [{"name": "p"}],
            (
                E,
                "JWKSSourceMissing",
                f'{P} for provider "p" is invalid: exactly one of remoteJWKS or localJWKS must be set',
            ),
        ),
        (
            [remote("https://example.com/", timeout="1x")],
            (
                E,
                "RemoteJWKSTimeoutInvalid",
                f'{P}.RemoteJWKS.Timeout is invalid: time: unknown unit "x" in duration "1x"',
            ),
        ),
        (
            [remote("https://example.com/", cacheDuration="abc")],
            (
                E,
                "RemoteJWKSCacheDurationInvalid",
                f'{P}.RemoteJWKS.CacheDuration is invalid: time: invalid duration "abc"',
            ),
        ),
        (
            [remote("https://example.com/", dnsLookupFamily="v5")],
            (
                E,
                "RemoteJWKSDNSLookupFamilyInvalid",
                f'{P}.RemoteJWKS.DNSLookupFamily has an invalid value "v5", must be auto, all, v4 or v6',
            ),
        ),
    ],
)
def test_providers_the_schema_refuses_have_contours_reasons_too(
    providers: Any, expected: tuple[str, str, str]
) -> None:
    vhost = model.VirtualHost.from_dict({"fqdn": "example.com", "jwtProviders": providers})
    status = ProxyStatus()
    referrer = ObjectKey("projectcontour.io", "HTTPProxy", "default", "jwt")
    assert jwt.resolve_providers(vhost, referrer=referrer, source=SourceCache().view, status=status) is None
    assert [(e.type, e.reason, e.message) for e in status.errors] == [expected]


def test_providers_need_tls_termination() -> None:
    result = translate(proxy(tls=None))
    assert errors(result) == [
        (E, "JWTVerificationNotPermitted", f"{P} can only be defined for root HTTPProxies that terminate TLS")
    ]


def test_fallback_certificate_is_incompatible() -> None:
    result = translate(proxy(tls=tls("tls", enable_fallback_certificate=True)))
    assert errors(result) == [
        (
            "TLSError",
            "TLSIncompatibleFeatures",
            "Spec.Virtualhost.TLS fallback & JWT providers are incompatible",
        )
    ]


def test_route_requiring_an_undefined_provider() -> None:
    bad = route(services=[service("s1")], jwt_verification_policy={"require": "nope"})
    assert errors(translate(proxy(bad))) == [
        (E, "JWTProviderNotDefined", 'Route references an undefined JWT provider "nope"')
    ]
    # Without any provider on the host, too.
    assert errors(translate(proxy(bad, providers=()))) == [
        (E, "JWTProviderNotDefined", 'Route references an undefined JWT provider "nope"')
    ]


def test_route_policy_with_require_and_disabled() -> None:
    bad = route(services=[service("s1")], jwt_verification_policy={"require": "provider-1", "disabled": True})
    assert errors(translate(proxy(bad))) == [
        (
            E,
            "InvalidJWTVerificationPolicy",
            "route's JWT verification policy cannot specify both require and disabled",
        )
    ]


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("https://h/x", ("https", "h", "")),
        ("HTTP://H:81/x?y#z", ("http", "H", "81")),
        ("https://user:pw@[::1]:8443/jwks", ("https", "::1", "8443")),
        ("example.com/jwks.json", ("", "", "")),
        ("mailto:x@y", ("mailto", "", "")),
    ],
)
def test_split_uri(uri: str, expected: tuple[str, str, str]) -> None:
    assert jwt.split_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("https://[::1/x", "parse \"https://[::1/x\": missing ']' in host"),
        ("https:///jwks", 'parse "https:///jwks": missing host'),
        (":x", 'parse ":x": missing protocol scheme'),
        ("https://a\n/", "net/url: invalid control character in URL"),
    ],
)
def test_split_uri_refuses(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[").replace("]", r"\]") + "$"):
        jwt.split_uri(uri)


# -- incremental builds ------------------------------------------------------------------------------


def jwks_secret(jwks: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "my-jwks", "namespace": "default"},
        "type": "Opaque",
        "data": {"jwks.json": base64.b64encode(jwks.encode()).decode()},
    }


def test_replayed_and_rebuilt_roots_keep_providers_and_clusters_in_step() -> None:
    config = Config()
    source = SourceCache(watches={HTTPPROXY.group_kind: WatchSpec(gvk=HTTPPROXY)})
    processor = HTTPProxyProcessor.from_config(config)
    builder = Builder([("listeners", ListenerProcessor(config)), ("httpproxy", processor)])
    local = {"name": "local", "localJWKS": {"secretName": "my-jwks", "key": "jwks.json"}}
    for obj in yaml.safe_load_all(objects_yaml(proxy(providers=[PROVIDER, local]), jwks_secret(ONE_KEY))):
        source.insert(obj)

    def providers(dag: DAG) -> jwt.Providers | None:
        return (
            dag.listeners[HTTPS_LISTENER]
            .secure_virtual_hosts["example.com"]
            .attachments.get(jwt.JWT_PROVIDERS)
        )

    first = providers(builder.build(source))
    assert first is not None and first.items[1].local_jwks == ONE_KEY
    # An unrelated change: the root is replayed, with its providers and its JWKS cluster.
    source.insert({**jwks_secret("{}"), "metadata": {"name": "unrelated", "namespace": "default"}})
    dag = builder.build(source)
    assert processor.built == 0
    assert providers(dag) == first
    assert [n.name for n in dag.cluster_nodes()] == ["dnsname/https/jwks.example.com"]
    # The Secret it read changes: rebuilt with the new keys; made unusable: the root is dropped.
    source.insert(jwks_secret(OTHER_KEY))
    rebuilt = providers(builder.build(source))
    assert processor.built == 1 and rebuilt is not None
    assert rebuilt.items[1].local_jwks == OTHER_KEY
    source.insert(jwks_secret("[]"))
    dag = builder.build(source)
    assert HTTPS_LISTENER not in dag.listeners  # its only host is gone
    assert processor.published is not None
    assert [e.reason for e in processor.published.rendered[("default", "jwt")].errors] == ["LocalJWKSInvalid"]
    assert dag.cluster_nodes() == ()
