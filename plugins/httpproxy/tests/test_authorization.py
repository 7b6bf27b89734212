"""virtualhost.authorization and authPolicy: Contour's status reasons and the ext_authz config."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from cpx.testing import make_tls_secret

from cpx_httpproxy.testing import prefix, root, route, service

EXT_AUTHZ = "envoy.filters.http.ext_authz"
SECRET, _CA = make_tls_secret("default", "tls", ["www.example.com"])
BASE = [
    SECRET,
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": "default"},
     "spec": {"ports": [{"port": 80}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "authsvc", "namespace": "default"},
     "spec": {"ports": [{"port": 9443}]}},
]  # fmt: skip


def extension(name: str = "authz", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"protocol": "h2c", "services": [{"name": "authsvc", "port": 9443}], **spec},
    }


def proxy(authorization: dict[str, Any] | None, *routes: dict[str, Any], **tls: Any) -> dict[str, Any]:
    out = root(
        "www",
        "www.example.com",
        *(routes or (route(services=[service("echo")]),)),
        tls=None if tls.get("none") else {"secretName": "tls", **tls},
    )
    if authorization is not None:
        out["spec"]["virtualhost"]["authorization"] = authorization
    return out


def translate(
    cpx_translate: Any, *objects: dict[str, Any], plugins: tuple[str, ...] = ("httpproxy", "extsvc")
) -> Any:
    return cpx_translate(yaml.safe_dump_all([*BASE, *objects]), list(plugins))


def errors(result: Any) -> list[tuple[str, str, str]]:
    [condition] = result.status("HTTPProxy", "www")["conditions"]
    return [(e["type"], e["reason"], e["message"]) for e in condition.get("errors", ())]


def ext_authz(result: Any) -> dict[str, Any] | None:
    for listener in result.envoy_json()["listeners"]:
        for chain in listener.get("filterChains", ()):
            for f in chain["filters"]:
                names = [h["name"] for h in f["typedConfig"].get("httpFilters", ())]
                if EXT_AUTHZ in names:
                    assert names.index(EXT_AUTHZ) == names.index("envoy.filters.http.rbac") + 1
                    found: dict[str, Any] = f["typedConfig"]["httpFilters"][names.index(EXT_AUTHZ)]
                    return found["typedConfig"]
    return None


def per_route(result: Any, config: str = "https/www.example.com") -> dict[str, Any]:
    [routes] = [r for r in result.envoy_json()["routes"] if r["name"] == config]
    return {
        rt["match"]["prefix"]: rt.get("typedPerFilterConfig", {}).get(EXT_AUTHZ)
        for vh in routes["virtualHosts"]
        for rt in vh["routes"]
    }


def test_grpc_authorization_as_contour_configures_it(cpx_translate: Any) -> None:
    auth = {
        "extensionRef": {"name": "authz"},
        "failOpen": True,
        "withRequestBody": {"maxRequestBytes": 4096, "packAsBytes": True},
        "authPolicy": {"context": {"a": "1", "b": "2"}},
    }
    routes = (
        route(prefix("/off"), services=[service("echo")], auth_policy={"disabled": True}),
        route(prefix("/ctx"), services=[service("echo")], auth_policy={"context": {"b": "3", "c": "4"}}),
        route(services=[service("echo")]),
    )
    result = translate(cpx_translate, extension(timeoutPolicy={"response": "750ms"}), proxy(auth, *routes))
    assert errors(result) == []
    config = ext_authz(result)
    assert config is not None
    assert config["grpcService"] == {
        "envoyGrpc": {"clusterName": "extension/default/authz", "authority": "extension.default.authz"},
        "timeout": "0.750s",  # the ExtensionService's response timeout
    }
    assert config["failureModeAllow"] is True
    assert config["withRequestBody"] == {"maxRequestBytes": 4096, "packAsBytes": True}
    assert (config["clearRouteCache"], config["statusOnError"], config["includePeerCertificate"]) == (
        True,
        {"code": "Forbidden"},
        True,
    )
    assert per_route(result) == {
        "/off": {"@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute",
                 "disabled": True},
        "/ctx": {"@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute",
                 "checkSettings": {"contextExtensions": {"a": "1", "b": "3", "c": "4"}}},
        "/": {"@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute",
              "checkSettings": {"contextExtensions": {"a": "1", "b": "2"}}},
    }  # fmt: skip


def test_the_proxys_own_timeout_wins(cpx_translate: Any) -> None:
    auth = {"extensionRef": {"name": "authz"}, "responseTimeout": "2s"}
    result = translate(cpx_translate, extension(timeoutPolicy={"response": "750ms"}), proxy(auth))
    config = ext_authz(result)
    assert config is not None and config["grpcService"]["timeout"] == "2s"


def test_a_vhost_policy_disabling_authorization_disables_every_route(cpx_translate: Any) -> None:
    auth = {"extensionRef": {"name": "authz"}, "authPolicy": {"disabled": True}}
    routes = (
        route(prefix("/on"), services=[service("echo")], auth_policy={"disabled": False}),
        route(services=[service("echo")]),
    )
    result = translate(cpx_translate, extension(), proxy(auth, *routes))
    decided = per_route(result)
    assert decided["/on"] is None  # enabled again: no override
    assert decided["/"] is not None and decided["/"]["disabled"] is True


def test_without_authorization_nothing_changes(cpx_translate: Any) -> None:
    route_with_policy = route(services=[service("echo")], auth_policy={"context": {"a": "1"}})
    result = translate(cpx_translate, extension(), proxy(None, route_with_policy))
    assert ext_authz(result) is None
    assert per_route(result) == {"/": None}


def test_the_extension_service_of_another_namespace(cpx_translate: Any) -> None:
    ext = extension()
    ext["metadata"]["namespace"] = "auth"
    svc = {**BASE[2], "metadata": {"name": "authsvc", "namespace": "auth"}}
    result = translate(
        cpx_translate, svc, ext, proxy({"extensionRef": {"name": "authz", "namespace": "auth"}})
    )
    config = ext_authz(result)
    assert config is not None and config["grpcService"]["envoyGrpc"]["clusterName"] == "extension/auth/authz"


REASONS = [
    (
        {"extensionRef": {"name": "nope"}},
        ("AuthError", "ExtensionServiceNotFound",
         'Spec.Virtualhost.Authorization.ServiceRef extension service "default/nope" not found'),
    ),
    (
        {"extensionRef": {"name": "authz", "apiVersion": "projectcontour.io/v1"}},
        ("AuthError", "AuthBadResourceVersion",
         'Spec.Virtualhost.Authorization.extensionRef specifies an unsupported resource version '
         '"projectcontour.io/v1"'),
    ),
    (
        {"extensionRef": {"name": "authz"}, "responseTimeout": ".s"},
        ("AuthError", "AuthResponseTimeoutInvalid",
         'Spec.Virtualhost.Authorization.ResponseTimeout is invalid: unable to parse timeout string ".s": '
         'time: invalid duration ".s"'),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("auth", "reason"), REASONS)
def test_invalid_authorization_leaves_the_root_out(
    cpx_translate: Any, auth: dict[str, Any], reason: tuple[str, str, str]
) -> None:
    result = translate(cpx_translate, extension(), proxy(auth))
    assert errors(result) == [reason]
    assert ext_authz(result) is None
    assert "https/www.example.com" not in {r["name"] for r in result.envoy_json()["routes"]}


def test_an_invalid_extension_service_is_not_found(cpx_translate: Any) -> None:
    result = translate(
        cpx_translate,
        extension(services=[{"name": "missing", "port": 1}]),
        proxy({"extensionRef": {"name": "authz"}}),
    )
    assert [r for _t, r, _m in errors(result)] == ["ExtensionServiceNotFound"]


def test_authorization_needs_tls(cpx_translate: Any) -> None:
    result = translate(cpx_translate, extension(), proxy({"extensionRef": {"name": "authz"}}, none=True))
    assert errors(result) == [
        (
            "AuthError",
            "AuthNotPermitted",
            "Spec.VirtualHost.Authorization.ExtensionServiceRef can only be defined for root HTTPProxies "
            "that terminate TLS",
        )
    ]


def test_authorization_and_the_fallback_certificate_are_incompatible(cpx_translate: Any) -> None:
    fallback = {**SECRET, "metadata": {"name": "fallback", "namespace": "default"}}
    result = cpx_translate(
        yaml.safe_dump_all(
            [
                *BASE,
                fallback,
                extension(),
                proxy({"extensionRef": {"name": "authz"}}, enableFallbackCertificate=True),
            ]
        ),
        ["httpproxy", "extsvc"],
        options={"fallback_certificate": "default/fallback"},
    )
    assert errors(result) == [
        (
            "TLSError",
            "TLSIncompatibleFeatures",
            "Spec.Virtualhost.TLS fallback & client authorization are incompatible",
        )
    ]


def test_context_is_for_grpc_servers_only(cpx_translate: Any) -> None:
    auth = {"extensionRef": {"name": "authz"}, "serviceType": "http", "authPolicy": {"context": {"a": "1"}}}
    result = translate(cpx_translate, extension(), proxy(auth))
    assert errors(result) == [
        ("AuthError", "AuthContextForHTTP",
         "Spec.Virtualhost.Authorization.AuthPolicy.Context are only applied to grpc service type")
    ]  # fmt: skip


def test_http_authorization_servers(cpx_translate: Any) -> None:
    auth = {
        "extensionRef": {"name": "authz"},
        "serviceType": "http",
        "httpSettings": {"pathPrefix": "/check"},
    }
    config = ext_authz(translate(cpx_translate, extension(), proxy(auth)))
    assert config is not None
    assert config["httpService"] == {
        "serverUri": {"uri": "http://dummy/", "cluster": "extension/default/authz", "timeout": "0s"},
        "pathPrefix": "/check",
    }


def test_without_the_extsvc_plugin_the_message_names_it(cpx_translate: Any) -> None:
    result = translate(cpx_translate, proxy({"extensionRef": {"name": "authz"}}), plugins=("httpproxy",))
    assert errors(result) == [
        (
            "AuthError",
            "ExtensionServiceNotFound",
            'Spec.Virtualhost.Authorization.ServiceRef extension service "default/authz" not found '
            "(ExtensionServices need the 'extsvc' plugin, which is not enabled)",
        )
    ]


GLOBAL = {"global_ext_auth_extension_service": "default/authz", "global_ext_auth_context": ("k=v",)}


def test_global_authorization_covers_roots_without_their_own(cpx_translate: Any) -> None:
    objects = [*BASE, extension(), proxy(None)]
    result = cpx_translate(yaml.safe_dump_all(objects), ["httpproxy", "extsvc"], options=GLOBAL)
    assert errors(result) == []
    config = ext_authz(result)  # the secure chain's (the plain listener's has the same)
    assert (
        config is not None and config["grpcService"]["envoyGrpc"]["clusterName"] == "extension/default/authz"
    )
    assert per_route(result)["/"] == {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute",
        "checkSettings": {"contextExtensions": {"k": "v"}},
    }
    plain = [c for c in result.envoy_json()["listeners"] if c["name"] == "ingress_http"]
    assert "envoy.filters.http.ext_authz" in str(plain)


def test_a_root_opts_out_of_global_authorization(cpx_translate: Any) -> None:
    objects = [*BASE, extension(), proxy({"authPolicy": {"disabled": True}})]
    result = cpx_translate(yaml.safe_dump_all(objects), ["httpproxy", "extsvc"], options=GLOBAL)
    assert errors(result) == []
    decided = per_route(result)["/"]
    assert decided is not None and decided["disabled"] is True


def test_a_missing_global_extension_service_is_every_roots_error(cpx_translate: Any) -> None:
    # The TLS root is left out at its secure virtual host (Contour's order: no second check).
    result = cpx_translate(yaml.safe_dump_all([*BASE, proxy(None)]), ["httpproxy", "extsvc"], options=GLOBAL)
    assert [r for _t, r, _m in errors(result)] == ["ExtensionServiceNotFound"]
    assert "envoy.filters.http.ext_authz" not in str(result.envoy_json()["listeners"])


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"global_ext_auth_extension_service": "authz"}, "expected namespace/name"),
        ({**GLOBAL, "global_ext_auth_context": ("novalue",)}, "expected key=value"),
        ({**GLOBAL, "global_ext_auth_response_timeout": "soon"}, "unable to parse timeout string"),
        ({**GLOBAL, "global_ext_auth_service_type": "thrift"}, "expected grpc or http"),
    ],
)
def test_bad_global_options_refuse_the_start(options: dict[str, Any], problem: str) -> None:
    from cpx import Config, ConfigError

    from cpx_httpproxy.processor import Settings

    with pytest.raises(ConfigError, match=problem):
        Settings.from_config(Config(options=options))


def test_http_servers_allowed_headers(cpx_translate: Any) -> None:
    settings = {
        "allowedAuthorizationHeaders": [{"exact": "cookie"}, {"prefix": "x-", "ignoreCase": True}],
        "allowedUpstreamHeaders": [{"suffix": "-user"}],
    }
    auth = {"extensionRef": {"name": "authz"}, "serviceType": "http", "httpSettings": settings}
    config = ext_authz(translate(cpx_translate, extension(), proxy(auth)))
    assert config is not None
    assert config["allowedHeaders"] == {
        "patterns": [{"exact": "cookie"}, {"prefix": "x-", "ignoreCase": True}]
    }
    upstream = config["httpService"]["authorizationResponse"]["allowedUpstreamHeaders"]
    assert upstream == {"patterns": [{"suffix": "-user"}]}


def test_an_allowed_header_needs_exactly_one_match(cpx_translate: Any) -> None:
    settings = {"allowedUpstreamHeaders": [{"exact": "a", "prefix": "b"}]}
    auth = {"extensionRef": {"name": "authz"}, "serviceType": "http", "httpSettings": settings}
    result = translate(cpx_translate, extension(), proxy(auth))
    assert errors(result) == [
        (
            "AuthError",
            "AuthBadAllowedHeader",
            "Spec.Virtualhost.Authorization.HTTPServerSettings.AllowedUpstreamHeaders is invalid: "
            "only one of prefix, suffix, exact, and contains should be set in the allowedHeader",
        )
    ]
