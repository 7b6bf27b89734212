"""Envoy listener pieces: connection managers, TCP proxies, TLS contexts (Contour's envoy/v3/listener.go)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs
from envoy.config.accesslog.v3 import accesslog_pb2 as accesslog
from envoy.config.core.v3 import address_pb2 as core_address
from envoy.config.core.v3 import base_pb2 as core_base
from envoy.config.core.v3 import extension_pb2 as core_extension
from envoy.config.core.v3 import protocol_pb2 as core_protocol
from envoy.config.core.v3 import substitution_format_string_pb2 as core_substitution
from envoy.config.listener.v3 import listener_components_pb2 as listener_components
from envoy.config.listener.v3 import listener_pb2 as listener_v3
from envoy.extensions.access_loggers.stream.v3 import stream_pb2 as stream_log
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2 as tls_inspector
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2 as tcp_proxy
from envoy.extensions.formatter.metadata.v3 import metadata_pb2 as metadata_formatter
from envoy.extensions.formatter.req_without_query.v3 import req_without_query_pb2 as req_without_query
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2 as tls_secret
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2 as tls
from google.protobuf import struct_pb2, wrappers_pb2

from cpx.accesslogformat import (
    ACCESS_LOG_FORMATS,
    DEFAULT_JSON_FIELDS,
    format_string,
    formatter_extensions,
    json_format,
)
from cpx.config import Config
from cpx.contourkeys import cipher_suite, ecdh_curve
from cpx.dag.nodes import ClientCertificateDetails, DownstreamValidation, Secret, TCPProxy, TLSParams
from cpx.durations import parse_timeout_seconds
from cpx.xds.envoy.common import ads_config_source, seconds, to_any
from cpx.xds.envoy.limits import NO_LIMITS, ListenerLimits, uint32
from cpx.xds.envoy.scoped import scope_selector, scoped_routes, upgrade_guard
from cpx.xds.naming import cluster_name, secret_name

HCM_FILTER = "envoy.filters.network.http_connection_manager"
TCP_PROXY_FILTER = "envoy.filters.network.tcp_proxy"
TLS_INSPECTOR = "envoy.filters.listener.tls_inspector"
TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls"
FALLBACK_CHAIN = "fallback-certificate"
# Contour's TCP proxy idle timeout (issue #1074): longer than common keepalives.
TCP_PROXY_IDLE_TIMEOUT = 9001.0

_TLS_VERSIONS = {
    "1.0": tls_common.TlsParameters.TLSv1_0,
    "1.1": tls_common.TlsParameters.TLSv1_1,
    "1.2": tls_common.TlsParameters.TLSv1_2,
    "1.3": tls_common.TlsParameters.TLSv1_3,
}


# Contour's serverHeaderTransformation values.
SERVER_HEADER_TRANSFORMATIONS = {
    "overwrite": hcm.HttpConnectionManager.OVERWRITE,
    "append_if_absent": hcm.HttpConnectionManager.APPEND_IF_ABSENT,
    "pass_through": hcm.HttpConnectionManager.PASS_THROUGH,
}
MIN_TLS_VERSIONS = ("1.2", "1.3")
# Contour's accesslog-level: the lowest status logged (0: every request; "disabled": no access log).
ACCESS_LOG_LEVELS = {"info": 0, "error": 300, "critical": 500, "disabled": None}
# Contour's default-http-versions: each version's ALPN name and codec, in ALPN preference order.
HTTP_VERSIONS = {
    "http/2": ("h2", hcm.HttpConnectionManager.HTTP2),
    "http/1.1": ("http/1.1", hcm.HttpConnectionManager.HTTP1),
}


def _timeout(config: Config, name: str) -> float | None:
    value = config.option(name)
    if value is None:
        return None
    try:
        return parse_timeout_seconds(value)
    except ValueError as err:
        raise ValueError(f"--{name.replace('_', '-')}: {err}") from None


def _choice(config: Config, name: str, choices: Iterable[str], default: str) -> str:
    value = str(config.option(name, default))
    if value not in choices:
        raise ValueError(f"--{name.replace('_', '-')}: {value!r} is not one of {', '.join(choices)}")
    return value


def _checked(config: Config, name: str, check: Callable[[str], str]) -> tuple[str, ...]:
    try:
        # Duplicates dropped, order kept (Contour's SanitizedCipherSuites).
        return tuple(dict.fromkeys(check(item) for item in config.option(name, ())))
    except ValueError as err:
        raise ValueError(f"--{name.replace('_', '-')}: {err}") from None


@attrs.frozen
class AccessLogFormat:
    """Contour's accesslog-format: Envoy's text (``text``: a format string, "" Envoy's default) or
    JSON (``json``: field name -> Envoy format)."""

    text: str = ""
    json: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_config(cls, config: Config) -> AccessLogFormat:
        kind = _choice(config, "accesslog_format", ACCESS_LOG_FORMATS, "envoy")
        try:
            text = format_string(config.option("accesslog_format_string") or "")
        except ValueError as err:
            raise ValueError(f"--accesslog-format-string: {err}") from None
        try:
            fields = json_format(config.option("accesslog_json_fields", ()) or DEFAULT_JSON_FIELDS)
        except ValueError as err:
            raise ValueError(f"--accesslog-json-fields: {err}") from None
        # As in Contour, the format string applies to the envoy format, the fields to json.
        return cls(json=tuple(fields.items())) if kind == "json" else cls(text=text)

    def log_format(self) -> core_substitution.SubstitutionFormatString | None:
        """Envoy's log_format (None: Envoy's default text format)."""
        if self.json:
            formats = [operator for _, operator in self.json]
            found = core_substitution.SubstitutionFormatString(
                json_format=struct_pb2.Struct(
                    fields={k: struct_pb2.Value(string_value=v) for k, v in self.json}
                ),
                omit_empty_values=True,
            )
        elif self.text:
            formats = [self.text]
            found = core_substitution.SubstitutionFormatString(
                text_format_source=core_base.DataSource(inline_string=self.text)
            )
        else:
            return None
        found.formatters.extend(_formatters(formats))
        return found


def _formatters(formats: Sequence[str]) -> list[core_extension.TypedExtensionConfig]:
    return [
        core_extension.TypedExtensionConfig(name=name, typed_config=to_any(_FORMATTERS[name]()))
        for name in formatter_extensions(formats)
    ]


_FORMATTERS = {
    "envoy.formatter.req_without_query": req_without_query.ReqWithoutQuery,
    "envoy.formatter.metadata": metadata_formatter.Metadata,
}


@attrs.frozen(kw_only=True)
class HTTPSettings:
    """Connection-manager settings, from optional ``Config.options`` (seconds; ``None``: Envoy default)."""

    connection_idle_timeout: float | None = None
    stream_idle_timeout: float | None = None
    request_timeout: float = 0.0  # 0: no overall request timeout (Contour's default)
    merge_slashes: bool = True  # Contour's default (disableMergeSlashes: false)
    min_tls_version: str = "1.2"
    max_tls_version: str | None = None  # None: each virtual host's own maximum
    cipher_suites: tuple[str, ...] = ()  # (): Envoy's defaults
    ecdh_curves: tuple[str, ...] = ()  # (): Envoy's defaults
    max_connection_duration: float | None = None
    delayed_close_timeout: float | None = None
    drain_timeout: float | None = None  # Contour's connection-shutdown-grace-period
    # default-http-versions: what TLS chains offer by ALPN, and the codec (AUTO unless only one).
    alpn: tuple[str, ...] = ("h2", "http/1.1")
    codec: hcm.HttpConnectionManager.CodecType.ValueType = hcm.HttpConnectionManager.AUTO
    limits: ListenerLimits = NO_LIMITS  # Contour's listener.*
    access_log_level: str = "info"
    access_log: AccessLogFormat = attrs.field(factory=AccessLogFormat)  # Contour's accesslog-format
    server_header: str = "overwrite"  # Contour's serverHeaderTransformation
    num_trusted_hops: int = 0  # Contour's network.num-trusted-hops (Envoy's xff_num_trusted_hops)

    @classmethod
    def from_config(cls, config: Config) -> HTTPSettings:
        """The settings of ``config``'s options; ValueError names the flag of a bad value."""
        hops = config.option("num_trusted_hops", 0)
        if not isinstance(hops, int) or not 0 <= hops < 2**32:
            raise ValueError(f"--num-trusted-hops: {hops!r} is not between 0 and {2**32 - 1}")
        minimum = _choice(config, "tls_minimum_protocol_version", MIN_TLS_VERSIONS, "1.2")
        maximum = config.option("tls_maximum_protocol_version")
        if maximum is not None:
            maximum = _choice(config, "tls_maximum_protocol_version", MIN_TLS_VERSIONS, "1.3")
            if maximum < minimum:
                raise ValueError("--tls-maximum-protocol-version: lower than the minimum")
        versions = [v.lower() for v in config.option("default_http_versions", ())]
        unknown = [v for v in versions if v not in HTTP_VERSIONS]
        if unknown:
            raise ValueError(
                f"--default-http-versions: {unknown[0]!r} is not one of {', '.join(HTTP_VERSIONS)}"
            )
        chosen = [HTTP_VERSIONS[v] for v in HTTP_VERSIONS if v in versions] or list(HTTP_VERSIONS.values())
        return cls(
            connection_idle_timeout=_timeout(config, "connection_idle_timeout"),
            max_connection_duration=_timeout(config, "max_connection_duration"),
            delayed_close_timeout=_timeout(config, "delayed_close_timeout"),
            drain_timeout=_timeout(config, "connection_shutdown_grace_period"),
            alpn=tuple(name for name, _ in chosen),
            codec=chosen[0][1] if len(chosen) == 1 else hcm.HttpConnectionManager.AUTO,
            limits=ListenerLimits.from_config(config),
            access_log_level=_choice(config, "accesslog_level", ACCESS_LOG_LEVELS, "info"),
            access_log=AccessLogFormat.from_config(config),
            stream_idle_timeout=_timeout(config, "stream_idle_timeout"),
            request_timeout=_timeout(config, "request_timeout") or 0.0,
            merge_slashes=not config.option("disable_merge_slashes", False),
            min_tls_version=minimum,
            max_tls_version=maximum,
            cipher_suites=_checked(config, "tls_cipher_suites", cipher_suite),
            ecdh_curves=_checked(config, "tls_ecdh_curves", ecdh_curve),
            server_header=_choice(
                config, "server_header_transformation", SERVER_HEADER_TRANSFORMATIONS, "overwrite"
            ),
            num_trusted_hops=hops,
        )


