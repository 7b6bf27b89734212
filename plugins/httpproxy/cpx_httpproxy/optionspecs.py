"""The plugin's options as records, and what they decide before anything is built, without
importing the model, the processor or the filters (a run with no HTTPProxy imports none of them).

The global external authorization (``--global-ext-auth-*``, :mod:`cpx_httpproxy.globalauth`) and
the global rate limit service (``--rate-limit-*``, :mod:`cpx_httpproxy.ratelimit`) are read there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from cpx import Config, OptionSpec

from cpx_httpproxy.configkeys import document, key_values, namespaced_name
from cpx_httpproxy.schema import validate_global_rate_limit_policy, validate_http_settings

PREFIX = "global_ext_auth_"
FLAG = "--global-ext-auth-"
DEFAULT_DOMAIN = "contour"  # Contour's rateLimitService.domain default
EXTENSION_SERVICE_OPTION = "rate_limit_service_extension_service"
DOMAIN_OPTION = "rate_limit_domain"
FAIL_OPEN_OPTION = "rate_limit_fail_open"
X_RATELIMIT_HEADERS_OPTION = "rate_limit_enable_x_ratelimit_headers"
RESOURCE_EXHAUSTED_OPTION = "rate_limit_enable_resource_exhausted_code"
DEFAULT_POLICY_OPTION = "rate_limit_default_global_policy"
RATE_LIMIT_KEY = "rateLimitService"  # the options' block in Contour's configuration file


def options() -> Iterator[OptionSpec]:
    """Every option of the plugin, in the order ``cpx --help`` lists them."""
    yield OptionSpec(
        name="root_namespaces",
        help="namespaces where root HTTPProxies (with spec.virtualhost) are allowed "
        "(repeatable or comma-separated; default: all)",
        multiple=True,
    )
    yield OptionSpec(
        name="fallback_certificate",
        help="namespace/name of the TLS Secret served to clients without (known) SNI by HTTPProxies "
        "that set tls.enableFallbackCertificate",
        config_key="tls.fallback-certificate",
    )
    yield OptionSpec(
        name="disable_permit_insecure",
        help="ignore HTTPProxy routes' permitInsecure: plain HTTP always redirects to HTTPS on TLS "
        "virtual hosts",
        type=bool,
        default=False,
        config_key="disablePermitInsecure",
    )
    yield from global_auth_options()
    yield from rate_limit_options()


def at_defaults(config: Config, specs: Iterable[OptionSpec]) -> bool:
    """Whether every option is unset or at its default (empty or false for one without a default,
    as the command line gives it): settings that need no parsing to be known good."""
    return all(
        value is None or value == spec.default or (spec.default is None and not value)
        for spec in specs
        for value in (config.options.get(spec.name),)
    )


def builds_without_proxies(config: Config) -> bool:
    """Whether the processor adds something to a DAG without HTTPProxies: the global ext_authz
    filter on the HTTP listener, or the rate limit service's filter on every connection manager."""
    return bool(config.option(PREFIX + "extension_service") or config.option(EXTENSION_SERVICE_OPTION))


def global_auth_options() -> Iterator[OptionSpec]:
    def option(name: str, help: str, key: str | None = None, **kwargs: Any) -> OptionSpec:
        return OptionSpec(
            name=PREFIX + name,
            help=f"global external authorization: {help}",
            config_key=None if key is None else f"globalExtAuth.{key}",  # Contour's configuration file
            **kwargs,
        )

    yield option(
        "extension_service",
        "the ExtensionService (namespace/name) that authorizes every root",
        "extensionService",
        config_convert=namespaced_name,
    )
    yield option("service_type", "grpc (default) or http", "serviceType")
    yield option(
        "http_settings",
        "settings for an http server (YAML or JSON, as an HTTPProxy's authorization.httpSettings)",
        "httpSettings",
        config_convert=document(validate_http_settings, "httpSettings"),
    )
    yield option(
        "http_path_prefix", "path prefix of the checks sent to an http server (wins over httpSettings')"
    )
    yield option(
        "response_timeout",
        "how long to wait for the server (default: its ExtensionService's)",
        "responseTimeout",
    )
    yield option("fail_open", "allow requests when the server fails", "failOpen", type=bool, default=False)
    yield option(
        "disabled",
        "authorization is off unless a route enables it",
        "authPolicy.disabled",
        type=bool,
        default=False,
    )
    yield option(
        "context",
        "key=value sent with every check (repeatable; a comma-separated part without = continues a value)",
        "authPolicy.context",
        multiple=True,
        config_convert=key_values,
    )
    yield option(
        "with_request_body",
        "send the request body to the server",
        "withRequestBody",
        type=bool,
        default=False,
    )
    yield option(
        "max_request_bytes", "body bytes sent (default 1024)", "withRequestBody.maxRequestBytes", type=int
    )
    yield option(
        "allow_partial_message",
        "send the first max-request-bytes of longer bodies",
        "withRequestBody.allowPartialMessage",
        type=bool,
    )
    yield option("pack_as_bytes", "send the body as raw bytes", "withRequestBody.packAsBytes", type=bool)


def rate_limit_options() -> list[OptionSpec]:
    return [
        OptionSpec(
            name=EXTENSION_SERVICE_OPTION,
            help="namespace/name of the ExtensionService of the global rate limit service "
            "(Contour's rateLimitService.extensionService); needs the extsvc plugin",
            config_key=f"{RATE_LIMIT_KEY}.extensionService",
            config_convert=namespaced_name,
        ),
        OptionSpec(
            name=DOMAIN_OPTION,
            help="the domain passed to the rate limit service (Contour's rateLimitService.domain)",
            default=DEFAULT_DOMAIN,
            config_key=f"{RATE_LIMIT_KEY}.domain",
        ),
        OptionSpec(
            name=FAIL_OPEN_OPTION,
            help="allow requests when the rate limit service does not answer",
            type=bool,
            default=False,
            config_key=f"{RATE_LIMIT_KEY}.failOpen",
        ),
        OptionSpec(
            name=X_RATELIMIT_HEADERS_OPTION,
            help="add the X-RateLimit-* response headers (IETF draft 03)",
            type=bool,
            default=False,
            config_key=f"{RATE_LIMIT_KEY}.enableXRateLimitHeaders",
        ),
        OptionSpec(
            name=RESOURCE_EXHAUSTED_OPTION,
            help="answer rate-limited gRPC requests with RESOURCE_EXHAUSTED instead of UNAVAILABLE",
            type=bool,
            default=False,
            config_key=f"{RATE_LIMIT_KEY}.enableResourceExhaustedCode",
        ),
        OptionSpec(
            name=DEFAULT_POLICY_OPTION,
            help="the global rate limit policy of every HTTPProxy virtual host without one "
            '(YAML or JSON, as an HTTPProxy\'s rateLimitPolicy.global: {"descriptors": [...]})',
            config_key=f"{RATE_LIMIT_KEY}.defaultGlobalRateLimitPolicy",
            config_convert=document(validate_global_rate_limit_policy, "defaultGlobalRateLimitPolicy"),
        ),
    ]
