"""Envoy bootstrap: its shape, Envoy's own validation of it, and a real start."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any, TypedDict

import grpc
import pytest
from click.testing import CliRunner
from google.protobuf.json_format import ParseError

from cpx.cli import cli
from cpx.ops import certgen
from cpx.testing import EnvoyProcess, envoy_binary, free_port, http_get
from cpx.xds.envoy import admin as envoyadmin
from cpx.xds.envoy import bootstrap

UPSTREAM_TLS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"


def _cluster(config: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in config["static_resources"]["clusters"] if c["name"] == name)
    return found


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("certs")
    certgen.generate(out)
    return {
        "xds_cafile": str(out / certgen.CA_CERT_FILE),
        "xds_cert_file": str(out / certgen.ENVOY_CERT_FILE),
        "xds_key_file": str(out / certgen.ENVOY_KEY_FILE),
        "dir": str(out),
    }


def _routes(listener: dict[str, Any]) -> list[tuple[str, str]]:
    """(exact path, the method it is limited to) of each route of a read-only listener."""
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["normalize_path"] is True
    (vhost,) = hcm["route_config"]["virtual_hosts"]
    out = []
    for route in vhost["routes"]:
        assert route["route"] == {"cluster": "envoy-admin"}
        (method,) = route["match"]["headers"]
        assert method["name"] == ":method" and method["string_match"]["ignore_case"] is True
        out.append((route["match"]["path"], method["string_match"]["exact"]))
    return out


def test_stats_listener_and_listeners_off() -> None:
    config = bootstrap.bootstrap_config(admin_address="/run/envoy/admin.sock", stats_port=8002)
    (stats,) = config["static_resources"]["listeners"]  # admin_port 0: no envoy-admin listener
    assert stats["name"] == "stats-health"
    assert stats["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": 8002}
    assert _routes(stats) == [("/ready", "GET"), ("/stats", "GET"), ("/stats/prometheus", "GET")]
    assert config["admin"]["address"]["pipe"]["path"] == "/run/envoy/admin.sock"
    assert bootstrap.bootstrap_config()["static_resources"].get("listeners", []) == []


@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0", "admin.sock", ""])
def test_admin_address_must_be_a_socket_path(address: str) -> None:
    with pytest.raises(ValueError, match="absolute path of a Unix socket"):
        bootstrap.bootstrap_config(admin_address=address)


class _TLSFiles(TypedDict):
    xds_cafile: str
    xds_cert_file: str
    xds_key_file: str


def _tls_files(certs: dict[str, str]) -> _TLSFiles:
    return _TLSFiles(
        xds_cafile=certs["xds_cafile"],
        xds_cert_file=certs["xds_cert_file"],
        xds_key_file=certs["xds_key_file"],
    )


def test_defaults_match_contour() -> None:
    config = bootstrap.bootstrap_config(xds_address="127.0.0.1", xds_port=8001, admin_port=9001)
    assert config["node"] == {"id": "cpx", "cluster": "cpx"}
    dynamic = config["dynamic_resources"]
    assert dynamic["ads_config"] == {
        "api_type": "GRPC",
        "transport_api_version": "V3",
        "grpc_services": [{"envoy_grpc": {"cluster_name": "contour"}}],
    }
    assert dynamic["lds_config"] == dynamic["cds_config"] == {"ads": {}, "resource_api_version": "V3"}

    xds = _cluster(config, "contour")
    assert xds["type"] == "STATIC"
    assert xds["connect_timeout"] == "5s"
    assert xds["alt_stat_name"] == "projectcontour_contour_8001"
    assert xds["upstream_connection_options"]["tcp_keepalive"] == {
        "keepalive_probes": 3,
        "keepalive_time": 30,
        "keepalive_interval": 5,
    }
    options = xds["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert options["explicit_http_config"] == {"http2_protocol_options": {}}
    assert "transport_socket" not in xds
    endpoint = xds["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    assert endpoint["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 8001}

    # Envoy's admin interface only on a Unix socket (Contour's default path), owner-only.
    assert config["admin"]["address"] == {"pipe": {"path": "/admin/admin.sock", "mode": 0o600}}
    assert config["admin"]["access_log"][0]["typed_config"]["path"] == "/dev/null"
    admin = _cluster(config, "envoy-admin")
    assert admin["type"] == "STATIC"
    endpoint = admin["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    assert endpoint["address"] == {"pipe": {"path": "/admin/admin.sock"}}
    # The read-only listener (Contour's envoy-admin): loopback, GET of Contour's paths only.
    (listener,) = config["static_resources"]["listeners"]
    assert listener["name"] == "envoy-admin"
    assert listener["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 9001}
    assert _routes(listener) == [(path, "GET") for path in envoyadmin.READ_ONLY_PATHS]
    assert config["layered_runtime"]["layers"] == [
        {
            "name": "static",
            "static_layer": {
                "re2.max_program_size.error_level": 1048576,
                "re2.max_program_size.warn_level": 1000,
            },
        },
        {"name": "admin", "admin_layer": {}},
    ]
    assert config["default_regex_engine"]["name"] == "envoy.regex_engines.google_re2"
    assert "overload_manager" not in config


def test_dns_name_and_options() -> None:
    config = bootstrap.bootstrap_config(
        xds_address="cpx.projectcontour",
        xds_port=8001,
        admin_port=9001,
        node_id="envoy-1",
        dns_lookup_family="v4",
        rtds_layer=True,
        overload_max_heap=1 << 30,
        overload_downstream_max_connections=1000,
        xds_keepalive_interval=30,
    )
    xds = _cluster(config, "contour")
    options = xds["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    keepalive = options["explicit_http_config"]["http2_protocol_options"]["connection_keepalive"]
    assert keepalive == {"interval": "30s", "timeout": "20s"}
    assert (xds["type"], xds["dns_lookup_family"]) == ("STRICT_DNS", "V4_ONLY")
    assert config["node"]["id"] == "envoy-1"
    layers = config["layered_runtime"]["layers"]
    assert [layer["name"] for layer in layers] == ["static", "dynamic", "admin"]
    assert layers[1]["rtds_layer"]["rtds_config"] == {"ads": {}, "resource_api_version": "V3"}
    monitors = [m["name"] for m in config["overload_manager"]["resource_monitors"]]
    assert monitors == [
        "envoy.resource_monitors.fixed_heap",
        "envoy.resource_monitors.global_downstream_max_connections",
    ]


def test_static_only() -> None:
    config = bootstrap.bootstrap_config(
        admin_port=0, xds=False, static_clusters=[{"name": "x", "type": "STATIC"}]
    )
    assert "dynamic_resources" not in config
    assert [c["name"] for c in config["static_resources"]["clusters"]] == ["envoy-admin", "x"]


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="all of"):
        bootstrap.bootstrap_config(xds_cafile="ca.pem")
    with pytest.raises(ValueError, match="dns_lookup_family"):
        bootstrap.bootstrap_config(dns_lookup_family="v5")
    # Static resources go through the protobuf schema too.
    with pytest.raises(ParseError):
        bootstrap.bootstrap_config(static_clusters=[{"name": "x", "no_such_field": 1}])


def test_mtls_with_files(certs: dict[str, str]) -> None:
    config = bootstrap.bootstrap_config(xds_port=8001, admin_port=9001, **_tls_files(certs))
    socket = _cluster(config, "contour")["transport_socket"]
    assert socket["typed_config"]["@type"] == UPSTREAM_TLS
    common = socket["typed_config"]["common_tls_context"]
    assert common["tls_certificates"] == [
        {
            "certificate_chain": {"filename": certs["xds_cert_file"]},
            "private_key": {"filename": certs["xds_key_file"]},
        }
    ]
    assert common["validation_context"] == {
        "trusted_ca": {"filename": certs["xds_cafile"]},
        "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": "cpx"}}],
    }


def test_mtls_with_sds_resources(
    tmp_path: Path, certs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    resources_dir = str(tmp_path / "resources")
    config = bootstrap.bootstrap_config(
        xds_port=8001, admin_port=9001, resources_dir=resources_dir, **_tls_files(certs)
    )
    common = _cluster(config, "contour")["transport_socket"]["typed_config"]["common_tls_context"]
    cert_file = f"{resources_dir}/sds/xds-tls-certificate.json"
    assert common["tls_certificate_sds_secret_configs"] == [
        {
            "name": "contour_xds_tls_certificate",
            "sds_config": {"resource_api_version": "V3", "path_config_source": {"path": cert_file}},
        }
    ]
    resources = bootstrap.sds_resource_files(resources_dir, **_tls_files(certs))
    bootstrap.write_bootstrap(str(tmp_path / "envoy.json"), config, resources=resources)
    written = json.loads(Path(cert_file).read_text())
    assert written["resources"][0]["tls_certificate"]["private_key"] == {"filename": certs["xds_key_file"]}
    assert json.loads((tmp_path / "envoy.json").read_text()) == config

    bootstrap.write_bootstrap("-", config)
    assert json.loads(capsys.readouterr().out) == config


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(path), "--disable-hot-restart", "-l", "error"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.e2e
@pytest.mark.parametrize("variant", ["plain", "dns", "mtls", "sds", "everything"])
def test_envoy_validates(variant: str, tmp_path: Path, certs: dict[str, str]) -> None:
    kwargs: dict[str, Any] = {"xds_port": 8001, "admin_port": 9001, "stats_port": 8002}
    resources = None
    if variant == "dns":
        kwargs["xds_address"] = "cpx.projectcontour.svc"
    if variant in ("mtls", "sds", "everything"):
        kwargs.update(_tls_files(certs))
    if variant in ("sds", "everything"):
        kwargs["resources_dir"] = str(tmp_path)
        resources = bootstrap.sds_resource_files(str(tmp_path), **_tls_files(certs))
    if variant == "everything":
        kwargs.update(
            rtds_layer=True,
            overload_max_heap=1 << 30,
            overload_downstream_max_connections=100,
            xds_keepalive_interval=30,
        )
    path = tmp_path / "envoy.json"
    bootstrap.write_bootstrap(str(path), bootstrap.bootstrap_config(**kwargs), resources=resources)
    result = _validate(path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_envoy_runs_without_xds_server(envoy_factory: Callable[..., EnvoyProcess]) -> None:
    xds_port = free_port()
    envoy = envoy_factory(bootstrap.bootstrap_config(xds_port=xds_port, admin_port=0))
    status, body = envoy.admin_get("/server_info")
    assert status == 200
    assert json.loads(body)["command_line_options"]["base_id"] is not None
    # Without an xDS server the initial fetches are pending, so Envoy is not ready yet.
    assert envoy.admin_get("/ready") == (503, "PRE_INITIALIZING\n")
    runtime = json.loads(envoy.admin_get("/runtime")[1])["entries"]
    # Envoy prints numbers with six significant digits ("1.04858e+06").
    assert float(runtime["re2.max_program_size.error_level"]["final_value"]) == pytest.approx(
        1048576, rel=1e-5
    )
    assert float(runtime["re2.max_program_size.warn_level"]["final_value"]) == 1000
    # Envoy is dialling the (absent) xDS server; stats use Contour's alt_stat_name.
    assert envoy.wait_stat(f"cluster.projectcontour_contour_{xds_port}.upstream_cx_connect_fail") >= 1


@pytest.mark.e2e
@pytest.mark.parametrize("deferred", [True, False])
def test_deferred_cluster_stats(deferred: bool, envoy_factory: Callable[..., EnvoyProcess]) -> None:
    """Deferred (the default), an idle cluster has no traffic statistics until its first request."""
    admin_port = free_port()
    config = bootstrap.bootstrap_config(xds=False, admin_port=admin_port, deferred_cluster_stats=deferred)
    assert ("deferred_stat_options" in config) is deferred
    envoy = envoy_factory(config)
    envoy.wait_ready()
    total = f"cluster.projectcontour_{envoyadmin.ADMIN_CLUSTER}.upstream_rq_total"
    assert envoy.stats(f"^{total}$") == ({} if deferred else {total: 0})
    # The read-only admin listener's requests go through that cluster.
    assert http_get(f"http://127.0.0.1:{admin_port}/ready").status == 200
    assert envoy.wait_stat(total) == 1


def test_cli_can_create_cluster_stats_up_front() -> None:
    default = json.loads(CliRunner().invoke(cli.commands["bootstrap"], ["-"]).stdout)
    assert default["deferred_stat_options"] == {"enable_deferred_creation_stats": True}
    result = CliRunner().invoke(cli.commands["bootstrap"], ["-", "--no-deferred-cluster-stats"])
    assert result.exit_code == 0, result.output
    assert "deferred_stat_options" not in json.loads(result.stdout)


class _Recorder(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc ships no type hints
    """Accepts any RPC, records its method and the client certificate's name, then ends it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[bytes]]] = []
        self.called = threading.Event()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method

        def behaviour(requests: Any, context: grpc.ServicerContext) -> Any:
            self.calls.append((method, context.auth_context().get("x509_common_name", [])))
            self.called.set()
            return iter(())

        return grpc.stream_stream_rpc_method_handler(behaviour)