# -- small pieces ----------------------------------------------------------------------------------


def socket_address(address: str, port: int) -> core_address.Address:
    sock = core_address.SocketAddress(
        protocol=core_address.SocketAddress.TCP, address=address, port_value=port
    )
    if address == "::":
        sock.ipv4_compat = True  # one dual-stack socket, as Contour binds "::"
    return core_address.Address(socket_address=sock)


def access_logs(settings: HTTPSettings) -> list[accesslog.AccessLog]:
    """The access log of every connection manager and TCP proxy (none when disabled)."""
    if settings.access_log_level == "disabled":
        return []
    return [stdout_access_log(settings.access_log_level, settings.access_log)]


def stdout_access_log(level: str = "info", form: AccessLogFormat | None = None) -> accesslog.AccessLog:
    """Contour's access log on stdout (``form``: default Envoy's text format); Contour's access log
    levels: "error" logs responses of status 300 and above (and any with a response flag),
    "critical" 500 and above."""
    stdout = stream_log.StdoutAccessLog()
    log_format = None if form is None else form.log_format()
    if log_format is not None:
        stdout.log_format.CopyFrom(log_format)
    log = accesslog.AccessLog(name="envoy.access_loggers.stdout", typed_config=to_any(stdout))
    least = ACCESS_LOG_LEVELS.get(level)
    if least:
        status = accesslog.AccessLogFilter()
        status.status_code_filter.comparison.op = accesslog.ComparisonFilter.GE
        status.status_code_filter.comparison.value.default_value = least
        status.status_code_filter.comparison.value.runtime_key = "contour.accesslog.filter.status_code"
        flagged = accesslog.AccessLogFilter(response_flag_filter=accesslog.ResponseFlagFilter())
        log.filter.or_filter.filters.extend([status, flagged])
    return log


