"""Global rate limiting (rateLimitPolicy.global): Contour's RateLimit actions, per-route opt-out,
default policy, the filter from the rate limit service options, status reasons."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from cpx import Config, ConfigError
from cpx.dag import Duration, ExtensionUpstream
from cpx.testing import PluginHost, SnapshotHandler, make_ca_secret

from cpx_httpproxy import ratelimit
from cpx_httpproxy.processor import Settings

Translate = Callable[..., Any]

PLUGINS = ["httpproxy", "extsvc"]
SERVICE = {"rate_limit_service_extension_service": "projectcontour/ratelimit"}


def _extension_service(**spec: Any) -> str:
    """Contour's documented ExtensionService for the rate limit service, and its Service."""
    extension = {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"namespace": "projectcontour", "name": "ratelimit"},
        "spec": {"protocol": "h2c", "services": [{"name": "ratelimit", "port": 8081}], **spec},
    }
    rls = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": "projectcontour", "name": "ratelimit"},
        "spec": {"ports": [{"port": 8081}]},
    }
    return yaml.safe_dump_all([extension, rls], explicit_start=True)


ECHO = """---
apiVersion: v1
kind: Service
metadata: {name: s1, namespace: default}
spec: {ports: [{port: 80}]}
"""


def _proxy(vhost_policy: Any = None, route_policy: Any = None, name: str = "rl") -> str:
    virtualhost: dict[str, Any] = {"fqdn": f"{name}.example.com"}
    if vhost_policy is not None:
        virtualhost["rateLimitPolicy"] = {"global": vhost_policy}
    route: dict[str, Any] = {"conditions": [{"prefix": "/s1"}], "services": [{"name": "s1", "port": 80}]}
    if route_policy is not None:
        route["rateLimitPolicy"] = {"global": route_policy}
    other = {"conditions": [{"prefix": "/s2"}], "services": [{"name": "s1", "port": 80}]}
    proxy = {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"virtualhost": virtualhost, "routes": [route, other]},
    }
    return yaml.safe_dump(proxy) + ECHO


def _routes(vhost: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["match"]["prefix"]: r for r in vhost["routes"]}


# Contour's documented examples (site/content/docs/main/config/rate-limiting.md).
VHOST_DESCRIPTORS = {
    "descriptors": [
        {"entries": [{"remoteAddress": {}}]},
        {
            "entries": [
                {"remoteAddress": {}},
                {"genericKey": {"key": "vhost", "value": "local.projectcontour.io"}},
            ]
        },
    ]
}
EVERY_KIND = {
    "descriptors": [
        {"entries": [{"genericKey": {"value": "foo.bar.com"}}]},
        {"entries": [{"requestHeader": {"headerName": "My-Header", "descriptorKey": "my-header-value"}}]},
        {
            "entries": [
                {
                    "requestHeaderValueMatch": {
                        "headers": [
                            {"name": "My-Header", "notpresent": True},
                            {"name": "My-Other-Header", "contains": "contour"},
                        ],
                        "value": "foo",
                    }
                }
            ]
        },
    ]
}


def test_virtual_host_descriptors_become_envoy_rate_limits(cpx_translate: Translate) -> None:
    result = cpx_translate(_proxy(vhost_policy=VHOST_DESCRIPTORS), PLUGINS)
    assert result.status("HTTPProxy", "rl")["currentStatus"] == "valid"
    vhost = result.virtual_hosts()["rl.example.com"]
    assert vhost["rateLimits"] == [
        {"actions": [{"remoteAddress": {}}]},
        {
            "actions": [
                {"remoteAddress": {}},
                {"genericKey": {"descriptorKey": "vhost", "descriptorValue": "local.projectcontour.io"}},
            ]
        },
    ]
    assert all("rateLimits" not in r["route"] for r in vhost["routes"])


