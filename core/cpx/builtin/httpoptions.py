"""The core's options for Envoy's listeners and clusters (:class:`cpx.xds.envoy.listener.HTTPSettings`,
the default filters, ExternalName clusters), with their keys in Contour's configuration file."""

from __future__ import annotations

from collections.abc import Iterable

from cpx.accesslogformat import ACCESS_LOG_FORMATS
from cpx.records import OptionSpec
from cpx.xds.caches.clusters import DNS_LOOKUP_FAMILIES
from cpx.xds.envoy import filters
from cpx.xds.envoy.listener import (
    ACCESS_LOG_LEVELS,
    HTTP_VERSIONS,
    MIN_TLS_VERSIONS,
    SERVER_HEADER_TRANSFORMATIONS,
)

_TIMEOUT = "a Go duration (e.g. 30s) or 'infinity'"


def _choice(
    name: str, what: str, choices: Iterable[str], key: str, default: str | None, note: str = ""
) -> OptionSpec:
    return OptionSpec(name=name, help=f"{what}: {', '.join(choices)}{note}.", default=default, config_key=key)


def _timeout(name: str, what: str, key: str, envoys: str = "none") -> OptionSpec:
    """One of Contour's ``timeouts.*`` (``envoys``: Envoy's default, what an unset option leaves)."""
    return OptionSpec(
        name=name, help=f"{what} ({_TIMEOUT}; default: {envoys}).", config_key="timeouts." + key
    )


COMPRESSION_OPTION = _choice(
    "compression",
    "Response compression of every HTTP connection manager",
    filters.COMPRESSION_ALGORITHMS,
    "compression.algorithm",
    filters.DEFAULT_COMPRESSION,
)

HTTP_OPTIONS = (
    COMPRESSION_OPTION,
    _timeout("request_timeout", "Timeout of a whole client request", "request-timeout", "none"),
    _timeout(
        "connection_idle_timeout", "Close client connections idle this long", "connection-idle-timeout", "1h"
    ),
    _timeout(
        "stream_idle_timeout",
        "Reset requests or streams without activity this long",
        "stream-idle-timeout",
        "5m",
    ),
    _timeout(
        "max_connection_duration",
        "Close client connections this long after they opened",
        "max-connection-duration",
    ),
    _timeout(
        "delayed_close_timeout",
        "How long Envoy waits for a client to close before it does",
        "delayed-close-timeout",
        "1s",
    ),
    _timeout(
        "connection_shutdown_grace_period",
        "Time between the first and the final HTTP/2 GOAWAY when Envoy closes a connection",
        "connection-shutdown-grace-period",
        "5s",
    ),
    OptionSpec(
        name="default_http_versions",
        help="HTTP versions Envoy's listeners speak to clients: "
        + ", ".join(HTTP_VERSIONS)
        + " (repeatable or comma-separated; default: both).",
        multiple=True,
        config_key="default-http-versions",
    ),
    OptionSpec(
        name="disable_merge_slashes",
        help="Keep repeated slashes in request paths (default: merged).",
        type=bool,
        default=False,
        config_key="disableMergeSlashes",
    ),
    _choice(
        "tls_minimum_protocol_version",
        "Lowest TLS version Envoy's HTTPS listeners accept",
        MIN_TLS_VERSIONS,
        "tls.minimum-protocol-version",
        "1.2",
    ),
    _choice(
        "tls_maximum_protocol_version",
        "Highest TLS version Envoy's HTTPS listeners offer",
        MIN_TLS_VERSIONS,
        "tls.maximum-protocol-version",
        None,
        " (default: each host's own, 1.3 unless its HTTPProxy lowers it)",
    ),
    OptionSpec(
        name="tls_cipher_suites",
        help="TLS 1.2 cipher suites of Envoy's HTTPS listeners, in order of preference; [A|B] is an "
        "equal-preference group (repeatable or comma-separated; default: Envoy's).",
        multiple=True,
        config_key="tls.cipher-suites",
    ),
    OptionSpec(
        name="tls_ecdh_curves",
        help="ECDH curves of Envoy's HTTPS listeners, most preferred first (repeatable or "
        "comma-separated; default: Envoy's).",
        multiple=True,
        config_key="tls.ecdh-curves",
    ),
    _choice(
        "accesslog_level",
        "Which requests Envoy's HTTP access log records",
        ACCESS_LOG_LEVELS,
        "accesslog-level",
        "info",
        " (error: status 300 and above, critical: 500 and above)",
    ),
    _choice(
        "accesslog_format",
        "Format of Envoy's access log",
        ACCESS_LOG_FORMATS,
        "accesslog-format",
        "envoy",
        " (envoy: --accesslog-format-string or Envoy's default; json: --accesslog-json-fields)",
    ),
    OptionSpec(
        name="accesslog_format_string",
        help="Envoy format string of the envoy access log format, ending in a newline (default: Envoy's).",
        config_key="accesslog-format-string",
    ),
    OptionSpec(
        name="accesslog_json_fields",
        help="Fields of the json access log format: Contour's names (@timestamp, method, path, "
        "upstream_host, ...), an Envoy operator's name, or name=%OPERATOR% (repeatable or "
        "comma-separated; default: Contour's).",
        multiple=True,
        config_key="json-fields",
    ),
    _choice(
        "server_header_transformation",
        "What Envoy does with the Server response header",
        SERVER_HEADER_TRANSFORMATIONS,
        "serverHeaderTransformation",
        "overwrite",
    ),
    OptionSpec(
        name="num_trusted_hops",
        help="Proxies in front of Envoy whose X-Forwarded-For entries are trusted.",
        type=int,
        default=0,
        config_key="network.num-trusted-hops",
    ),
)


def _limit(name: str, what: str, key: str = "") -> OptionSpec:
    """One of Contour's ``listener.*`` numbers (unset: Envoy's default)."""
    key = key or name.replace("_", "-")
    return OptionSpec(name=name, help=f"{what} (default: Envoy's).", type=int, config_key="listener." + key)


LISTENER_OPTIONS = (
    _limit("max_requests_per_connection", "Requests a client connection may carry before Envoy closes it"),
    _limit("http2_max_concurrent_streams", "Concurrent HTTP/2 streams per client connection"),
    _limit("per_connection_buffer_limit_bytes", "Read and write buffer limit of each client connection"),
    _limit(
        "max_connections_to_accept_per_socket_event", "Connections Envoy accepts per listener socket event"
    ),
    _limit("socket_tos", "IPv4 TOS byte of the listeners' sockets (0-255)", "socket-options.tos"),
    _limit(
        "socket_traffic_class",
        "IPv6 Traffic Class byte of the listeners' sockets (0-255)",
        "socket-options.traffic-class",
    ),
    _choice(
        "connection_balancer",
        "Balance client connections over Envoy's worker threads",
        ("exact",),
        "listener.connection-balancer",
        None,
        " (default: none, the kernel's)",
    ),
)

CLUSTER_DNS_OPTION = _choice(
    "cluster_dns_lookup_family",
    "Address family of the DNS lookups of ExternalName Service clusters",
    DNS_LOOKUP_FAMILIES,
    "cluster.dns-lookup-family",
    "auto",
    " (all: every address, through LOGICAL_DNS)",
)

CLUSTER_CONNECT_TIMEOUT_OPTION = OptionSpec(
    name="cluster_connect_timeout",
    help="How long Envoy waits for a connection to a Service's endpoint (a Go duration, e.g. 5s; "
    "default: 2s, Contour's).",
    config_key="timeouts.connect-timeout",
)