def listener_filters(tls_inspection: bool) -> list[listener_components.ListenerFilter]:
    out = []
    if tls_inspection:
        out.append(
            listener_components.ListenerFilter(
                name=TLS_INSPECTOR, typed_config=to_any(tls_inspector.TlsInspector())
            )
        )
    return out


def tls_version(version: str, default: int = tls_common.TlsParameters.TLS_AUTO) -> int:
    return int(_TLS_VERSIONS.get(version, default))


# -- HTTP ------------------------------------------------------------------------------------------


def http_connection_manager(
    route_config_name: str,
    stat_prefix: str,
    settings: HTTPSettings,
    http_filters: Sequence[hcm.HttpFilter],
    *,
    scoped: bool = False,
    forward_client_certificate: ClientCertificateDetails | None = None,
) -> listener_components.Filter:
    """Contour's HTTPConnectionManagerBuilder with its default settings.

    ``http_filters`` are what the plugins contribute for this chain, in order (see
    :mod:`cpx.xds.httpfilters`), the router last.  ``scoped``: routes come through Scoped RDS,
    one RouteConfiguration per exact host named after ``route_config_name``
    (:mod:`cpx.xds.envoy.scoped`), and the scope selector runs first.
    ``forward_client_certificate``: ``x-forwarded-client-cert`` carries those details of the
    connection's client certificate, whatever the client sent in it (SANITIZE_SET).
    """
    manager = hcm.HttpConnectionManager(
        stat_prefix=stat_prefix,
        http_filters=[scope_selector(route_config_name), upgrade_guard(), *http_filters]
        if scoped
        else list(http_filters),
        # HTTP/1.0 requests that carry a Host header are served (Contour #537).
        http_protocol_options=core_protocol.Http1ProtocolOptions(accept_http_10=True),
        use_remote_address=wrappers_pb2.BoolValue(value=True),
        normalize_path=wrappers_pb2.BoolValue(value=True),
        merge_slashes=settings.merge_slashes,
        # Host ports never take part in virtual host matching (nor in filters' host checks).
        strip_any_host_port=True,
        preserve_external_request_id=True,
        request_timeout=seconds(settings.request_timeout),
        access_log=access_logs(settings),
        server_header_transformation=SERVER_HEADER_TRANSFORMATIONS[settings.server_header],
        xff_num_trusted_hops=settings.num_trusted_hops,
        codec_type=settings.codec,
    )
    if scoped:
        manager.scoped_routes.CopyFrom(scoped_routes(route_config_name))
    else:
        manager.rds.CopyFrom(hcm.Rds(route_config_name=route_config_name, config_source=ads_config_source()))
    common = manager.common_http_protocol_options
    if settings.connection_idle_timeout is not None:
        common.idle_timeout.CopyFrom(seconds(settings.connection_idle_timeout))
    else:
        common.SetInParent()  # Contour always sets the message, leaving Envoy's default (1 h)
    limits = settings.limits
    if limits.max_requests_per_connection is not None:
        common.max_requests_per_connection.CopyFrom(uint32(limits.max_requests_per_connection))
    if limits.http2_max_concurrent_streams is not None:
        manager.http2_protocol_options.max_concurrent_streams.CopyFrom(
            uint32(limits.http2_max_concurrent_streams)
        )
    if settings.max_connection_duration is not None:
        common.max_connection_duration.CopyFrom(seconds(settings.max_connection_duration))
    if settings.stream_idle_timeout is not None:
        manager.stream_idle_timeout.CopyFrom(seconds(settings.stream_idle_timeout))
    if forward_client_certificate is not None:
        _forward_client_certificate(manager, forward_client_certificate)
    if settings.delayed_close_timeout is not None:
        manager.delayed_close_timeout.CopyFrom(seconds(settings.delayed_close_timeout))
    if settings.drain_timeout is not None:
        manager.drain_timeout.CopyFrom(seconds(settings.drain_timeout))
    return listener_components.Filter(name=HCM_FILTER, typed_config=to_any(manager))


