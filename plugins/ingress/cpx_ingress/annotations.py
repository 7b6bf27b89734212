"""The Ingress annotations Contour honours (``internal/annotation``), parsed once per Ingress.

Bad values never fail a build: they are ignored (Contour's default applies) and reported as a
warning Note naming the annotation.  Service annotations (circuit breakers, upstream protocol) are
read where the Service is resolved, not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from cpx import MAX_ENVOY_DURATION_SECONDS, annotations_of
from cpx.dag import Duration, Note, RetryPolicy, TimeoutPolicy

FORCE_SSL_REDIRECT = "ingress.kubernetes.io/force-ssl-redirect"
ALLOW_HTTP = "kubernetes.io/ingress.allow-http"
RESPONSE_TIMEOUT = "projectcontour.io/response-timeout"
# Legacy name of response-timeout: it always applied to the response, never the request.
REQUEST_TIMEOUT = "projectcontour.io/request-timeout"
RETRY_ON = "projectcontour.io/retry-on"
NUM_RETRIES = "projectcontour.io/num-retries"
PER_TRY_TIMEOUT = "projectcontour.io/per-try-timeout"
TLS_MIN_VERSION = "projectcontour.io/tls-minimum-protocol-version"
TLS_MAX_VERSION = "projectcontour.io/tls-maximum-protocol-version"
TLS_CERT_NAMESPACE = "projectcontour.io/tls-cert-namespace"
WEBSOCKET_ROUTES = "projectcontour.io/websocket-routes"

# Contour's annotationsByKind["Ingress"], plus the two it reads without listing them
# (per-try-timeout, request-timeout): logging an annotation we act on would only confuse.
VALID_FOR_INGRESS = frozenset(
    {
        FORCE_SSL_REDIRECT,
        ALLOW_HTTP,
        "kubernetes.io/ingress.class",
        "projectcontour.io/ingress.class",
        NUM_RETRIES,
        RESPONSE_TIMEOUT,
        REQUEST_TIMEOUT,
        RETRY_ON,
        PER_TRY_TIMEOUT,
        TLS_MIN_VERSION,
        TLS_MAX_VERSION,
        TLS_CERT_NAMESPACE,
        WEBSOCKET_ROUTES,
    }
)
# Prefixes of annotations Contour claims to know (annotation.IsKnown).
KNOWN_PREFIXES = ("projectcontour.io/", "ingress.kubernetes.io/", "kubernetes.io/ingress.")
TLS_VERSIONS = ("1.2", "1.3")
DEFAULT_MIN_TLS, DEFAULT_MAX_TLS = "1.2", "1.3"

# Go's time.ParseDuration: one or more <decimal><unit>, e.g. "1m30s", "1.5h", "500ms".
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_INT32_MAX = 2**31 - 1
_GO_COMPONENT = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


_GO_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string; raises ValueError (negative durations included)."""
    s = text.strip()
    if s.startswith("-"):
        raise ValueError(f"negative duration {text!r}")
    s = s.removeprefix("+")
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _GO_COMPONENT.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    if total > _GO_MAX_DURATION_SECONDS:
        # Go's time.ParseDuration refuses it too; Envoy would NACK the whole route table.
        raise ValueError(f"duration {text!r} is out of range (at most about 2562047h)")
    # Go accepts a few seconds more than Envoy does (Envoy converts to int64 nanoseconds).
    return min(total, MAX_ENVOY_DURATION_SECONDS)


def parse_timeout(text: str) -> Duration | None:
    """Contour's timeout.Parse: "" or zero ⇒ None (Envoy default), infinity ⇒ Duration(None)."""
    if text == "":
        return None
    if text in ("infinity", "infinite"):
        return Duration(seconds=None)
    seconds = parse_go_duration(text)
    return None if seconds == 0 else Duration(seconds=seconds)


def num_retries(text: str) -> int:
    """Contour's NumRetries: -1 disables retries, 0/unset/garbage ⇒ Envoy's default of 1."""
    try:
        value = int(text.strip())
    except ValueError:
        return 1
    if value > _INT32_MAX:  # Contour parses an int32: out of range reads as 0
        return 1
    if value == -1:
        return 0
    return value if value > 0 else 1


def websocket_paths(value: str) -> frozenset[str]:
    return frozenset(p.strip() for p in value.split(",") if p.strip())


def unsupported_annotations(obj: Mapping[str, Any]) -> list[str]:
    """Annotations in a Contour-owned namespace that mean nothing on an Ingress (to be logged)."""
    return sorted(
        name
        for name in annotations_of(obj)
        if name.startswith(KNOWN_PREFIXES) and name not in VALID_FOR_INGRESS
    )


