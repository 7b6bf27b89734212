"""The core's connection-manager and TLS options (``HTTPSettings``), as flags and config-file keys
give them: timeouts, Server header, trusted hops, TLS versions, cipher suites and curves."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.accesslog.v3 import accesslog_pb2 as accesslog
from envoy.config.cluster.v3 import cluster_pb2 as cluster_v3
from envoy.config.listener.v3 import listener_pb2 as listener_v3
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2 as tls

from cpx.builtin.filters import with_builtin_filters
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route, Secret, ServicePort, TLSParams
from cpx.xds.caches.clusters import ClusterCache
from cpx.xds.caches.listeners import ListenerCache
from cpx.xds.envoy.listener import HTTPSettings, downstream_tls, http_connection_manager

WEB = ServicePort(namespace="default", name="web", port=80)
SECRET = Secret(namespace="default", name="tls", cert_pem=b"cert", key_pem=b"key")
DEFAULT_HOST = TLSParams()
V12, V13 = tls_common.TlsParameters.TLSv1_2, tls_common.TlsParameters.TLSv1_3


def _settings(**options: Any) -> HTTPSettings:
    return HTTPSettings.from_config(Config(options=options))


def _tls_params(settings: HTTPSettings, params: TLSParams = DEFAULT_HOST) -> tls_common.TlsParameters:
    context = tls.DownstreamTlsContext()
    assert downstream_tls(SECRET, params, settings, ["h2"]).typed_config.Unpack(context)
    return context.common_tls_context.tls_params


def test_defaults_leave_envoys_own_choices() -> None:
    params = _tls_params(_settings())
    assert (params.tls_minimum_protocol_version, params.tls_maximum_protocol_version) == (V12, V13)
    assert not params.cipher_suites and not params.ecdh_curves


def test_ciphers_and_curves_are_set_in_order_without_duplicates() -> None:
    ciphers = ("[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]", "AES256-SHA", "AES256-SHA")
    params = _tls_params(_settings(tls_cipher_suites=ciphers, tls_ecdh_curves=("X25519MLKEM768", "X25519")))
    assert list(params.cipher_suites) == list(ciphers[:2])
    assert list(params.ecdh_curves) == ["X25519MLKEM768", "X25519"]


def test_the_configured_maximum_caps_each_host_but_never_below_its_minimum() -> None:
    settings = _settings(tls_maximum_protocol_version="1.2")
    assert _tls_params(settings).tls_maximum_protocol_version == V12
    strict = _tls_params(settings, TLSParams(min_version="1.3", max_version="1.3"))
    assert (strict.tls_minimum_protocol_version, strict.tls_maximum_protocol_version) == (V13, V13)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tls_cipher_suites": ("RC4-SHA",)}, "--tls-cipher-suites: invalid cipher suite 'RC4-SHA'"),
        ({"tls_cipher_suites": ("[AES256-SHA|NULL]",)}, "invalid cipher suite '[AES256-SHA|NULL]'"),
        ({"tls_ecdh_curves": ("P-224",)}, "--tls-ecdh-curves: invalid ECDH curve 'P-224'"),
        (
            {"tls_minimum_protocol_version": "1.1"},
            "--tls-minimum-protocol-version: '1.1' is not one of 1.2, 1.3",
        ),
        (
            {"tls_minimum_protocol_version": "1.3", "tls_maximum_protocol_version": "1.2"},
            "--tls-maximum-protocol-version: lower than the minimum",
        ),
        ({"request_timeout": "soon"}, "--request-timeout: 'soon' is not a duration"),
        ({"server_header_transformation": "drop"}, "--server-header-transformation: 'drop' is not one of"),
        ({"num_trusted_hops": -1}, "--num-trusted-hops: -1 is not between 0 and"),
        ({"default_http_versions": ("http/3",)}, "--default-http-versions: 'http/3' is not one of"),
    ],
)
def test_bad_values_name_the_flag(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=r"^--") as caught:
        _settings(**options)
    assert message in str(caught.value)


def test_connection_manager_settings() -> None:
    settings = _settings(
        request_timeout="1m",
        connection_idle_timeout="infinity",
        stream_idle_timeout="300ms",
        server_header_transformation="append_if_absent",
        num_trusted_hops=2,
    )
    manager = hcm.HttpConnectionManager()
    assert http_connection_manager("ingress_http", "ingress_http", settings, []).typed_config.Unpack(manager)
    assert manager.request_timeout.seconds == 60
    # "infinity" is Envoy's 0: no idle timeout (rather than Envoy's default hour).
    assert manager.common_http_protocol_options.HasField("idle_timeout")
    assert manager.common_http_protocol_options.idle_timeout.ToTimedelta().total_seconds() == 0
    assert manager.stream_idle_timeout.ToMilliseconds() == 300
    assert manager.server_header_transformation == hcm.HttpConnectionManager.APPEND_IF_ABSENT
    assert manager.xff_num_trusted_hops == 2


def _clusters(family: str | None) -> dict[str, cluster_v3.Cluster]:
    external = ServicePort(namespace="default", name="ext", port=443, external_name="api.example.com")
    inside = ServicePort(namespace="default", name="web", port=80)
    dag = DAG()
    dag.ensure_listener("ingress_http", Protocol.HTTP, "0.0.0.0", 8080)
    vhost = dag.ensure_virtual_host("ingress_http", "example.com")
    for i, upstream in enumerate((external, inside)):
        vhost.add_route(
            Route(path=PathMatch(kind=PathKind.PREFIX, value=f"/{i}"), clusters=(Cluster(upstream=upstream),))
        )
    options = {} if family is None else {"cluster_dns_lookup_family": family}
    cache = ClusterCache(Config(options=options))
    cache.on_change(dag)
    return {name: cluster_v3.Cluster.FromString(res.body) for name, res in cache.contents().items()}


@pytest.mark.parametrize(
    ("family", "expected", "kind"),
    [
        (None, cluster_v3.Cluster.AUTO, cluster_v3.Cluster.STRICT_DNS),
        ("v4", cluster_v3.Cluster.V4_ONLY, cluster_v3.Cluster.STRICT_DNS),
        ("v6", cluster_v3.Cluster.V6_ONLY, cluster_v3.Cluster.STRICT_DNS),
        ("all", cluster_v3.Cluster.ALL, cluster_v3.Cluster.LOGICAL_DNS),  # as Contour does
    ],
)
def test_dns_lookup_family_applies_to_external_name_clusters(
    family: str | None, expected: int, kind: int
) -> None:
    found = _clusters(family)
    (external,) = [c for c in found.values() if c.type != cluster_v3.Cluster.EDS]
    (inside,) = [c for c in found.values() if c.type == cluster_v3.Cluster.EDS]
    assert external.name.startswith("default/ext/") and inside.name.startswith("default/web/")
    assert (external.dns_lookup_family, external.type) == (expected, kind)
    assert inside.dns_lookup_family == cluster_v3.Cluster.AUTO


@pytest.mark.parametrize(
    ("versions", "alpn", "codec"),
    [
        ((), ["h2", "http/1.1"], hcm.HttpConnectionManager.AUTO),
        (("HTTP/1.1", "HTTP/2"), ["h2", "http/1.1"], hcm.HttpConnectionManager.AUTO),
        (("http/1.1",), ["http/1.1"], hcm.HttpConnectionManager.HTTP1),
        (("HTTP/2",), ["h2"], hcm.HttpConnectionManager.HTTP2),
    ],
)
def test_default_http_versions_choose_alpn_and_codec(
    versions: tuple[str, ...], alpn: list[str], codec: int
) -> None:
    settings = _settings(default_http_versions=versions)
    context = tls.DownstreamTlsContext()
    assert downstream_tls(SECRET, DEFAULT_HOST, settings, settings.alpn).typed_config.Unpack(context)
    assert list(context.common_tls_context.alpn_protocols) == alpn
    manager = hcm.HttpConnectionManager()
    assert http_connection_manager("r", "r", settings, []).typed_config.Unpack(manager)
    assert manager.codec_type == codec


def test_connection_lifetime_timeouts() -> None:
    settings = _settings(
        max_connection_duration="1h", delayed_close_timeout="infinity", connection_shutdown_grace_period="10s"
    )
    manager = hcm.HttpConnectionManager()
    assert http_connection_manager("r", "r", settings, []).typed_config.Unpack(manager)
    assert manager.common_http_protocol_options.max_connection_duration.seconds == 3600
    assert manager.HasField("delayed_close_timeout") and manager.delayed_close_timeout.seconds == 0
    assert manager.drain_timeout.seconds == 10
    unset = hcm.HttpConnectionManager()
    assert http_connection_manager("r", "r", _settings(), []).typed_config.Unpack(unset)
    assert not unset.HasField("delayed_close_timeout") and not unset.HasField("drain_timeout")


def test_listener_limits_and_socket_options() -> None:
    options = {
        "max_requests_per_connection": 100,
        "http2_max_concurrent_streams": 50,
        "per_connection_buffer_limit_bytes": 32768,
        "max_connections_to_accept_per_socket_event": 4,
        "connection_balancer": "exact",
        "socket_tos": 64,
        "socket_traffic_class": 0,  # Contour sets none for 0
    }
    dag = DAG()
    dag.ensure_listener("ingress_http", Protocol.HTTP, "0.0.0.0", 8080)
    dag.ensure_virtual_host("ingress_http", "a.test").add_route(
        Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), clusters=(Cluster(upstream=WEB),))
    )
    cache = with_builtin_filters(ListenerCache(Config(options=options)))
    cache.on_change(dag)
    listener = listener_v3.Listener.FromString(cache.contents()["ingress_http"].body)
    assert listener.per_connection_buffer_limit_bytes.value == 32768
    assert listener.max_connections_to_accept_per_socket_event.value == 4
    assert listener.connection_balance_config.HasField("exact_balance")
    (tos,) = listener.socket_options
    assert (tos.level, tos.name, tos.int_value) == (0, 1, 64)
    manager = hcm.HttpConnectionManager()
    assert listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    assert manager.common_http_protocol_options.max_requests_per_connection.value == 100
    assert manager.http2_protocol_options.max_concurrent_streams.value == 50
    plain = with_builtin_filters(ListenerCache(Config()))
    plain.on_change(dag)
    default = listener_v3.Listener.FromString(plain.contents()["ingress_http"].body)
    assert not default.socket_options and not default.HasField("connection_balance_config")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_requests_per_connection": 0},
            "--max-requests-per-connection: 0 is not between 1 and 4294967295",
        ),
        ({"socket_tos": 256}, "--socket-tos: 256 is not between 0 and 255"),
        ({"connection_balancer": "round-robin"}, "--connection-balancer: 'round-robin' is not 'exact'"),
    ],
)
def test_bad_listener_limits_name_the_flag(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=r"^--") as caught:
        _settings(**options)
    assert message in str(caught.value)


@pytest.mark.parametrize(("level", "least"), [("info", None), ("error", 300), ("critical", 500)])
def test_access_log_levels_filter_by_status(level: str, least: int | None) -> None:
    manager = hcm.HttpConnectionManager()
    settings = _settings(accesslog_level=level)
    assert http_connection_manager("r", "r", settings, []).typed_config.Unpack(manager)
    (log,) = manager.access_log
    if least is None:
        assert not log.HasField("filter")
        return
    status, flagged = log.filter.or_filter.filters
    assert status.status_code_filter.comparison.value.default_value == least
    assert status.status_code_filter.comparison.op == accesslog.ComparisonFilter.GE
    assert flagged.HasField("response_flag_filter")


def test_access_log_disabled() -> None:
    manager = hcm.HttpConnectionManager()
    assert http_connection_manager("r", "r", _settings(accesslog_level="disabled"), []).typed_config.Unpack(
        manager
    )
    assert not manager.access_log