def _forward_client_certificate(
    manager: hcm.HttpConnectionManager, details: ClientCertificateDetails
) -> None:
    manager.forward_client_cert_details = hcm.HttpConnectionManager.SANITIZE_SET
    current = manager.set_current_client_cert_details
    current.subject.value = details.subject
    current.cert, current.chain, current.dns, current.uri = (
        details.cert,
        details.chain,
        details.dns,
        details.uri,
    )


# -- TCP -------------------------------------------------------------------------------------------


def tcp_proxy_filter(
    stat_prefix: str, proxy: TCPProxy, settings: HTTPSettings | None = None
) -> listener_components.Filter:
    """Contour's TCPProxy: zero-weight clusters get no traffic unless every weight is zero; its
    access log is the connection managers' (``settings``: the default one)."""
    idle = seconds(TCP_PROXY_IDLE_TIMEOUT)
    logs = access_logs(settings or HTTPSettings())
    config = tcp_proxy.TcpProxy(stat_prefix=stat_prefix, idle_timeout=idle, access_log=logs)
    keep = [c for c in proxy.clusters if c.weight > 0] or list(proxy.clusters)
    if len(keep) == 1:
        config.cluster = cluster_name(keep[0])
    else:
        weighted = sorted((cluster_name(c), c.weight or 1) for c in keep)
        config.weighted_clusters.clusters.extend(
            tcp_proxy.TcpProxy.WeightedCluster.ClusterWeight(name=name, weight=weight)
            for name, weight in weighted
        )
    return listener_components.Filter(name=TCP_PROXY_FILTER, typed_config=to_any(config))


