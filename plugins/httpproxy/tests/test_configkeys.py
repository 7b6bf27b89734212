"""Contour's ``rateLimitService`` and ``globalExtAuth`` keys (``cpx serve -c contour.yaml``) set the
plugin's ``--rate-limit-*`` and ``--global-ext-auth-*`` options: every key, Contour's types refused
with the key's path, flags over the file."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from cpx.cli.options import core_config
from cpx.cli.translate import translate_command

from cpx_httpproxy import model
from cpx_httpproxy.processor import Settings
from cpx_httpproxy.ratelimit import ServiceSettings

FULL = """
rateLimitService:
  extensionService: projectcontour/ratelimit
  domain: envoy
  failOpen: true
  enableXRateLimitHeaders: true
  enableResourceExhaustedCode: true
  defaultGlobalRateLimitPolicy:
    descriptors:
      - entries:
          - remoteAddress: {}
      - entries:
          - genericKey: {key: vhost, value: default}
globalExtAuth:
  extensionService: auth/global
  serviceType: http
  httpSettings:
    pathPrefix: /check
    allowedAuthorizationHeaders: [{exact: x-team}]
  authPolicy:
    disabled: true
    context: {realm: all, scopes: "read,write"}
  responseTimeout: 500ms
  failOpen: true
  withRequestBody: {maxRequestBytes: 2048, allowPartialMessage: true, packAsBytes: true}
