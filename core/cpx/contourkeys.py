"""Every key of Contour's configuration file (``pkg/config/parameters.go``): its type, range and
default as Contour checks them, and, for keys no cpx option takes, why.

The options that take a key say so themselves (``OptionSpec.config_key`` for the core's and the
plugins' options, :data:`cpx.cli.configfile.COMMAND_KEYS` for the core's command-line flags), so
this table names no cpx option.  ``cpx_does`` lists values that describe what cpx does anyway:
such a key changes nothing and passes silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from cpx.accesslogformat import ACCESS_LOG_FORMATS, format_string, json_field
from cpx.durations import parse_duration, parse_timeout_seconds

Check = Callable[[Any], Any]
UINT32 = 2**32 - 1


@attrs.frozen
class ContourKey:
    path: str  # dotted, as in the file: "timeouts.request-timeout"
    check: Check  # the checked value, or ValueError with the reason
    default: Any = None  # Contour's default (None: unset)
    note: str = ""  # for keys no option takes: why, or which option is planned
    cpx_does: tuple[Any, ...] = ()
    planned: bool = False  # another part of cpx is adding the option
    refuse: bool = False  # ignoring a value would weaken security: refuse the start


# -- checks ------------------------------------------------------------------------------------------


def string(value: Any) -> str:
    # Go's YAML decoder reads any scalar into a string field: 1.2 is "1.2".
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"expected a string, got {value!r}")


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def integer(low: int = 0, high: int = UINT32) -> Check:
    def check(value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"expected an integer, got {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range {low}..{high}")
        return value

    return check


def number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise ValueError(f"expected a number >= 0, got {value!r}")
    return float(value)


def one_of(*choices: str, fold_case: bool = False) -> Check:
    def check(value: Any) -> str:
        text = string(value)
        if (text.lower() if fold_case else text) not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(repr(c) for c in choices)}")
        return text.lower() if fold_case else text

    return check


def duration(value: Any) -> str:
    """A Go duration, or "infinity" (Contour's timeouts); kept as text, as the flags take it."""
    text = string(value)
    if text:
        parse_timeout_seconds(text)
    return text


def connect_timeout(value: Any) -> str:
    """Contour's connect-timeout: a Go duration above zero ("infinity" is no Go duration)."""
    text = string(value)
    if text and not 0 < parse_duration(text) < math.inf:
        raise ValueError(f"{text!r} is not a positive duration")
    return text


def list_of(item: Check) -> Check:
    def check(value: Any) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ValueError(f"expected a list, got {value!r}")
        return [item(entry) for entry in value]

    return check


def mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping, got {value!r}")
    return dict(value)


def block(value: Any) -> bool | None:
    """A block whose presence turns its feature on (a Go pointer to a struct), its keys checked
    as keys of their own: ``withRequestBody: {}`` is on, ``withRequestBody: null`` unset."""
    mapping(value)  # a mapping or nothing
    return None if value is None else True


def string_map(value: Any) -> dict[str, str]:
    return {string(k): string(v) for k, v in mapping(value).items()}


def empty(value: Any) -> dict[str, Any]:
    found = mapping(value)
    if found:
        raise ValueError(f"unknown key(s) {', '.join(map(str, found))}")
    return found


def reference(value: Any) -> str:
    """Contour's NamespacedName ({namespace, name}: both or neither) as "namespace/name"."""
    fields = mapping(value)
    unknown = set(fields) - {"namespace", "name"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))} (namespace, name)")
    namespace, name = (string(fields.get(k, "")).strip() for k in ("namespace", "name"))
    if bool(namespace) != bool(name):
        raise ValueError("namespace must be defined" if name else "name must be defined")
    return f"{namespace}/{name}" if name else ""


# Contour's ValidTLSCiphers and ValidECDHCurves (apis/projectcontour/v1alpha1).
TLS_CIPHERS = frozenset(
    {
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-RSA-AES128-SHA",
        "AES128-GCM-SHA256",
        "AES128-SHA",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-RSA-AES256-SHA",
        "AES256-GCM-SHA384",
        "AES256-SHA",
    }
)
ECDH_CURVES = frozenset({"X25519", "P-256", "P-384", "P-521", "X25519MLKEM768", "MLKEM1024"})


def cipher_suite(value: Any) -> str:
    """A cipher Envoy knows, or an equal-preference group of them: "[A|B]"."""
    text = string(value)
    group = text[1:-1].split("|") if text.startswith("[") and text.endswith("]") else [text]
    if not all(name in TLS_CIPHERS for name in group):
        raise ValueError(f"invalid cipher suite {text!r}")
    return text


def ecdh_curve(value: Any) -> str:
    text = string(value)
    if text not in ECDH_CURVES:
        raise ValueError(f"invalid ECDH curve {text!r} (one of {', '.join(sorted(ECDH_CURVES))})")
    return text