def test_every_entry_kind_on_a_route(cpx_translate: Translate) -> None:
    result = cpx_translate(_proxy(route_policy=EVERY_KIND), PLUGINS)
    routes = _routes(result.virtual_hosts()["rl.example.com"])
    assert "rateLimits" not in routes["/s2"]["route"]
    assert routes["/s1"]["route"]["rateLimits"] == [
        {"actions": [{"genericKey": {"descriptorValue": "foo.bar.com"}}]},  # key: Envoy's genericKey
        {"actions": [{"requestHeaders": {"headerName": "My-Header", "descriptorKey": "my-header-value"}}]},
        {
            "actions": [
                {
                    "headerValueMatch": {
                        "descriptorValue": "foo",
                        "expectMatch": True,  # the default
                        "headers": [
                            {"name": "My-Header", "presentMatch": True, "invertMatch": True},
                            {"name": "My-Other-Header", "stringMatch": {"contains": "contour"}},
                        ],
                    }
                }
            ]
        },
    ]


def test_a_disabled_route_ignores_the_virtual_hosts_limits(cpx_translate: Translate) -> None:
    result = cpx_translate(
        _proxy(vhost_policy=VHOST_DESCRIPTORS, route_policy={"disabled": True}),
        PLUGINS,
        options=SERVICE,
    )
    routes = _routes(result.virtual_hosts()["rl.example.com"])
    per_route = routes["/s1"]["typedPerFilterConfig"][ratelimit.FILTER_NAME]
    assert per_route["vhRateLimits"] == "IGNORE"
    assert ratelimit.FILTER_NAME not in routes["/s2"].get("typedPerFilterConfig", {})


def _http_filters(result: Any) -> list[dict[str, Any]]:
    listener = next(x for x in result.envoy_json()["listeners"] if x["name"] == "ingress_http")
    manager = listener["filterChains"][0]["filters"][0]["typedConfig"]
    filters: list[dict[str, Any]] = manager["httpFilters"]
    return filters


def test_the_filter_comes_with_the_service_after_rbac(cpx_translate: Translate) -> None:
    without = cpx_translate(_proxy(vhost_policy=VHOST_DESCRIPTORS), PLUGINS)
    assert ratelimit.FILTER_NAME not in [f["name"] for f in _http_filters(without)]
    options = {
        **SERVICE,
        "rate_limit_domain": "mydomain",
        "rate_limit_fail_open": True,
        "rate_limit_enable_x_ratelimit_headers": True,
        "rate_limit_enable_resource_exhausted_code": True,
    }
    result = cpx_translate(
        _proxy(vhost_policy=VHOST_DESCRIPTORS) + _extension_service(), PLUGINS, options=options
    )
    names = [f["name"] for f in _http_filters(result)]
    assert names.index("envoy.filters.http.rbac") < names.index(ratelimit.FILTER_NAME) < names.index("router")
    config = next(f for f in _http_filters(result) if f["name"] == ratelimit.FILTER_NAME)["typedConfig"]
    assert config["domain"] == "mydomain"
    assert config.get("failureModeDeny", False) is False
    assert config["enableXRatelimitHeaders"] == "DRAFT_VERSION_03"
    assert config["rateLimitedAsResourceExhausted"] is True
    grpc = config["rateLimitService"]["grpcService"]["envoyGrpc"]
    assert grpc == {
        "clusterName": "extension/projectcontour/ratelimit",
        "authority": "extension.projectcontour.ratelimit",
    }
    assert config["rateLimitService"]["transportApiVersion"] == "V3"
    assert "timeout" not in config  # Envoy's 20 ms, as Contour without a timeoutPolicy


def test_the_extension_services_timeout_and_server_name(cpx_translate: Translate) -> None:
    validation = {"caSecret": "ca", "subjectName": "rls.example.com"}
    objects = _proxy() + _extension_service(
        protocol="h2", timeoutPolicy={"response": "150ms"}, validation=validation
    )
    objects += "---\n" + yaml.safe_dump(make_ca_secret("projectcontour", "ca"))
    result = cpx_translate(objects, PLUGINS, options=SERVICE)
    config = next(f for f in _http_filters(result) if f["name"] == ratelimit.FILTER_NAME)["typedConfig"]
    assert config["timeout"] == "0.150s"
    assert config["rateLimitService"]["grpcService"]["envoyGrpc"]["authority"] == "rls.example.com"


