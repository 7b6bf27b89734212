"""Contour's access log formats (accesslog-format, accesslog-format-string, json-fields), the
cluster connect timeout (timeouts.connect-timeout) and `cpx bootstrap -c` (network.admin-port)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from envoy.config.accesslog.v3 import accesslog_pb2 as accesslog
from envoy.config.cluster.v3 import cluster_pb2 as cluster_v3
from envoy.extensions.access_loggers.stream.v3 import stream_pb2 as stream_log
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2 as tcp_proxy
from google.protobuf import json_format as protojson

from cpx.accesslogformat import DEFAULT_JSON_FIELDS, format_string, json_format
from cpx.builtin import plugin as builtin
from cpx.cli import cli
from cpx.cli.translate import translate_command
from cpx.config import Config
from cpx.contourfile import load
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route, ServicePort, TCPProxy
from cpx.errors import ConfigError
from cpx.xds.caches.clusters import ClusterCache
from cpx.xds.envoy.listener import HTTPSettings, http_connection_manager, tcp_proxy_filter

WEB = ServicePort(namespace="default", name="web", port=80)


def _settings(**options: Any) -> HTTPSettings:
    return HTTPSettings.from_config(Config(options=options))


def _stdout(log: accesslog.AccessLog) -> stream_log.StdoutAccessLog:
    assert log.name == "envoy.access_loggers.stdout"
    out = stream_log.StdoutAccessLog()
    assert log.typed_config.Unpack(out)
    return out


def _manager_log(settings: HTTPSettings) -> list[accesslog.AccessLog]:
    manager = hcm.HttpConnectionManager()
    assert http_connection_manager("r", "http", settings, []).typed_config.Unpack(manager)
    return list(manager.access_log)


def _tcp_log(settings: HTTPSettings) -> list[accesslog.AccessLog]:
    proxy = tcp_proxy.TcpProxy()
    node = TCPProxy(clusters=(Cluster(upstream=WEB),))
    assert tcp_proxy_filter("tcp", node, settings).typed_config.Unpack(proxy)
    return list(proxy.access_log)


def test_json_fields_map_to_contours_envoy_operators() -> None:
    fields = json_format(["@timestamp", "method", "path", "upstream_host", "bytes_sent", "x=%REQ(X-Y)%"])
    assert fields == {
        "@timestamp": "%START_TIME%",
        "method": "%REQ(:METHOD)%",
        "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
        "upstream_host": "%UPSTREAM_HOST%",
        "bytes_sent": "%BYTES_SENT%",
        "x": "%REQ(X-Y)%",
    }
    assert json_format(["Response_Code"]) == {"Response_Code": "%RESPONSE_CODE%"}
    assert len(json_format(DEFAULT_JSON_FIELDS)) == 23


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (["nope"], "invalid JSON log field name nope"),
        (["x="], "invalid JSON log field name x"),
        (["x=%FOO%"], "invalid JSON field: invalid Envoy format: %FOO%, invalid Envoy operator: FOO"),
        (
            ["x=%REQ%"],
            "invalid JSON field: invalid Envoy format: %REQ%, arguments required for operator: REQ",
        ),
    ],
)
def test_bad_json_fields_are_refused_with_contours_messages(fields: list[str], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message):
        json_format(fields)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%START_TIME%", "must end in newline"),
        ("%FOO%\n", "invalid Envoy format: %FOO%, invalid Envoy operator: FOO"),
        ("%START_TIME(%s):3%\n", "operator START_TIME cannot have truncation length"),
        ("100% done\n", r"invalid Envoy format: %$"),
    ],
)
def test_bad_format_strings_are_refused_with_contours_messages(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="invalid access log format: .*" + message):
        format_string(text)


def test_unset_options_keep_envoys_default_text_format_everywhere() -> None:
    for log in (*_manager_log(_settings()), *_tcp_log(_settings())):
        assert not _stdout(log).HasField("log_format")


def test_a_format_string_is_the_text_format_of_the_managers_and_the_tcp_proxys_log() -> None:
    text = "[%START_TIME%] %REQ_WITHOUT_QUERY(:PATH)% %RESPONSE_CODE%\n"
    settings = _settings(accesslog_format_string=text)
    for log in (*_manager_log(settings), *_tcp_log(settings)):
        found = _stdout(log).log_format
        assert found.text_format_source.inline_string == text
        assert [f.name for f in found.formatters] == ["envoy.formatter.req_without_query"]


def test_the_json_format_logs_contours_default_fields_or_the_chosen_ones() -> None:
    default = _stdout(_manager_log(_settings(accesslog_format="json"))[0]).log_format
    assert sorted(default.json_format.fields) == sorted(DEFAULT_JSON_FIELDS)
    assert default.omit_empty_values
    settings = _settings(
        accesslog_format="json",
        accesslog_json_fields=("method", "name=%REQ(X-NAME)%"),
        accesslog_level="error",
    )
    (log,) = _tcp_log(settings)
    found = protojson.MessageToDict(_stdout(log).log_format.json_format)
    assert found == {"method": "%REQ(:METHOD)%", "name": "%REQ(X-NAME)%"}
    assert log.filter.or_filter.filters[0].status_code_filter.comparison.value.default_value == 300
    assert not _tcp_log(_settings(accesslog_level="disabled"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"accesslog_format": "yaml"}, "--accesslog-format: 'yaml' is not one of envoy, json"),
        ({"accesslog_json_fields": ("nope",)}, "--accesslog-json-fields: invalid JSON log field name nope"),
        ({"accesslog_format_string": "x"}, "--accesslog-format-string: invalid access log format: must end"),
        ({"cluster_connect_timeout": "soon"}, "--cluster-connect-timeout: "),
        ({"cluster_connect_timeout": "0s"}, "--cluster-connect-timeout: '0s' is not a positive duration"),
    ],
)
def test_bad_options_refuse_the_start_naming_the_flag(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="^" + message):
        builtin.cpx_configure(Config(options=options))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accesslog-format: yaml", "accesslog-format: 'yaml' is not one of 'envoy', 'json'"),
        ("json-fields: [method, nope]", "json-fields: invalid JSON log field name nope"),
        ("accesslog-format-string: '%FOO%\\n'", "accesslog-format-string: invalid access log format: "),
        ("timeouts: {connect-timeout: infinity}", "timeouts.connect-timeout: "),
    ],
)
def test_bad_file_values_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("'", ".")):
        load(text, "contour.yaml")


def test_the_file_sets_the_access_log_and_connect_timeout_options(tmp_path: Path) -> None:
    config = tmp_path / "contour.yaml"
    config.write_text(
        "accesslog-format: json\njson-fields: ['@timestamp', 'upstream_host']\n"
        'accesslog-format-string: "%START_TIME%\\n"\ntimeouts: {connect-timeout: 5s}\n'
    )
    args = ["--plugins", "httpproxy", "-c", str(config), str(tmp_path)]
    params = translate_command.make_context("translate", args).params
    assert params["accesslog_format"] == "json"
    assert params["accesslog_json_fields"] == ("@timestamp", "upstream_host")
    assert params["accesslog_format_string"] == "%START_TIME%\n"
    assert params["cluster_connect_timeout"] == "5s"


def _connect_timeout(config: Config) -> float:
    dag = DAG()
    dag.ensure_listener("ingress_http", Protocol.HTTP, "0.0.0.0", 8080)
    route = Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), clusters=(Cluster(upstream=WEB),))
    dag.ensure_virtual_host("ingress_http", "example.com").add_route(route)
    cache = ClusterCache(config)
    cache.on_change(dag)
    (res,) = cache.contents().values()
    msg = cluster_v3.Cluster()
    msg.ParseFromString(res.body)
    return float(msg.connect_timeout.ToTimedelta().total_seconds())


def test_service_clusters_connect_within_the_configured_timeout() -> None:
    assert _connect_timeout(Config()) == 2.0  # Contour's default
    assert _connect_timeout(Config(options={"cluster_connect_timeout": "1m500ms"})) == 60.5


def _bootstrap(tmp_path: Path, text: str, *flags: str) -> dict[str, Any]:
    config = tmp_path / "contour.yaml"
    config.write_text(text)
    result = CliRunner().invoke(cli.commands["bootstrap"], ["-", "-c", str(config), *flags])
    if result.exit_code:
        raise click.UsageError(result.output)
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _ports(bootstrap: dict[str, Any]) -> dict[str, int]:
    listeners = bootstrap["static_resources"].get("listeners", [])
    return {item["name"]: item["address"]["socket_address"]["port_value"] for item in listeners}


def test_bootstrap_reads_the_admin_port_and_envoys_metrics_from_the_file_flags_win(tmp_path: Path) -> None:
    text = "network: {admin-port: 9101}\nmetrics: {envoy: {port: 8102}}\ntimeouts: {request-timeout: 3s}\n"
    assert _ports(_bootstrap(tmp_path, text)) == {"envoy-admin": 9101, "stats-health": 8102}
    assert _ports(_bootstrap(tmp_path, text, "--admin-port", "9200")) == {
        "envoy-admin": 9200,
        "stats-health": 8102,
    }
    with pytest.raises(click.UsageError, match=r"network\.admin-port: 70000 is out of range"):
        _bootstrap(tmp_path, "network: {admin-port: 70000}")
