"""Request/response header policies of HTTPProxy routes and services (Contour's
``headersPolicyRoute`` / ``headersPolicyService`` / ``escapeHeaderValue`` in
``internal/dag/policy.go``).

Header names are canonicalised as Go's ``http.CanonicalHeaderKey`` does and checked with
Kubernetes' ``IsHTTPHeaderName``; values are escaped for Envoy, which reads ``%VAR%`` as a
variable: every ``%`` becomes ``%%`` except around the dynamic variables Contour allows
(its own ``%CONTOUR_NAMESPACE%``, ``%CONTOUR_SERVICE_NAME%``, ``%CONTOUR_SERVICE_PORT%``,
substituted here, and a list of Envoy's, kept for Envoy to expand).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cpx import go_quote
from cpx.dag import HeadersPolicy, HeaderValue

from cpx_httpproxy import model

NO_HEADERS = HeadersPolicy()

# Envoy's custom header variables Contour passes through (site/content/docs/main/config/
# request-rewriting.md); everything else with a % is escaped and stays literal.
ENVOY_VARIABLES = (
    "DOWNSTREAM_REMOTE_ADDRESS",
    "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT",
    "DOWNSTREAM_LOCAL_ADDRESS",
    "DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT",
    "DOWNSTREAM_LOCAL_PORT",
    "DOWNSTREAM_LOCAL_URI_SAN",
    "DOWNSTREAM_PEER_URI_SAN",
    "DOWNSTREAM_LOCAL_SUBJECT",
    "DOWNSTREAM_PEER_SUBJECT",
    "DOWNSTREAM_PEER_ISSUER",
    "DOWNSTREAM_TLS_SESSION_ID",
    "DOWNSTREAM_TLS_CIPHER",
    "DOWNSTREAM_TLS_VERSION",
    "DOWNSTREAM_PEER_FINGERPRINT_256",
    "DOWNSTREAM_PEER_FINGERPRINT_1",
    "DOWNSTREAM_PEER_SERIAL",
    "DOWNSTREAM_PEER_CERT",
    "DOWNSTREAM_PEER_CERT_V_START",
    "DOWNSTREAM_PEER_CERT_V_END",
    "HOSTNAME",
    "PROTOCOL",
    "UPSTREAM_REMOTE_ADDRESS",
    "RESPONSE_FLAGS",
    "RESPONSE_CODE_DETAILS",
    "TLS_JA3_FINGERPRINT",
    "TLS_JA4_FINGERPRINT",
)
# %REQ(header)%, %REQ(header?alternative)%, with an optional :max-length (after escaping).
_REQ_VARIABLE = re.compile(r"%(%REQ\(:?[\w-]+(\?:?[\w-]+)?\)(:\d+)?%)%", re.ASCII)
# A Host value that is exactly %REQ(header)%: rewrite Host from that request header.
_HOST_FROM_HEADER = re.compile(r"%REQ\(([A-Za-z0-9-]+)\)%")

# Kubernetes validation.IsHTTPHeaderName.
_HEADER_NAME = re.compile(r"[-A-Za-z0-9]+")
_HEADER_NAME_MESSAGE = (
    "[a valid HTTP header must consist of alphanumeric characters or '-' "
    "(e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')]"
)
# RFC 7230 token characters: Go leaves a key with anything else as it is.
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

CONTOUR_NAMESPACE = "CONTOUR_NAMESPACE"
CONTOUR_SERVICE_NAME = "CONTOUR_SERVICE_NAME"
CONTOUR_SERVICE_PORT = "CONTOUR_SERVICE_PORT"


class HeaderPolicyError(ValueError):
    """A header policy Contour refuses; the message is Contour's (without the "on ..." suffix)."""


def canonical_header_key(name: str) -> str:
    """Go's ``http.CanonicalHeaderKey``: ``x-foo-bar`` → ``X-Foo-Bar``; non-token names unchanged."""
    if not name or any(ch not in _TOKEN for ch in name):
        return name
    out, upper = [], True
    for ch in name:
        if upper and "a" <= ch <= "z":
            out.append(ch.upper())
        elif not upper and "A" <= ch <= "Z":
            out.append(ch.lower())
        else:
            out.append(ch)
        upper = ch == "-"
    return "".join(out)


def valid_header_name(name: str) -> bool:
    return _HEADER_NAME.fullmatch(name) is not None


def invalid_header_message(what: str, name: str) -> str:
    """``invalid set header "X_A": [a valid HTTP header must ...]`` (Contour's wording)."""
    return f"invalid {what} {go_quote(name)}: {_HEADER_NAME_MESSAGE}"


def escape_header_value(value: str, dynamic: Mapping[str, str] | None = None) -> str:
    """Contour's escapeHeaderValue: ``%`` doubled except for the allowed variables."""
    if "%" not in value:
        return value
    escaped = value.replace("%", "%%")
    for name, replacement in (dynamic or {}).items():
        escaped = escaped.replace(f"%%{name}%%", replacement)
    for name in ENVOY_VARIABLES:
        escaped = escaped.replace(f"%%{name}%%", f"%{name}%")
    return _REQ_VARIABLE.sub(r"\1", escaped)


def headers_policy(
    policy: model.HeadersPolicy | None,
    *,
    allow_host_rewrite: bool,
    allow_dynamic_host: bool = True,
    dynamic: Mapping[str, str] | None = None,
) -> HeadersPolicy:
    """The DAG policy for a route's or a service's ``requestHeadersPolicy`` / ``responseHeadersPolicy``.

    ``Host`` in ``set`` is a host rewrite when ``allow_host_rewrite`` (requests), an error
    otherwise; a Host value of exactly ``%REQ(Header)%`` rewrites Host from that request header,
    which only routes allow (``allow_dynamic_host``).  Raises HeaderPolicyError.
    """
    if policy is None:
        return NO_HEADERS
    values: dict[str, HeaderValue] = {}
    host_rewrite: str | None = None
    host_rewrite_header: str | None = None
    host_seen = False
    for entry in policy.set:
        key = canonical_header_key(entry.name)
        if key in values or (key == "Host" and host_seen):
            raise HeaderPolicyError(f"duplicate header addition: {go_quote(key)}")
        if key == "Host":
            if not allow_host_rewrite:
                raise HeaderPolicyError(f"rewriting {go_quote(key)} header is not supported")
            host_seen = True
            source = _HOST_FROM_HEADER.fullmatch(entry.value)
            if source is None:
                host_rewrite = entry.value
                continue
            if not allow_dynamic_host:
                raise HeaderPolicyError(
                    f"rewriting {go_quote(key)} header from a request header is only supported on routes"
                )
            host_rewrite_header = canonical_header_key(source.group(1))
            continue
        if not valid_header_name(key):
            raise HeaderPolicyError(invalid_header_message("set header", key))
        values[key] = HeaderValue(name=key, value=escape_header_value(entry.value, dynamic))
    remove: set[str] = set()
    for name in policy.remove:
        key = canonical_header_key(name)
        if key in remove:
            raise HeaderPolicyError(f"duplicate header removal: {go_quote(key)}")
        if not valid_header_name(key):
            raise HeaderPolicyError(invalid_header_message("remove header", key))
        remove.add(key)
    result = HeadersPolicy(
        set=tuple(values.values()),
        remove=tuple(sorted(remove)),
        host_rewrite=host_rewrite or None,
        host_rewrite_header=host_rewrite_header,
    )
    return NO_HEADERS if result == NO_HEADERS else result
