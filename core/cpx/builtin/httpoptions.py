"""The core's options for every HTTP connection manager (:class:`cpx.xds.envoy.listener.HTTPSettings`)
and its default filters, with their keys in Contour's configuration file."""

from __future__ import annotations

from cpx.records import OptionSpec
from cpx.xds.caches.clusters import DNS_LOOKUP_FAMILIES
from cpx.xds.envoy import filters
from cpx.xds.envoy.listener import MIN_TLS_VERSIONS, SERVER_HEADER_TRANSFORMATIONS

_TIMEOUT = "a Go duration (e.g. 30s) or 'infinity'"

COMPRESSION_OPTION = OptionSpec(
    name="compression",
    help="Response compression of every HTTP connection manager: "
    + ", ".join(filters.COMPRESSION_ALGORITHMS)
    + ".",
    default=filters.DEFAULT_COMPRESSION,
    config_key="compression.algorithm",
)

HTTP_OPTIONS = (
    COMPRESSION_OPTION,
    OptionSpec(
        name="request_timeout",
        help=f"Timeout of a whole client request ({_TIMEOUT}; default: none).",
        config_key="timeouts.request-timeout",
    ),
    OptionSpec(
        name="connection_idle_timeout",
        help=f"Close client connections idle this long ({_TIMEOUT}; default: Envoy's, 1h).",
        config_key="timeouts.connection-idle-timeout",
    ),
    OptionSpec(
        name="stream_idle_timeout",
        help=f"Reset requests or streams without activity this long ({_TIMEOUT}; default: Envoy's, 5m).",
        config_key="timeouts.stream-idle-timeout",
    ),
    OptionSpec(
        name="disable_merge_slashes",
        help="Keep repeated slashes in request paths (default: merged).",
        type=bool,
        default=False,
        config_key="disableMergeSlashes",
    ),
    OptionSpec(
        name="tls_minimum_protocol_version",
        help="Lowest TLS version Envoy's HTTPS listeners accept: " + ", ".join(MIN_TLS_VERSIONS) + ".",
        default="1.2",
        config_key="tls.minimum-protocol-version",
    ),
    OptionSpec(
        name="tls_maximum_protocol_version",
        help="Highest TLS version Envoy's HTTPS listeners offer: "
        + ", ".join(MIN_TLS_VERSIONS)
        + " (default: each host's own, 1.3 unless its HTTPProxy lowers it).",
        config_key="tls.maximum-protocol-version",
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
    OptionSpec(
        name="server_header_transformation",
        help="What Envoy does with the Server response header: "
        + ", ".join(SERVER_HEADER_TRANSFORMATIONS)
        + ".",
        default="overwrite",
        config_key="serverHeaderTransformation",
    ),
    OptionSpec(
        name="num_trusted_hops",
        help="Proxies in front of Envoy whose X-Forwarded-For entries are trusted.",
        type=int,
        default=0,
        config_key="network.num-trusted-hops",
    ),
)

CLUSTER_DNS_OPTION = OptionSpec(
    name="cluster_dns_lookup_family",
    help="Address family of the DNS lookups of ExternalName Service clusters: "
    + ", ".join(DNS_LOOKUP_FAMILIES)
    + " (all: every address, through LOGICAL_DNS).",
    default="auto",
    config_key="cluster.dns-lookup-family",
)
