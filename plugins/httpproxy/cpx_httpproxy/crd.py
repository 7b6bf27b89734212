"""The HTTPProxy CustomResourceDefinition, written as Python data: cpx's one description of the API.

:data:`OPENAPI_SCHEMA` is the ``openAPIV3Schema`` the API server enforces; :mod:`cpx_httpproxy.schema`
walks the very same data to validate objects in standalone mode, so the manifest and the checks
cannot drift apart.  Field names, enums, patterns, bounds and CEL rules follow Contour's
``apis/projectcontour/v1/httpproxy.go`` (v1.33), with two deliberate differences:

* ``services[].port`` is bounded by ``maximum: 65535`` (Contour: ``exclusiveMaximum`` 65536, the
  same set of values, with a clearer message);
* a mirror service's ``weight`` is a percentage, so a CEL rule bounds it to 100 (Contour documents
  the 1-100 range but does not enforce it; unset or 0 still means 100 %).

The status default (``currentStatus: NotReconciled``, ``description: Waiting for controller``) is a
schema ``default`` on ``status``, as in Contour: a real API server fills it in when it reads an
object that has no status yet.  It is not a default a CRD can apply *on create* through the status
subresource, and standalone mode has no API server at all, so cpx never relies on it: an HTTPProxy
cpx has not processed simply has no status in the status file.

Render the manifest with ``python -m cpx_httpproxy.crd > plugins/httpproxy/crd/httpproxy.yaml``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from cpx import crd_manifest

from cpx_httpproxy.kinds import HTTPPROXY

Schema = dict[str, Any]

# -- building blocks ------------------------------------------------------------------------------


def string(
    description: str,
    *,
    enum: Iterable[str] = (),
    pattern: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    default: str | None = None,
) -> Schema:
    out: Schema = {"type": "string", "description": description}
    if enum:
        out["enum"] = list(enum)
    if pattern is not None:
        out["pattern"] = pattern
    if min_length is not None:
        out["minLength"] = min_length
    if max_length is not None:
        out["maxLength"] = max_length
    if default is not None:
        out["default"] = default
    return out


def integer(
    description: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    enum: Iterable[int] = (),
    fmt: str | None = None,
    default: int | None = None,
) -> Schema:
    out: Schema = {"type": "integer", "description": description}
    if fmt is not None:
        out["format"] = fmt
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    if enum:
        out["enum"] = list(enum)
    if default is not None:
        out["default"] = default
    return out


def boolean(description: str, *, default: bool | None = None) -> Schema:
    out: Schema = {"type": "boolean", "description": description}
    if default is not None:
        out["default"] = default
    return out


def array(
    items: Schema, description: str, *, min_items: int | None = None, max_items: int | None = None
) -> Schema:
    out: Schema = {"type": "array", "description": description, "items": items}
    if min_items is not None:
        out["minItems"] = min_items
    if max_items is not None:
        out["maxItems"] = max_items
    return out


def obj(
    description: str,
    properties: Mapping[str, Schema],
    *,
    required: Iterable[str] = (),
    rules: Iterable[tuple[str, str]] = (),
) -> Schema:
    """An object with known properties; ``rules`` are CEL (rule, message) pairs, which
    :mod:`cpx_httpproxy.schema` re-implements in Python."""
    out: Schema = {"type": "object", "description": description, "properties": dict(properties)}
    if required:
        out["required"] = sorted(required)
    rule_list = [{"rule": rule, "message": message} for rule, message in rules]
    if rule_list:
        out["x-kubernetes-validations"] = rule_list
    return out


def string_map(description: str) -> Schema:
    return {"type": "object", "description": description, "additionalProperties": {"type": "string"}}


# -- patterns (RE2 / ECMAScript compatible, as the API server requires) ----------------------------

_UNITS = "|".join(rf"(\d*(\.\d*)?{unit})" for unit in ("h", "m", "s", "ms", "us", "µs", "ns"))
DURATION = rf"^(({_UNITS})+)$"  # a Go duration
DURATION_OR_INFINITY = rf"^(({_UNITS})+|infinity|infinite)$"  # "infinity" disables the timeout
DURATION_OR_ZERO = rf"^(({_UNITS})+|0)$"  # CORS maxAge: "0" disables preflight caching
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
FQDN = rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$"  # a leading "*." makes a wildcard virtual host
DNS_SUBDOMAIN = rf"^{_LABEL}(\.{_LABEL})*$"
ABSOLUTE_PATH = r"^\/.*$"
CORS_HEADER_VALUE = r"^[a-zA-Z0-9!#$%&'*+.^_`|~-]+$"  # an RFC 7230 token
_CTL = "".join(f"\\x{c:02x}" for c in (0x7F, *range(0x20)))  # DEL and the C0 controls, escaped
COOKIE_NAME = rf'^[^()<>@,;:\\"\/[\]?={{}} \t{_CTL}]+$'  # an RFC 6265 cookie-name token
COOKIE_PATH = rf"^[^;{_CTL}]+$"
DECIMAL = r"^([0-9]+([.][0-9]+)?|[.][0-9]+)$"

RETRY_ON = (
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
)
REDIRECT_CODES = (301, 302, 303, 307, 308)

# The CEL rules, by name, so that the Python re-implementation can refer to them.
RULE_HTTP_SETTINGS = (
    "!has(self.httpSettings) || self.serviceType == 'http'",
    "httpSettings can only be set when serviceType is 'http'",
)
RULE_ONE_JWKS = (
    "has(self.remoteJWKS) != has(self.localJWKS)",
    "exactly one of remoteJWKS or localJWKS must be set",
)
RULE_SUBJECT_NAMES = (
    "has(self.subjectNames) ? self.subjectNames[0] == self.subjectName : true",
    "subjectNames[0] must equal subjectName if set",
)
RULE_MIRROR_WEIGHT = (
    "has(self.mirror) && self.mirror && has(self.weight) ? self.weight <= 100 : true",
    "the weight of a mirror service is a percentage and must be at most 100",
)

# -- shared types ---------------------------------------------------------------------------------

HEADER_VALUE = obj(
    "A header name and value.",
    {
        "name": string("Header name.", min_length=1),
        "value": string("Header value.", min_length=1),
    },
    required=("name", "value"),
)

HEADERS_POLICY = obj(
    "Headers to set and to remove.",
    {
        "set": array(HEADER_VALUE, "Headers to add, or to overwrite if present."),
        "remove": array(string("Header name."), "Names of headers to remove."),
    },
)

HEADER_MATCH = obj(
    "A request header condition: name plus exactly one of present, notpresent, contains, "
    "notcontains, exact, notexact, regex.",
    {
        "name": string("Header name (case-insensitive).", min_length=1),
        "present": boolean("True when the header is present."),
        "notpresent": boolean("True when the header is absent."),
        "contains": string("Substring the value must contain."),
        "notcontains": string("Substring the value must not contain."),
        "exact": string("Value the header must equal."),
        "notexact": string("Value the header must not equal."),
        "regex": string("RE2 regular expression the value must match."),
        "ignoreCase": boolean("Case-insensitive string matching (no effect on regex)."),
        "treatMissingAsEmpty": boolean("For negative matches: treat a missing header as empty."),
    },
    required=("name",),
)

QUERY_PARAMETER_MATCH = obj(
    "A query parameter condition: name plus exactly one of exact, prefix, suffix, regex, contains, present.",
    {
        "name": string("Query parameter name."),
        "exact": string("Value the parameter must equal."),
        "prefix": string("Prefix of the value."),
        "suffix": string("Suffix of the value."),
        "regex": string("RE2 regular expression the value must match."),
        "contains": string("Substring the value must contain."),
        "present": boolean("True when the parameter is present."),
        "ignoreCase": boolean("Case-insensitive string matching (no effect on regex)."),
    },
    required=("name",),
)

MATCH_CONDITION = obj(
    "A routing condition; one of prefix, exact, regex, header or queryParameter.",
    {
        "prefix": string("Path prefix match."),
        "exact": string("Exact path match (not allowed in includes)."),
        "regex": string("Path regex match (not allowed in includes)."),
        "header": HEADER_MATCH,
        "queryParameter": QUERY_PARAMETER_MATCH,
    },
)

UPSTREAM_VALIDATION = obj(
    "How to verify the certificate an upstream presents.",
    {
        "caSecret": string(
            "Secret with the CA bundle (key ca.crt), as name or namespace/name.",
            min_length=1,
            max_length=317,
        ),
        "subjectName": string(
            "A name expected in the certificate's subjectAltName (deprecated: use subjectNames).",
            min_length=1,
            max_length=250,
        ),
        "subjectNames": array(
            string("A subjectAltName."),
            "Names of which at least one is expected in the certificate's subjectAltName.",
            min_items=1,
            max_items=8,
        ),
    },
    required=("caSecret", "subjectName"),
    rules=(RULE_SUBJECT_NAMES,),
)

COOKIE_REWRITE_POLICY = obj(
    "Rewrites of the attributes of a Set-Cookie response header.",
    {
        "name": string("Name of the cookie to rewrite.", pattern=COOKIE_NAME, min_length=1, max_length=4096),
        "pathRewrite": obj(
            "Rewrite the Path attribute.",
            {"value": string("New Path.", pattern=COOKIE_PATH, min_length=1, max_length=4096)},
            required=("value",),
        ),
        "domainRewrite": obj(
            "Rewrite the Domain attribute.",
            {"value": string("New Domain.", pattern=DNS_SUBDOMAIN, min_length=1, max_length=4096)},
            required=("value",),
        ),
        "secure": boolean("Set or clear the Secure attribute."),
        "sameSite": string("Set the SameSite attribute.", enum=("Strict", "Lax", "None")),
    },
    required=("name",),
)

SLOW_START_POLICY = obj(
    "Gradually increase the traffic sent to a newly added endpoint.",
    {
        "window": string("Duration of the slow start window.", pattern=DURATION),
        "aggression": string("Speed of the increase (a decimal > 0).", pattern=DECIMAL, default="1.0"),
        "minWeightPercent": integer(
            "Starting percentage of traffic.", minimum=0, maximum=100, fmt="int32", default=10
        ),
    },
    required=("window",),
)

SERVICE = obj(
    "A Kubernetes Service in the proxy's namespace to send traffic to.",
    {
        "name": string("Name of the Service."),
        "port": integer("Service port.", minimum=1, maximum=65535),
        "healthPort": integer("Port for active health checks (default: port).", minimum=1, maximum=65535),
        "protocol": string("Upstream protocol, overriding Service annotations.", enum=("h2", "h2c", "tls")),
        "weight": integer("Relative share of traffic; for a mirror, a percentage.", minimum=0, fmt="int64"),
        "validation": UPSTREAM_VALIDATION,
        "mirror": boolean("Receive a read-only copy of the route's traffic."),
        "requestHeadersPolicy": HEADERS_POLICY,
        "responseHeadersPolicy": HEADERS_POLICY,
        "cookieRewritePolicies": array(COOKIE_REWRITE_POLICY, "Set-Cookie rewrites for this Service."),
        "slowStartPolicy": SLOW_START_POLICY,
    },
    required=("name", "port"),
    rules=(RULE_MIRROR_WEIGHT,),
)

REQUEST_HASH_POLICY = obj(
    "One hash input for the RequestHash strategy; exactly one attribute may be set.",
    {
        "terminal": boolean("Stop computing the hash when this attribute is present."),
        "headerHashOptions": obj(
            "Hash a request header.",
            {"headerName": string("Header name.", min_length=1)},
            required=("headerName",),
        ),
        "queryParameterHashOptions": obj(
            "Hash a query parameter.",
            {"parameterName": string("Query parameter name.", min_length=1)},
            required=("parameterName",),
        ),
        "hashSourceIP": boolean("Hash the client's source IP address."),
    },
)

LOAD_BALANCER_POLICY = obj(
    "Load balancing across the endpoints.",
    {
        # Not an enum: Contour falls back to RoundRobin for a name it does not know.
        "strategy": string("RoundRobin, WeightedLeastRequest, Random, Cookie or RequestHash."),
        "requestHashPolicies": array(REQUEST_HASH_POLICY, "Hash inputs for the RequestHash strategy."),
    },
)

IP_FILTER_POLICY = array(
    obj(
        "An IP filter rule.",
        {
            "source": string(
                "Filter on the client (Remote) or the connection peer (Peer).", enum=("Peer", "Remote")
            ),
            "cidr": string("A CIDR block, or a single IP address."),
        },
        required=("cidr", "source"),
    ),
    "IP filter rules.",
)

AUTHORIZATION_POLICY = obj(
    "Per-scope external authorization settings.",
    {
        "disabled": boolean("Disable authorization for this scope."),
        "context": string_map("Key/value pairs sent to the authorization server; inner scopes win."),
    },
)

LOCAL_RATE_LIMIT = obj(
    "Rate limiting within each Envoy (token bucket).",
    {
        "requests": integer("Requests allowed per unit.", minimum=1, fmt="int32"),
        "unit": string("Period of the limit.", enum=("second", "minute", "hour")),
        "burst": integer("Requests allowed above the limit for short bursts.", fmt="int32"),
        "responseStatusCode": integer(
            "Status of rate-limited responses (default 429).", minimum=400, maximum=599, fmt="int32"
        ),
        "responseHeadersToAdd": array(HEADER_VALUE, "Headers added to rate-limited responses."),
    },
    required=("requests", "unit"),
)

DESCRIPTOR_ENTRY = obj(
    "A descriptor entry; exactly one field must be set.",
    {
        "genericKey": obj(
            "A static key and value.",
            {
                "key": string("Descriptor key (default generic_key)."),
                "value": string("Descriptor value.", min_length=1),
            },
            required=("value",),
        ),
        "requestHeader": obj(
            "The value of a request header, when present.",
            {
                "headerName": string("Header name.", min_length=1),
                "descriptorKey": string("Descriptor key.", min_length=1),
            },
            required=("descriptorKey", "headerName"),
        ),
        "requestHeaderValueMatch": obj(
            "A static value (key header_match) when the request headers match.",
            {
                "headers": array(HEADER_MATCH, "Header conditions.", min_items=1),
                "expectMatch": boolean("Whether the headers must match (true) or not match.", default=True),
                "value": string("Descriptor value.", min_length=1),
            },
            required=("value",),
        ),
        "remoteAddress": obj("The client IP address (key remote_address).", {}),
    },
)

GLOBAL_RATE_LIMIT = obj(
    "Descriptors sent to the external rate limit service.",
    {
        "disabled": boolean("Opt out of the default global rate limit policy."),
        "descriptors": array(
            obj(
                "A list of descriptor entries.",
                {"entries": array(DESCRIPTOR_ENTRY, "Descriptor entries.", min_items=1)},
                required=("entries",),
            ),
            "Descriptors to send.",
            min_items=1,
        ),
    },
)

RATE_LIMIT_POLICY = obj("Rate limiting.", {"local": LOCAL_RATE_LIMIT, "global": GLOBAL_RATE_LIMIT})

# -- routes ---------------------------------------------------------------------------------------

HTTP_HEALTH_CHECK = obj(
    "Active HTTP health checking of the route's Services.",
    {
        "path": string("Path requested."),
        "host": string("Host header (default contour-envoy-healthcheck)."),
        "intervalSeconds": integer("Seconds between checks.", fmt="int64"),
        "timeoutSeconds": integer("Seconds to wait for a response.", fmt="int64"),
        "unhealthyThresholdCount": integer("Failures before unhealthy.", minimum=0, fmt="int64"),
        "healthyThresholdCount": integer("Successes before healthy.", minimum=0, fmt="int64"),
        "expectedStatuses": array(
            obj(
                "A half-open range [start, end) of healthy statuses.",
                {
                    "start": integer("First status (inclusive).", minimum=100, maximum=599, fmt="int64"),
                    "end": integer("End status (exclusive).", minimum=101, maximum=600, fmt="int64"),
                },
                required=("end", "start"),
            ),
            "Healthy statuses (default 200 only).",
        ),
    },
    required=("path",),
)

ROUTE = obj(
    "A route: conditions, and where matching requests go.",
    {
        "conditions": array(MATCH_CONDITION, "Conditions ANDed together."),
        "services": array(SERVICE, "Services to send traffic to."),
        "enableWebsockets": boolean("Allow websocket upgrades."),
        "permitInsecure": boolean("Serve over plain HTTP even when the virtual host has TLS."),
        "authPolicy": AUTHORIZATION_POLICY,
        "timeoutPolicy": obj(
            "Timeouts.",
            {
                "response": string(
                    "Time to wait for a response (Envoy default 15s).", pattern=DURATION_OR_INFINITY
                ),
                "idle": string("Per-stream idle timeout.", pattern=DURATION_OR_INFINITY),
                "idleConnection": string("Upstream idle connection timeout.", pattern=DURATION_OR_INFINITY),
            },
        ),
        "retryPolicy": obj(
            "Retries.",
            {
                "count": integer("Retries (-1 disables).", minimum=-1, fmt="int64", default=1),
                "perTryTimeout": string("Timeout per attempt.", pattern=DURATION_OR_INFINITY),
                "retryOn": array(string("A retry condition.", enum=RETRY_ON), "Conditions to retry on."),
                "retriableStatusCodes": array(
                    integer("An HTTP status.", fmt="int32"), "Statuses retried with retriable-status-codes."
                ),
            },
        ),
        "healthCheckPolicy": HTTP_HEALTH_CHECK,
        "loadBalancerPolicy": LOAD_BALANCER_POLICY,
        "pathRewritePolicy": obj(
            "Rewrite the path after routing.",
            {
                "replacePrefix": array(
                    obj(
                        "A prefix replacement.",
                        {
                            "prefix": string("Prefix replaced (default: any).", min_length=1),
                            "replacement": string("Replacement.", min_length=1),
                        },
                        required=("replacement",),
                    ),
                    "Prefix replacements.",
                )
            },
        ),
        "requestHeadersPolicy": HEADERS_POLICY,
        "responseHeadersPolicy": HEADERS_POLICY,
        "cookieRewritePolicies": array(COOKIE_REWRITE_POLICY, "Set-Cookie rewrites (unique names)."),
        "rateLimitPolicy": RATE_LIMIT_POLICY,
        "requestRedirectPolicy": obj(
            "Answer with an HTTP redirect.",
            {
                "scheme": string("Scheme of the Location.", enum=("http", "https")),
                "hostname": string(
                    "Host of the Location.", pattern=DNS_SUBDOMAIN, min_length=1, max_length=253
                ),
                "port": integer("Port of the Location.", minimum=1, maximum=65535, fmt="int32"),
                "statusCode": integer("Redirect status.", enum=REDIRECT_CODES, default=302),
                "path": string("Replace the whole path (not with prefix).", pattern=ABSOLUTE_PATH),
                "prefix": string("Replace the matched prefix (not with path).", pattern=ABSOLUTE_PATH),
            },
        ),
        "directResponsePolicy": obj(
            "Answer with a fixed response.",
            {
                "statusCode": integer("Response status.", minimum=200, maximum=599),
                "body": string("Response body."),
            },
            required=("statusCode",),
        ),
        "internalRedirectPolicy": obj(
            "Follow redirects inside Envoy.",
            {
                "maxInternalRedirects": integer("Redirects followed at most.", fmt="int32"),
                "redirectResponseCodes": array(
                    integer("A redirect status.", enum=REDIRECT_CODES, fmt="int32"),
                    "Statuses treated as internal redirects (default 302).",
                ),
                "allowCrossSchemeRedirect": string(
                    "Follow redirects to another scheme.",
                    enum=("Always", "Never", "SafeOnly"),
                    default="Never",
                ),
                "denyRepeatedRouteRedirect": boolean("Refuse redirects back to a route already followed."),
            },
        ),
        "jwtVerificationPolicy": obj(
            "JWT verification for this route.",
            {
                "require": string("Name of the provider to require."),
                "disabled": boolean("Disable JWT verification."),
            },
        ),
        "ipAllowPolicy": IP_FILTER_POLICY,
        "ipDenyPolicy": IP_FILTER_POLICY,
    },
)

# -- virtual host ---------------------------------------------------------------------------------

CLIENT_VALIDATION = obj(
    "Verification of client certificates (mTLS).",
    {
        "caSecret": string(
            "Secret with the CA bundle (key ca.crt), as name or namespace/name.", min_length=1
        ),
        "skipClientCertValidation": boolean("Request a client certificate but do not verify it."),
        "optionalClientCertificate": boolean("Allow clients without a certificate."),
        "crlSecret": string("Secret with CRLs (key crl.pem), as name or namespace/name.", min_length=1),
        "crlOnlyVerifyLeafCert": boolean("Check only the leaf certificate against the CRLs."),
        "forwardClientCertificate": obj(
            "Parts of the client certificate put in x-forwarded-client-cert.",
            {
                "subject": boolean("The subject."),
                "cert": boolean("The certificate (URL-encoded PEM)."),
                "chain": boolean("The chain (URL-encoded PEM)."),
                "dns": boolean("DNS subject alternative names."),
                "uri": boolean("URI subject alternative name."),
            },
        ),
    },
)

TLS = obj(
    "TLS for the virtual host; exactly one of secretName and passthrough.",
    {
        "secretName": string("TLS Secret, as name or namespace/name."),
        "minimumProtocolVersion": string("1.2 (default) or 1.3."),
        "maximumProtocolVersion": string("1.2 or 1.3 (default)."),
        "passthrough": boolean("Pass the TLS connection through to tcpproxy backends."),
        "clientValidation": CLIENT_VALIDATION,
        "enableFallbackCertificate": boolean("Serve the fallback certificate to clients without SNI."),
    },
)

HEADER_MATCHER = obj(
    "A header name matcher; exactly one of exact, prefix, suffix, contains.",
    {
        "exact": string("Exact name."),
        "prefix": string("Name prefix."),
        "suffix": string("Name suffix."),
        "contains": string("Name substring."),
        "ignoreCase": boolean("Case-insensitive match."),
    },
)

AUTHORIZATION = obj(
    "External authorization of the virtual host's requests (TLS only).",
    {
        "extensionRef": obj(
            "The ExtensionService that authorizes requests.",
            {
                "apiVersion": string("API version (default projectcontour.io/v1alpha1).", min_length=1),
                "namespace": string("Namespace (default: the proxy's).", min_length=1),
                "name": string("Name.", min_length=1),
            },
        ),
        "serviceType": string("Protocol of the authorization server.", enum=("grpc", "http"), default="grpc"),
        "httpSettings": obj(
            "Settings for an HTTP authorization server.",
            {
                "pathPrefix": string("Prefix of the path of check requests."),
                "allowedAuthorizationHeaders": array(
                    HEADER_MATCHER, "Client request headers sent to the authorization server."
                ),
                "allowedUpstreamHeaders": array(
                    HEADER_MATCHER, "Authorization response headers added to the upstream request."
                ),
            },
        ),
        "authPolicy": AUTHORIZATION_POLICY,
        "responseTimeout": string("Time to wait for a check response.", pattern=DURATION_OR_INFINITY),
        "failOpen": boolean("Allow requests when the authorization server fails."),
        "withRequestBody": obj(
            "Send the request body to the authorization server.",
            {
                "maxRequestBytes": integer(
                    "Body bytes buffered at most.", minimum=1, fmt="int32", default=1024
                ),
                "allowPartialMessage": boolean("Send a partial body when the limit is reached."),
                "packAsBytes": boolean("Send the body as raw bytes."),
            },
        ),
    },
    rules=(RULE_HTTP_SETTINGS,),
)

CORS_POLICY = obj(
    "Cross-origin resource sharing.",
    {
        "allowCredentials": boolean("Allow credentials."),
        "allowOrigin": array(
            string("*, scheme://host[:port], or an RE2 regex."), "Allowed origins.", min_items=1
        ),
        "allowMethods": array(
            string("A method.", pattern=CORS_HEADER_VALUE), "Allowed methods.", min_items=1
        ),
        "allowHeaders": array(
            string("A header.", pattern=CORS_HEADER_VALUE), "Allowed headers.", min_items=1
        ),
        "exposeHeaders": array(
            string("A header.", pattern=CORS_HEADER_VALUE), "Exposed headers.", min_items=1
        ),
        "maxAge": string("How long preflight results may be cached (0 disables).", pattern=DURATION_OR_ZERO),
        "allowPrivateNetwork": boolean("Allow private network requests."),
    },
    required=("allowMethods", "allowOrigin"),
)

JWT_PROVIDER = obj(
    "How to verify JWTs; exactly one of remoteJWKS and localJWKS.",
    {
        "name": string("Unique name of the provider.", min_length=1),
        "default": boolean("Require this provider on every route by default (at most one)."),
        "issuer": string("Required iss claim."),
        "audiences": array(string("An audience."), "Allowed aud claims."),
        "remoteJWKS": obj(
            "A JWKS fetched over HTTP(S).",
            {
                "uri": string("URI of the JWKS.", min_length=1),
                "validation": UPSTREAM_VALIDATION,
                "timeout": string("Time to wait for the JWKS (default 1s).", pattern=DURATION),
                "cacheDuration": string("How long to cache the JWKS (Envoy default 5m).", pattern=DURATION),
                "dnsLookupFamily": string(
                    "DNS address family for the URI's host.", enum=("auto", "v4", "v6")
                ),
            },
            required=("uri",),
        ),
        "localJWKS": obj(
            "A JWKS read from a Secret in the proxy's namespace.",
            {
                "secretName": string("Name of the Secret.", min_length=1),
                "key": string("Key of the JWKS in the Secret.", min_length=1),
            },
            required=("key", "secretName"),
        ),
        "forwardJWT": boolean("Forward the JWT upstream after verification."),
    },
    required=("name",),
    rules=(RULE_ONE_JWKS,),
)

VIRTUAL_HOST = obj(
    "The virtual host; its presence makes the HTTPProxy a root.",
    {
        "fqdn": string("Fully qualified domain name; may start with a *. wildcard label.", pattern=FQDN),
        "tls": TLS,
        "authorization": AUTHORIZATION,
        "corsPolicy": CORS_POLICY,
        "rateLimitPolicy": RATE_LIMIT_POLICY,
        "jwtProviders": array(JWT_PROVIDER, "JWT providers."),
        "ipAllowPolicy": IP_FILTER_POLICY,
        "ipDenyPolicy": IP_FILTER_POLICY,
    },
    required=("fqdn",),
)

# -- includes and TCP proxying --------------------------------------------------------------------

INCLUDE = obj(
    "Delegate part of the route space to another HTTPProxy.",
    {
        "name": string("Name of the included HTTPProxy.", min_length=1),
        "namespace": string("Its namespace (default: the proxy's)."),
        "conditions": array(MATCH_CONDITION, "Conditions added to every included route."),
    },
    required=("name",),
)

TCP_PROXY_INCLUDE = obj(
    "Delegate the TCP proxy to another HTTPProxy.",
    {
        "name": string("Name of the included HTTPProxy."),
        "namespace": string("Its namespace (default: the proxy's)."),
    },
    required=("name",),
)

TCP_PROXY = obj(
    "TCP proxying of the TLS virtual host; services or include.",
    {
        "loadBalancerPolicy": LOAD_BALANCER_POLICY,
        "services": array(SERVICE, "Services to send connections to."),
        "include": TCP_PROXY_INCLUDE,
        "includes": TCP_PROXY_INCLUDE,  # Contour's legacy plural spelling; "include" wins
        "healthCheckPolicy": obj(
            "Active TCP health checking.",
            {
                "intervalSeconds": integer("Seconds between checks.", fmt="int64"),
                "timeoutSeconds": integer("Seconds to wait for a response.", fmt="int64"),
                "unhealthyThresholdCount": integer("Failures before unhealthy.", fmt="int32"),
                "healthyThresholdCount": integer("Successes before healthy.", fmt="int32"),
            },
        ),
    },
)

SPEC = obj(
    "The HTTPProxy spec.",
    {
        "virtualhost": VIRTUAL_HOST,
        "routes": array(ROUTE, "Routes (ignored when tcpproxy is set)."),
        "tcpproxy": TCP_PROXY,
        "includes": array(INCLUDE, "Other HTTPProxies whose routes are included."),
        "ingressClassName": string("Ingress class (a class annotation takes precedence)."),
    },
)

# -- status ---------------------------------------------------------------------------------------

_CONDITION_TYPE = rf"^({_LABEL}(\.{_LABEL})*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
_CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
_CONDITION_STATUS = ("True", "False", "Unknown")

SUB_CONDITION = obj(
    "An error or warning detail of a condition.",
    {
        "type": string("Type, in abnormal-true polarity.", pattern=_CONDITION_TYPE, max_length=316),
        "status": string("True, False or Unknown.", enum=_CONDITION_STATUS),
        "reason": string("CamelCase reason.", pattern=_CONDITION_REASON, min_length=1, max_length=1024),
        "message": string("Human-readable message.", max_length=32768),
    },
    required=("message", "reason", "status", "type"),
)

DETAILED_CONDITION = obj(
    "A condition with error and warning details; cpx writes type Valid.",
    {
        "type": string("Condition type.", pattern=_CONDITION_TYPE, max_length=316),
        "status": string("True, False or Unknown.", enum=_CONDITION_STATUS),
        "observedGeneration": integer(
            "metadata.generation the condition is based on.", minimum=0, fmt="int64"
        ),
        "lastTransitionTime": {"type": "string", "format": "date-time", "description": "Last status change."},
        "reason": string("CamelCase reason.", pattern=_CONDITION_REASON, min_length=1, max_length=1024),
        "message": string("Human-readable message.", max_length=32768),
        "errors": array(SUB_CONDITION, "Errors: any makes Valid False."),
        "warnings": array(SUB_CONDITION, "Warnings: Valid may still be True."),
    },
    required=("lastTransitionTime", "message", "reason", "status", "type"),
)

STATUS: Schema = {
    **obj(
        "Status computed by the controller.",
        {
            "currentStatus": string("valid, invalid or orphaned (NotReconciled before processing)."),
            "description": string("Message of the Valid condition, or of the orphan error."),
            "conditions": {
                **array(DETAILED_CONDITION, "Conditions; cpx owns Valid and leaves others alone."),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            "loadBalancer": obj(
                "Address of the load balancer in front of Envoy.",
                {
                    "ingress": array(
                        obj(
                            "A load balancer ingress point.",
                            {
                                "ip": string("IP address."),
                                "hostname": string("DNS name."),
                                "ipMode": string("VIP or Proxy."),
                                "ports": array(
                                    obj(
                                        "A port's status.",
                                        {
                                            "port": integer("Port.", fmt="int32"),
                                            "protocol": string("TCP, UDP or SCTP."),
                                            "error": string("Problem with the port.", max_length=316),
                                        },
                                        required=("port", "protocol"),
                                    ),
                                    "Ports.",
                                ),
                            },
                        ),
                        "Ingress points.",
                    )
                },
            ),
        },
    ),
    "default": {"currentStatus": "NotReconciled", "description": "Waiting for controller"},
}

OPENAPI_SCHEMA = obj(
    "HTTPProxy: Contour's Ingress API.",
    {
        "apiVersion": string("Versioned schema of this object."),
        "kind": string("Kind of this object."),
        "metadata": {"type": "object"},
        "spec": SPEC,
        "status": STATUS,
    },
    required=("metadata", "spec"),
)

PRINTER_COLUMNS = [
    {
        "name": "FQDN",
        "type": "string",
        "jsonPath": ".spec.virtualhost.fqdn",
        "description": "Fully qualified domain name",
    },
    {
        "name": "TLS Secret",
        "type": "string",
        "jsonPath": ".spec.virtualhost.tls.secretName",
        "description": "Secret with TLS credentials",
    },
    {
        "name": "Status",
        "type": "string",
        "jsonPath": ".status.currentStatus",
        "description": "The current status of the HTTPProxy",
    },
    {
        "name": "Status Description",
        "type": "string",
        "jsonPath": ".status.description",
        "description": "Description of the current status",
    },
]


def custom_resource_definition() -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition manifest for HTTPProxy."""
    return crd_manifest(
        HTTPPROXY, OPENAPI_SCHEMA, short_names=("proxy", "proxies"), printer_columns=PRINTER_COLUMNS
    )


class _Dumper(yaml.SafeDumper):
    """Writes shared sub-schemas out in full: a CRD manifest must not contain YAML aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


HEADER = "# Generated by `python -m cpx_httpproxy.crd` from cpx_httpproxy/crd.py: do not edit.\n"


def render() -> str:
    """The manifest as YAML (keys sorted, like controller-gen's output)."""
    body = yaml.dump(
        custom_resource_definition(),
        Dumper=_Dumper,
        sort_keys=True,
        width=1000,
        allow_unicode=True,
        default_flow_style=False,
    )
    return HEADER + "---\n" + body


if __name__ == "__main__":
    sys.stdout.write(render())