def tls_versions(minimum: str, maximum: str) -> None:
    """Contour's ValidateTLSProtocolVersions (the maximum is checked against the default minimum)."""
    if (maximum or "1.3") < (minimum or "1.2"):
        raise ValueError("the minimum TLS protocol version is greater than the maximum TLS protocol version")


# -- the keys ----------------------------------------------------------------------------------------

TLS_VERSION = one_of("", "1.2", "1.3")
_UPSTREAM = "cpx's upstream TLS uses Envoy's defaults"
_CLUSTER = "cpx's clusters use Envoy's defaults"
_KUBE = "cpx's Kubernetes client"
_TRACING = "tracing is not implemented"
_METRICS_TLS = "cpx serves /metrics over plain HTTP"
_ENVOY_METRICS = "Envoy's stats listener (`cpx bootstrap --stats-address/--stats-port`) serves plain HTTP"


def _format_string(value: Any) -> str:
    return format_string(string(value))


def _json_field(value: Any) -> str:
    text = string(value)
    json_field(text)
    return text


_POLICY = "global header policies are not implemented"
# Taken by the HTTPProxy plugin's options: without it, these keys are not supported.
_EXT_AUTH = "needs the HTTPProxy plugin (--global-ext-auth-*); ignoring it would serve without authorization"
_RATE_LIMIT = "needs the HTTPProxy plugin (--rate-limit-*, global rate limiting)"


def _keys(prefix: str, *keys: ContourKey) -> tuple[ContourKey, ...]:
    return tuple(attrs.evolve(key, path=f"{prefix}.{key.path}") for key in keys)