def _warning(type_: str, reason: str, message: str) -> Note:
    return Note(type=type_, reason=reason, message=message, severity="warning")


@attrs.frozen(kw_only=True)
class IngressAnnotations:
    """What an Ingress's annotations ask for, with the problems found reading them."""

    force_ssl_redirect: bool = False
    http_allowed: bool = True
    timeout_policy: TimeoutPolicy = attrs.field(factory=TimeoutPolicy)
    retry_policy: RetryPolicy | None = None
    min_tls_version: str = DEFAULT_MIN_TLS
    max_tls_version: str = DEFAULT_MAX_TLS
    # Namespace of tls[].secretName when not the Ingress's own (delegation applies).
    tls_cert_namespace: str | None = None
    websocket_paths: frozenset[str] = frozenset()
    problems: tuple[Note, ...] = ()

    @property
    def creates_http_routes(self) -> bool:
        """force-ssl-redirect wins over allow-http=false: the HTTP route exists, redirecting."""
        return self.force_ssl_redirect or self.http_allowed

    @classmethod
    def from_ingress(cls, obj: Mapping[str, Any]) -> IngressAnnotations:
        raw = annotations_of(obj)
        if not raw:
            # Most Ingresses have none: one shared (frozen) value, also for the route nodes.
            found = _NO_ANNOTATIONS.get(cls)
            if found is None:
                found = _NO_ANNOTATIONS[cls] = cls._parse({})
            return found
        return cls._parse({str(k): str(v) for k, v in raw.items()})

    @classmethod
    def _parse(cls, a: dict[str, str]) -> IngressAnnotations:
        problems: list[Note] = []

        timeout_policy = TimeoutPolicy()
        name = RESPONSE_TIMEOUT if a.get(RESPONSE_TIMEOUT) else REQUEST_TIMEOUT
        try:
            timeout_policy = TimeoutPolicy(response=parse_timeout(a.get(name, "")))
        except ValueError as err:
            message = f"annotation {name}: {err}; using the default"
            problems.append(_warning("RouteError", "TimeoutPolicyNotValid", message))

        retry_policy = None
        if a.get(RETRY_ON):
            retries = a.get(NUM_RETRIES, "")
            if retries.strip() and not re.fullmatch(r"[-+]?[0-9]+", retries.strip()):
                problems.append(
                    _warning(
                        "RouteError",
                        "RetryPolicyNotValid",
                        f"annotation {NUM_RETRIES}: {retries!r} is not an integer; using 1",
                    )
                )
            per_try = None
            try:
                per_try = parse_timeout(a.get(PER_TRY_TIMEOUT, ""))
            except ValueError as err:
                message = f"annotation {PER_TRY_TIMEOUT}: {err}; ignored"
                problems.append(_warning("RouteError", "RetryPolicyNotValid", message))
            retry_policy = RetryPolicy(
                retry_on=a[RETRY_ON], num_retries=num_retries(retries), per_try_timeout=per_try
            )

        versions = {}
        for ann, default in ((TLS_MIN_VERSION, DEFAULT_MIN_TLS), (TLS_MAX_VERSION, DEFAULT_MAX_TLS)):
            value = a.get(ann, "")
            versions[ann] = value if value in TLS_VERSIONS else default
            if value and value not in TLS_VERSIONS:
                problems.append(
                    _warning(
                        "TLSError",
                        "TLSConfigNotValid",
                        f"annotation {ann}: {value!r} is not one of 1.2, 1.3; using {default}",
                    )
                )
        min_tls, max_tls = versions[TLS_MIN_VERSION], versions[TLS_MAX_VERSION]
        if min_tls > max_tls:
            # Envoy rejects such a listener; keep the rest of the configuration servable.
            problems.append(
                _warning(
                    "TLSError",
                    "TLSConfigNotValid",
                    f"TLS minimum version {min_tls} is above maximum version {max_tls}; using 1.2-1.3",
                )
            )
            min_tls, max_tls = DEFAULT_MIN_TLS, DEFAULT_MAX_TLS

        return cls(
            force_ssl_redirect=a.get(FORCE_SSL_REDIRECT) == "true",
            http_allowed=a.get(ALLOW_HTTP) != "false",
            timeout_policy=timeout_policy,
            retry_policy=retry_policy,
            min_tls_version=min_tls,
            max_tls_version=max_tls,
            tls_cert_namespace=a.get(TLS_CERT_NAMESPACE) or None,
            websocket_paths=websocket_paths(a.get(WEBSOCKET_ROUTES, "")),
            problems=tuple(problems),
        )


_NO_ANNOTATIONS: dict[type[IngressAnnotations], IngressAnnotations] = {}