"""


def _context(tmp_path: Path, text: str, *flags: str) -> click.Context:
    """``cpx translate -c FILE FLAGS`` parsed (the file applies as for ``cpx serve``)."""
    config = tmp_path / "contour.yaml"
    config.write_text(text)
    args = ["--plugins", "httpproxy,extsvc", "-c", str(config), *flags, str(tmp_path)]
    return translate_command.make_context("translate", args)


def _settings(tmp_path: Path, text: str, *flags: str) -> Settings:
    ctx = _context(tmp_path, text, *flags)
    return Settings.from_config(core_config(ctx, dict(ctx.params)))


def test_every_key_sets_its_option(tmp_path: Path) -> None:
    settings = _settings(tmp_path, FULL)
    assert settings.rate_limit_service == ServiceSettings(
        namespace="projectcontour",
        name="ratelimit",
        domain="envoy",
        fail_open=True,
        x_ratelimit_headers=True,
        resource_exhausted=True,
    )
    assert settings.default_global_rate_limit == model.GlobalRateLimitPolicy.from_dict(
        {
            "descriptors": [
                {"entries": [{"remoteAddress": {}}]},
                {"entries": [{"genericKey": {"key": "vhost", "value": "default"}}]},
            ]
        }
    )
    assert settings.global_auth == model.AuthorizationServer.from_dict(
        {
            "extensionRef": {"namespace": "auth", "name": "global"},
            "serviceType": "http",
            "httpSettings": {"pathPrefix": "/check", "allowedAuthorizationHeaders": [{"exact": "x-team"}]},
            "authPolicy": {"disabled": True, "context": {"realm": "all", "scopes": "read,write"}},
            "responseTimeout": "500ms",
            "failOpen": True,
            "withRequestBody": {"maxRequestBytes": 2048, "allowPartialMessage": True, "packAsBytes": True},
        }
    )


def test_an_empty_with_request_body_block_sends_the_body_with_contours_defaults(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "globalExtAuth: {extensionService: auth/global, withRequestBody: {}}")
    assert settings.global_auth is not None
    assert settings.global_auth.with_request_body == model.AuthorizationServerBufferSettings(
        max_request_bytes=1024, allow_partial_message=False, pack_as_bytes=False
    )
    without = _settings(tmp_path, "globalExtAuth: {extensionService: auth/global}")
    assert without.global_auth is not None and without.global_auth.with_request_body is None


def test_no_extension_service_no_global_server(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "globalExtAuth: {failOpen: true}\nrateLimitService: {domain: x}")
    assert settings.global_auth is None and settings.rate_limit_service is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rateLimitService: {extensionService: ratelimit}",
            "rateLimitService.extensionService: expected namespace/name",
        ),
        ("rateLimitService: {domain: [a]}", "rateLimitService.domain: expected a string"),
        ("rateLimitService: {failOpen: 'yes'}", "rateLimitService.failOpen: expected true or false"),
        (
            "rateLimitService: {enableXRateLimitHeaders: 1}",
            "rateLimitService.enableXRateLimitHeaders: expected true",
        ),
        (
            "rateLimitService: {enableResourceExhaustedCode: x}",
            "rateLimitService.enableResourceExhaustedCode: exp",
        ),
        (
            "rateLimitService: {defaultGlobalRateLimitPolicy: [1]}",
            "defaultGlobalRateLimitPolicy: expected a mapping",
        ),
        (
            "rateLimitService: {defaultGlobalRateLimitPolicy: {descriptors: 3}}",
            "rateLimitService.defaultGlobalRateLimitPolicy: .*must be of type array",
        ),
        ("rateLimitService: {bogus: 1}", "rateLimitService.bogus: unknown key"),
        (
            "globalExtAuth: {extensionService: {namespace: a, name: b}}",
            "globalExtAuth.extensionService: expected a str",
        ),
        (
            "globalExtAuth: {extensionService: a/b/c}",
            "globalExtAuth.extensionService: expected namespace/name",
        ),
        (
            "globalExtAuth: {serviceType: tcp}",
            "globalExtAuth.serviceType: 'tcp' is not one of 'grpc', 'http'",
        ),
        ("globalExtAuth: {httpSettings: /check}", "globalExtAuth.httpSettings: expected a mapping"),
        (
            "globalExtAuth: {httpSettings: {pathPrefix: 3}}",
            "globalExtAuth.httpSettings: .*pathPrefix.*type string",
        ),
        (
            "globalExtAuth: {httpSettings: {prefix: /x}}",
            "globalExtAuth.httpSettings: httpSettings.prefix: unknown",
        ),
        (
            "globalExtAuth: {authPolicy: {disabled: 0}}",
            "globalExtAuth.authPolicy.disabled: expected true or false",
        ),
        (
            "globalExtAuth: {authPolicy: {context: [a]}}",
            "globalExtAuth.authPolicy.context: expected a mapping",
        ),
        (
            "globalExtAuth: {authPolicy: {context: {a=b: c}}}",
            "globalExtAuth.authPolicy.context: a=b: 'c': a key",
        ),
        (
            "globalExtAuth: {authPolicy: {context: {a: 'x,b=c'}}}",
            "globalExtAuth.authPolicy.context: a: 'x,b=c'",
        ),
        ("globalExtAuth: {authPolicy: true}", "globalExtAuth.authPolicy: expected a mapping"),
        ("globalExtAuth: {responseTimeout: 3x}", "globalExtAuth.responseTimeout: .3x. is not a duration"),
        ("globalExtAuth: {failOpen: null0}", "globalExtAuth.failOpen: expected true or false"),
        ("globalExtAuth: {withRequestBody: true}", "globalExtAuth.withRequestBody: expected a mapping"),
        (
            "globalExtAuth: {withRequestBody: {maxRequestBytes: -1}}",
            "maxRequestBytes: -1 is out of range 0..4294967295",
        ),
        ("globalExtAuth: {withRequestBody: {maxRequestBytes: '1'}}", "maxRequestBytes: expected an integer"),
        ("globalExtAuth: {withRequestBody: {packAsBytes: 1}}", "withRequestBody.packAsBytes: expected true"),
        ("globalExtAuth: {withRequestBody: {allowPartialMessage: 1}}", "allowPartialMessage: expected true"),
        ("globalExtAuth: {withRequestBody: {bogus: 1}}", "globalExtAuth.withRequestBody.bogus: unknown key"),
    ],
)
def test_wrong_values_are_refused_with_the_keys_path(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(click.UsageError, match=message):
        _context(tmp_path, text)


def test_flags_on_the_command_line_win_over_the_file(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        FULL,
        "--rate-limit-domain",
        "flagged",
        "--rate-limit-fail-open=false",
        "--rate-limit-default-global-policy",
        '{"descriptors": [{"entries": [{"remoteAddress": {}}]}]}',
        "--global-ext-auth-extension-service",
        "auth/flagged",
        "--global-ext-auth-context",
        "team=a",
        "--global-ext-auth-max-request-bytes",
        "10",
        "--global-ext-auth-http-path-prefix",
        "/flagged",
    )
    limits, auth = settings.rate_limit_service, settings.global_auth
    assert limits is not None and auth is not None
    assert (limits.domain, limits.fail_open, limits.x_ratelimit_headers) == ("flagged", False, True)
    assert settings.default_global_rate_limit == model.GlobalRateLimitPolicy.from_dict(
        {"descriptors": [{"entries": [{"remoteAddress": {}}]}]}
    )
    assert auth.extension_ref == model.ExtensionServiceReference(
        namespace="auth", name="global".replace("global", "flagged")
    )
    assert auth.auth_policy == model.AuthorizationPolicy.from_dict(
        {"disabled": True, "context": {"team": "a"}}
    )
    assert auth.with_request_body is not None and auth.with_request_body.max_request_bytes == 10
    assert auth.http_settings is not None and auth.http_settings.path_prefix == "/flagged"
    assert len(auth.http_settings.allowed_authorization_headers) == 1  # the file's, under the flag's prefix


def test_the_keys_load_only_with_the_plugin(tmp_path: Path) -> None:
    config = tmp_path / "contour.yaml"
    config.write_text("globalExtAuth: {extensionService: auth/global}")
    with pytest.raises(
        click.UsageError, match=r"globalExtAuth\.extensionService: not supported .*remove the key"
    ):
        translate_command.make_context(
            "translate", ["--plugins", "ingress", "-c", str(config), str(tmp_path)]
        )


# Contour's documented files: guides/external-authorization.md ("global external authorization"),
# config/rate-limiting.md and guides/global-rate-limiting.md (the default global policy).
DOCUMENTED_AUTH = """
globalExtAuth:
  extensionService: projectcontour-auth/htpasswd
  failOpen: false
  authPolicy:
    context:
      header1: value1
      header2: value2
  responseTimeout: 1s
"""
DOCUMENTED_RATE_LIMIT = """
rateLimitService:
  extensionService: projectcontour/ratelimit
  domain: contour
  failOpen: false
  defaultGlobalRateLimitPolicy:
    descriptors:
      - entries:
        - requestHeader:
            headerName: X-Custom-Header
            descriptorKey: CustomHeader
"""


def test_contours_documented_files_load(tmp_path: Path) -> None:
    auth = _settings(tmp_path, DOCUMENTED_AUTH).global_auth
    assert auth == model.AuthorizationServer.from_dict(
        {
            "extensionRef": {"namespace": "projectcontour-auth", "name": "htpasswd"},
            "authPolicy": {"context": {"header1": "value1", "header2": "value2"}},
            "responseTimeout": "1s",
        }
    )
    limits = _settings(tmp_path, DOCUMENTED_RATE_LIMIT)
    assert limits.rate_limit_service == ServiceSettings(namespace="projectcontour", name="ratelimit")
    assert limits.default_global_rate_limit == model.GlobalRateLimitPolicy.from_dict(
        {
            "descriptors": [
                {
                    "entries": [
                        {"requestHeader": {"headerName": "X-Custom-Header", "descriptorKey": "CustomHeader"}}
                    ]
                }
            ]
        }
    )