# -- TLS -------------------------------------------------------------------------------------------


def downstream_tls(
    secret: Secret,
    params: TLSParams,
    settings: HTTPSettings,
    alpn: Sequence[str],
    validation: DownstreamValidation | None = None,
) -> core_base.TransportSocket:
    """A DownstreamTlsContext serving ``secret`` by SDS name over ADS (the key never sits in LDS);
    with ``validation``, asking for client certificates (see :func:`client_validation_context`)."""
    # The configured minimum is a floor: a virtual host may ask for more, never for less.
    floor = tls_version(settings.min_tls_version, tls_common.TlsParameters.TLSv1_2)
    minimum = max(floor, tls_version(params.min_version, floor))
    maximum = tls_version(params.max_version)
    if settings.max_tls_version is not None:
        # ... and the configured maximum a ceiling (Contour's min), never below the minimum.
        ceiling = tls_version(settings.max_tls_version)
        maximum = max(
            minimum, ceiling if maximum == tls_common.TlsParameters.TLS_AUTO else min(maximum, ceiling)
        )
    common = tls.CommonTlsContext(
        tls_params=tls_common.TlsParameters(
            tls_minimum_protocol_version=minimum,
            tls_maximum_protocol_version=maximum,
            cipher_suites=settings.cipher_suites,
            ecdh_curves=settings.ecdh_curves,
        ),
        tls_certificate_sds_secret_configs=[
            tls_secret.SdsSecretConfig(name=secret_name(secret), sds_config=ads_config_source())
        ],
        alpn_protocols=list(alpn),
    )
    context = tls.DownstreamTlsContext(common_tls_context=common)
    if validation is not None:
        context.common_tls_context.validation_context.CopyFrom(client_validation_context(validation))
        context.require_client_certificate.value = not validation.optional
    return core_base.TransportSocket(name=TLS_TRANSPORT_SOCKET, typed_config=to_any(context))


def client_validation_context(validation: DownstreamValidation) -> tls_common.CertificateValidationContext:
    """Contour's validationContext for downstream peers: the CA and CRLs inline (public data,
    and a chain changes with them anyway), the trust chain verified unless skipped."""
    context = tls_common.CertificateValidationContext(
        trust_chain_verification=tls_common.CertificateValidationContext.ACCEPT_UNTRUSTED
        if validation.skip_verification
        else tls_common.CertificateValidationContext.VERIFY_TRUST_CHAIN
    )
    if validation.ca is not None and validation.ca.ca_pem:
        context.trusted_ca.inline_bytes = validation.ca.ca_pem
    if validation.crl is not None and validation.crl.crl_pem:
        context.crl.inline_bytes = validation.crl.crl_pem
        context.only_verify_leaf_cert_crl = validation.crl_only_verify_leaf
    return context


# -- assembling ------------------------------------------------------------------------------------


def filter_chain(
    filters: Sequence[listener_components.Filter],
    *,
    server_names: Sequence[str] = (),
    transport_protocol: str = "",
    transport_socket: core_base.TransportSocket | None = None,
    name: str = "",
) -> listener_components.FilterChain:
    chain = listener_components.FilterChain(filters=list(filters), name=name)
    if server_names or transport_protocol:
        chain.filter_chain_match.server_names.extend(server_names)
        chain.filter_chain_match.transport_protocol = transport_protocol
    if transport_socket is not None:
        chain.transport_socket.CopyFrom(transport_socket)
    return chain


def listener_head(name: str, address: str, port: int) -> listener_v3.Listener:
    return listener_v3.Listener(name=name, address=socket_address(address, port))