@pytest.mark.parametrize(
    "objects",
    [
        "",  # no such ExtensionService
        _extension_service(protocol="http/1.1"),  # not gRPC
        _extension_service(services=[{"name": "missing", "port": 8081}]),  # invalid
    ],
)
def test_without_a_usable_service_the_filter_is_off_and_the_proxy_served(
    cpx_translate: Translate, objects: str
) -> None:
    result = cpx_translate(_proxy(vhost_policy=VHOST_DESCRIPTORS) + objects, PLUGINS, options=SERVICE)
    assert ratelimit.FILTER_NAME not in [f["name"] for f in _http_filters(result)]
    assert result.status("HTTPProxy", "rl")["currentStatus"] == "valid"
    assert len(result.virtual_hosts()["rl.example.com"]["rateLimits"]) == 2


def test_without_the_extsvc_plugin_the_field_is_refused_naming_it(cpx_translate: Translate) -> None:
    vhost = cpx_translate(_proxy(vhost_policy=VHOST_DESCRIPTORS), ["httpproxy"])
    (error,) = vhost.status("HTTPProxy", "rl")["conditions"][0]["errors"]
    assert (error["type"], error["reason"]) == ("SpecError", "NotImplemented")
    assert error["message"] == (
        "spec.virtualhost.rateLimitPolicy.global needs the rate limit service's ExtensionService, "
        "and the extsvc plugin is not enabled"
    )
    assert "rl.example.com" not in vhost.virtual_hosts()
    route = cpx_translate(_proxy(route_policy={"disabled": True}), ["httpproxy"])
    (error,) = route.status("HTTPProxy", "rl")["conditions"][0]["errors"]
    assert error["message"].startswith("spec.routes[0].rateLimitPolicy.global needs")
    # Local rate limits need no plugin.
    local = yaml.safe_load_all(_proxy())
    proxy, echo = local
    proxy["spec"]["virtualhost"]["rateLimitPolicy"] = {"local": {"requests": 1, "unit": "second"}}
    plain = cpx_translate(yaml.safe_dump_all([proxy, echo]), ["httpproxy"])
    assert plain.status("HTTPProxy", "rl")["currentStatus"] == "valid"


def test_contours_defaults_deny_on_failure_in_domain_contour(cpx_translate: Translate) -> None:
    result = cpx_translate(_proxy() + _extension_service(), PLUGINS, options=SERVICE)
    config = next(f for f in _http_filters(result) if f["name"] == ratelimit.FILTER_NAME)["typedConfig"]
    assert config["domain"] == "contour"
    assert config["failureModeDeny"] is True
    assert "enableXRatelimitHeaders" not in config


DEFAULT = "descriptors: [{entries: [{genericKey: {key: default, value: all}}]}]"


def test_the_default_policy_applies_unless_the_proxy_has_its_own_or_opts_out(
    cpx_translate: Translate,
) -> None:
    objects = _proxy(name="plain") + _proxy(vhost_policy=VHOST_DESCRIPTORS, name="own")
    objects += _proxy(vhost_policy={"disabled": True}, name="optout")
    options = {**SERVICE, "rate_limit_default_global_policy": DEFAULT}
    hosts = cpx_translate(objects, PLUGINS, options=options).virtual_hosts()
    default = [{"actions": [{"genericKey": {"descriptorKey": "default", "descriptorValue": "all"}}]}]
    assert hosts["plain.example.com"]["rateLimits"] == default
    assert len(hosts["own.example.com"]["rateLimits"]) == 2
    assert "rateLimits" not in hosts["optout.example.com"]
    # Without a rate limit service there is no default policy (it is part of Contour's service config).
    plain = cpx_translate(
        _proxy(name="plain"), PLUGINS, options={"rate_limit_default_global_policy": DEFAULT}
    )
    assert "rateLimits" not in plain.virtual_hosts()["plain.example.com"]


