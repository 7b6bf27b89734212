"""Contour's global external authorization (``globalExtAuth`` in its configuration file) as
``--global-ext-auth-*`` options: every root that terminates TLS and does not configure (or opt out
of) its own authorization is authorized by this server, and so is plain HTTP (Contour installs the
filter on the HTTP listener too); a root opts out with ``authorization.authPolicy.disabled``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cpx import Config, DurationError, parse_timeout

from cpx_httpproxy import model
from cpx_httpproxy.configkeys import namespaced_name, parse_document
from cpx_httpproxy.optionspecs import FLAG, PREFIX
from cpx_httpproxy.schema import validate_http_settings


def from_config(config: Config) -> model.AuthorizationServer | None:
    """The global server as an HTTPProxy authorization block; ValueError names a bad flag."""
    ref = config.option(PREFIX + "extension_service")
    if not ref:
        return None
    try:
        namespace, _, name = namespaced_name(ref).partition("/")
    except ValueError as err:
        raise ValueError(f"--global-ext-auth-extension-service: {err}") from None
    service_type = config.option(PREFIX + "service_type") or "grpc"
    if service_type not in ("grpc", "http"):
        raise ValueError(f"--global-ext-auth-service-type: expected grpc or http, got {service_type!r}")
    timeout = str(config.option(PREFIX + "response_timeout") or "")
    try:
        parse_timeout(timeout)
    except DurationError as err:
        raise ValueError(f"--global-ext-auth-response-timeout: {err}") from None
    context = _context(config.option(PREFIX + "context") or ())
    wire: dict[str, Any] = {
        "extensionRef": {"namespace": namespace, "name": name},
        "serviceType": service_type,
        "responseTimeout": timeout,
        "failOpen": bool(config.option(PREFIX + "fail_open")),
        "authPolicy": {"disabled": bool(config.option(PREFIX + "disabled")), "context": context},
    }
    given = config.option(PREFIX + "http_settings")
    settings = dict(
        parse_document(given, FLAG + "http-settings", validate_http_settings, "httpSettings") if given else {}
    )
    if config.option(PREFIX + "http_path_prefix"):
        settings["pathPrefix"] = str(config.option(PREFIX + "http_path_prefix"))
    if settings:
        wire["httpSettings"] = settings
    if config.option(PREFIX + "with_request_body"):
        wire["withRequestBody"] = {
            "maxRequestBytes": config.option(PREFIX + "max_request_bytes") or 1024,
            "allowPartialMessage": bool(config.option(PREFIX + "allow_partial_message")),
            "packAsBytes": bool(config.option(PREFIX + "pack_as_bytes")),
        }
    return model.AuthorizationServer.from_dict(wire)


def _context(items: Iterable[str]) -> dict[str, str]:
    """``key=value`` items; the flag's values are split at commas, so an item without "=" goes on
    the value before it (``scopes=read,write``)."""
    context: dict[str, str] = {}
    last = ""
    for item in items:
        key, equals, value = str(item).partition("=")
        if not equals and last:
            context[last] += "," + str(item)
            continue
        if not equals or not key:
            raise ValueError(f"--global-ext-auth-context: expected key=value, got {item!r}")
        context[key] = value
        last = key
    return context