@pytest.mark.e2e
@pytest.mark.parametrize("server_san", ["cpx", "not-cpx"])
def test_envoy_dials_xds_with_mutual_tls(
    server_san: str, envoy_factory: Callable[..., EnvoyProcess], certs: dict[str, str]
) -> None:
    out = Path(certs["dir"])
    credentials = grpc.ssl_server_credentials(
        [((out / certgen.CPX_KEY_FILE).read_bytes(), (out / certgen.CPX_CERT_FILE).read_bytes())],
        root_certificates=(out / certgen.CA_CERT_FILE).read_bytes(),
        require_client_auth=True,
    )
    recorder = _Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[recorder])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        config = bootstrap.bootstrap_config(
            xds_port=port, admin_port=0, xds_server_san=server_san, **_tls_files(certs)
        )
        envoy = envoy_factory(config)
        if server_san != "cpx":
            # Envoy refuses a server certificate that does not name the expected SAN.
            assert envoy.wait_stat(f"cluster.projectcontour_contour_{port}.ssl.fail_verify_san") >= 1
            assert not recorder.calls
            return
        assert recorder.called.wait(10), "Envoy never reached the xDS server"
        method, names = recorder.calls[0]
        assert method == "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
        assert names == [b"envoy"]
    finally:
        server.stop(0).wait()


def test_cli_defaults_follow_contour() -> None:
    result = CliRunner().invoke(cli.commands["bootstrap"], ["-"])
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)
    assert config["admin"]["address"]["pipe"]["path"] == "/admin/admin.sock"
    listeners = {
        listener["name"]: listener["address"]["socket_address"]
        for listener in config["static_resources"]["listeners"]
    }
    assert listeners == {
        "envoy-admin": {"address": "127.0.0.1", "port_value": 9001},
        "stats-health": {"address": "0.0.0.0", "port_value": 8002},
    }


def test_cli_refuses_a_tcp_admin_address() -> None:
    result = CliRunner().invoke(cli.commands["bootstrap"], ["-", "--admin-address", "127.0.0.1"])
    assert result.exit_code == 2
    assert "absolute path of a Unix socket" in result.output