CONTOUR_KEYS: tuple[ContourKey, ...] = (
    ContourKey("incluster", boolean, False),
    ContourKey("kubeconfig", string),
    ContourKey("kubernetesClientQPS", number, note=f"{_KUBE} has no client-side rate limit"),
    ContourKey("kubernetesClientBurst", integer(0, 2**31 - 1), note=f"{_KUBE} has no client-side rate limit"),
    ContourKey("server", empty),  # no keys left in Contour's ServerParameters
    ContourKey(
        "gateway.gatewayRef",
        reference,
        note="cpx serves the Gateways of its GatewayClasses (--gateway-controller-name), "
        "not one static Gateway",
    ),
    ContourKey("ingress-status-address", string),
    ContourKey("accesslog-format", one_of(*ACCESS_LOG_FORMATS), "envoy"),
    ContourKey("accesslog-format-string", _format_string),
    ContourKey("json-fields", list_of(_json_field)),
    ContourKey("accesslog-level", one_of("info", "error", "critical", "disabled"), "info"),
    ContourKey("tls.minimum-protocol-version", TLS_VERSION, ""),
    ContourKey("tls.maximum-protocol-version", TLS_VERSION, ""),
    ContourKey("tls.cipher-suites", list_of(cipher_suite)),
    ContourKey("tls.ecdh-curves", list_of(ecdh_curve)),
    ContourKey("tls.fallback-certificate", reference),
    ContourKey(
        "tls.envoy-client-certificate", reference, note="client certificates to upstreams are not implemented"
    ),
    ContourKey("tls.fingerprint.ja3", boolean, note="TLS fingerprinting is not implemented"),
    ContourKey("tls.fingerprint.ja4", boolean, note="TLS fingerprinting is not implemented"),
    ContourKey("disablePermitInsecure", boolean, False),
    ContourKey(
        "disableAllowChunkedLength",
        boolean,
        False,
        note="cpx never sets Envoy's allow_chunked_length",
        cpx_does=(True,),
    ),
    ContourKey("disableMergeSlashes", boolean, False),
    ContourKey("compression.algorithm", one_of("gzip", "brotli", "zstd", "disabled"), "gzip"),
    ContourKey(
        "serverHeaderTransformation", one_of("overwrite", "append_if_absent", "pass_through"), "overwrite"
    ),
    ContourKey("enableExternalNameService", boolean, False),
    ContourKey("timeouts.request-timeout", duration),
    ContourKey("timeouts.connection-idle-timeout", duration, "60s"),
    ContourKey("timeouts.stream-idle-timeout", duration),
    ContourKey("timeouts.max-connection-duration", duration),
    ContourKey("timeouts.delayed-close-timeout", duration),
    ContourKey("timeouts.connection-shutdown-grace-period", duration),
    ContourKey("timeouts.connect-timeout", connect_timeout, "2s"),
    *_keys(
        "policy",
        ContourKey("request-headers.set", string_map, note=_POLICY),
        ContourKey("request-headers.remove", list_of(string), note=_POLICY),
        ContourKey("response-headers.set", string_map, note=_POLICY),
        ContourKey("response-headers.remove", list_of(string), note=_POLICY),
        ContourKey("applyToIngress", boolean, False, note=_POLICY),
    ),
    ContourKey("envoy-service-namespace", string, "projectcontour"),
    ContourKey("envoy-service-name", string, "envoy"),
    ContourKey("default-http-versions", list_of(one_of("http/1.1", "http/2", fold_case=True))),
    *_keys(
        "cluster",
        ContourKey(
            "dns-lookup-family", one_of("auto", "v4", "v6", "all"), "auto", note="Envoy's auto is used"
        ),
        ContourKey("max-requests-per-connection", integer(1), note=_CLUSTER),
        ContourKey("per-connection-buffer-limit-bytes", integer(1), note=_CLUSTER),
        ContourKey("circuit-breakers", mapping, note="global circuit-breaker defaults are not implemented"),
        ContourKey("upstream-tls.minimum-protocol-version", TLS_VERSION, "", note=_UPSTREAM),
        ContourKey("upstream-tls.maximum-protocol-version", TLS_VERSION, "", note=_UPSTREAM),
        ContourKey("upstream-tls.cipher-suites", list_of(cipher_suite), note=_UPSTREAM),
        ContourKey("upstream-tls.ecdh-curves", list_of(ecdh_curve), note=_UPSTREAM),
    ),
    ContourKey("network.num-trusted-hops", integer(0), 0),
    ContourKey("network.admin-port", integer(0, 65535), 9001),
    ContourKey("network.strip-trailing-host-dot", boolean, False, note="host names keep a trailing dot"),
    *_keys(
        "listener",
        ContourKey("connection-balancer", one_of("", "exact"), ""),
        *(
            ContourKey(name, integer(1))
            for name in (
                "max-requests-per-connection",
                "per-connection-buffer-limit-bytes",
                "http2-max-concurrent-streams",
                "max-connections-to-accept-per-socket-event",
            )
        ),
        *(
            ContourKey(name, integer(1), note="Envoy's runtime limits are not served")
            for name in ("max-requests-per-io-cycle", "max-connections-per-listener")
        ),
        ContourKey("socket-options.tos", integer(0, 255), 0),
        ContourKey("socket-options.traffic-class", integer(0, 255), 0),
    ),
    *_keys(
        "rateLimitService",
        ContourKey("extensionService", string, note=_RATE_LIMIT),
        ContourKey("domain", string, note=_RATE_LIMIT),
        ContourKey("failOpen", boolean, False, note=_RATE_LIMIT),
        ContourKey("enableXRateLimitHeaders", boolean, False, note=_RATE_LIMIT),
        ContourKey("enableResourceExhaustedCode", boolean, False, note=_RATE_LIMIT),
        ContourKey("defaultGlobalRateLimitPolicy", mapping, note=_RATE_LIMIT),
    ),
    *_keys(
        "globalExtAuth",
        *(
            ContourKey(path, check, default, note=_EXT_AUTH, refuse=True)
            for path, check, default in (
                ("extensionService", string, None),
                ("serviceType", one_of("grpc", "http"), None),
                ("httpSettings", mapping, None),
                ("authPolicy.disabled", boolean, False),
                ("authPolicy.context", string_map, None),
                ("responseTimeout", duration, None),
                ("failOpen", boolean, False),
                ("withRequestBody", block, None),
                ("withRequestBody.maxRequestBytes", integer(0), None),
                ("withRequestBody.allowPartialMessage", boolean, False),
                ("withRequestBody.packAsBytes", boolean, False),
            )
        ),
    ),
    ContourKey("metrics.contour.address", string),
    ContourKey("metrics.contour.port", integer(0, 65535)),
    *_keys(
        "metrics",
        *(
            ContourKey(f"contour.{name}", string, note=_METRICS_TLS)
            for name in ("server-certificate-path", "server-key-path", "ca-certificate-path")
        ),
        *(
            ContourKey(f"envoy.{name}", check, note=_ENVOY_METRICS)
            for name, check in (
                ("address", string),
                ("port", integer(0, 65535)),
                ("server-certificate-path", string),
                ("server-key-path", string),
                ("ca-certificate-path", string),
            )
        ),
    ),
    *_keys(
        "tracing",
        ContourKey("includePodDetail", boolean, note=_TRACING),
        ContourKey("serviceName", string, note=_TRACING),
        ContourKey("overallSampling", string, note=_TRACING),
        ContourKey("clientSampling", string, note=_TRACING),
        ContourKey("randomSampling", string, note=_TRACING),
        ContourKey("maxPathTagLength", integer(0), note=_TRACING),
        ContourKey("customTags", list_of(mapping), note=_TRACING),
        ContourKey("extensionService", string, note=_TRACING),
    ),
    ContourKey("featureFlags", list_of(string), note="no feature flags exist in cpx"),
    ContourKey("omEnforcedHealthListener.address", string, note="no separate health listener for Envoy"),
    ContourKey(
        "omEnforcedHealthListener.port", integer(0, 65535), note="no separate health listener for Envoy"
    ),
    ContourKey("runtime-settings", string_map, note="Envoy runtime settings are not served"),
)