TWO_KINDS = {"descriptors": [{"entries": [{"remoteAddress": {}, "genericKey": {"value": "x"}}]}]}


def test_an_entry_with_two_kinds_is_contours_rate_limit_policy_not_valid(cpx_translate: Translate) -> None:
    vhost = cpx_translate(_proxy(vhost_policy=TWO_KINDS), PLUGINS)
    (error,) = vhost.status("HTTPProxy", "rl")["conditions"][0]["errors"]
    assert (error["type"], error["reason"]) == ("VirtualHostError", "RateLimitPolicyNotValid")
    assert error["message"] == (
        "Spec.VirtualHost.RateLimitPolicy is invalid: "
        "rate limit descriptor entry must have exactly one field set"
    )
    assert "rl.example.com" not in vhost.virtual_hosts()
    route = cpx_translate(_proxy(route_policy=TWO_KINDS), PLUGINS)
    (error,) = route.status("HTTPProxy", "rl")["conditions"][0]["errors"]
    assert (error["type"], error["reason"]) == ("RouteError", "RateLimitPolicyNotValid")
    assert error["message"] == (
        "route.rateLimitPolicy is invalid: rate limit descriptor entry must have exactly one field set"
    )


def test_an_invalid_default_policy_is_reported_on_each_proxy(cpx_translate: Translate) -> None:
    bad = "descriptors: [{entries: [{remoteAddress: {}, genericKey: {value: x}}]}]"
    options = {**SERVICE, "rate_limit_default_global_policy": bad}
    result = cpx_translate(_proxy(), PLUGINS, options=options)
    (error,) = result.status("HTTPProxy", "rl")["conditions"][0]["errors"]
    assert error["message"] == (
        "Default Global RateLimit Policy is invalid: "
        "rate limit descriptor entry must have exactly one field set"
    )


def test_the_default_policy_may_be_given_parsed() -> None:
    policy: dict[str, Any] = {"descriptors": [{"entries": [{"remoteAddress": {}}]}]}
    settings = Settings.from_config(Config(options={**SERVICE, "rate_limit_default_global_policy": policy}))
    assert settings.default_global_rate_limit is not None
    assert ratelimit.descriptors(settings.default_global_rate_limit) == ((ratelimit.RemoteAddress(),),)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"rate_limit_service_extension_service": "ratelimit"}, "must be namespace/name"),
        ({**SERVICE, "rate_limit_default_global_policy": "descriptors: 3"}, "must be of type array"),
        ({**SERVICE, "rate_limit_default_global_policy": "{"}, "neither YAML nor JSON"),
        ({**SERVICE, "rate_limit_default_global_policy": {"descriptors": [{"entries": 1}]}}, "type array"),
    ],
)
def test_unusable_options_refuse_the_start(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        Settings.from_config(Config(options=options))


def test_the_service_follows_the_extension_service_between_builds() -> None:
    pipeline = SnapshotHandler.create(PluginHost.load(PLUGINS), Config(options=SERVICE))

    def upstream() -> ExtensionUpstream | None:
        """What the filter of every chain is built from after a build (None: no filter)."""
        pipeline.rebuild()
        assert pipeline.dag is not None
        return pipeline.dag.attachments.get(ratelimit.SERVICE_UPSTREAM)

    for obj in yaml.safe_load_all(_proxy(vhost_policy=VHOST_DESCRIPTORS)):
        pipeline.upsert(obj, validate=True)
    assert upstream() is None
    extension, rls = yaml.safe_load_all(_extension_service())
    pipeline.upsert(rls, validate=True)
    pipeline.upsert(extension, validate=True)
    found = upstream()
    assert found is not None and found.response_timeout is None
    extension["spec"]["timeoutPolicy"] = {"response": "1s"}
    pipeline.upsert(extension, validate=True)
    found = upstream()
    assert found is not None and found.response_timeout == Duration(seconds=1.0)
    pipeline.delete(extension)
    assert upstream() is None
