"""Envoy bootstrap configuration (``contour bootstrap``, ``cmd/contour/bootstrap.go``).

The bootstrap is built as an xds-protos ``Bootstrap`` message and rendered with ``json_format``, so
a field or type Envoy does not know fails here, not in Envoy. Differences from Contour, on purpose:

* Envoy talks to cpx over one ADS stream (``ads_config``; LDS and CDS say ``ads: {}``, and so must
  the RDS/EDS/SDS config sources cpx serves: :func:`ads_config_source`) where Contour opens one
  SotW stream per type. The xDS cluster keeps Contour's name ``contour`` and its alt_stat_name
  ``<namespace>_contour_<port>``, so dashboards and alerts built on Contour's stats keep working.
* As in Contour, the admin interface listens only on a Unix socket (``admin_address``, a path);
  read-only admin paths are proxied to it, for ``GET`` only, from ``127.0.0.1:admin_port`` and
  ``stats_address:stats_port`` (see :mod:`cpx.xds.envoy.admin`).  Contour serves those two listeners
  over xDS; here they are static, so the readiness probe answers before cpx is reachable.
* RE2 limits live in a static runtime layer (Contour serves them over RTDS); an RTDS layer
  ``dynamic`` can be added with ``rtds_layer=True`` once the server answers RTDS.
"""

from __future__ import annotations

import importlib
import ipaddress
import json
import pkgutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import descriptor_pool, json_format
from google.protobuf.message import Message

from cpx.config import BootstrapOptions
from cpx.xds.constraints.semantic import DEFAULT_MAX_REGEX_PROGRAM_SIZE
from cpx.xds.envoy.admin import ADMIN_CLUSTER, admin_cluster, admin_listeners, pipe_address

XDS_CLUSTER = "contour"
# The xDS server certificate must carry this DNS SAN (see cpx.ops.certgen).
XDS_SERVER_SAN = "cpx"
# Contour's --resources-dir layout for hot-reloaded xDS client certificates.
SDS_SUBDIR = "sds"
SDS_TLS_CERTIFICATE_FILE = "xds-tls-certificate.json"
SDS_VALIDATION_CONTEXT_FILE = "xds-validation-context.json"
SDS_TLS_CERTIFICATE_NAME = "contour_xds_tls_certificate"
SDS_VALIDATION_CONTEXT_NAME = "contour_xds_tls_validation_context"

# Contour's RE2 limits (RTDS layer in Contour): reject regexes whose program exceeds 1 MiB,
# but only warn above 1000 so that large-but-legal regexes keep working.
RE2_RUNTIME = {
    "re2.max_program_size.error_level": DEFAULT_MAX_REGEX_PROGRAM_SIZE,  # what cpx's checks assume
    "re2.max_program_size.warn_level": 1000,
}

_DNS_LOOKUP_FAMILY = {"auto": "AUTO", "v4": "V4_ONLY", "v6": "V6_ONLY", "all": "ALL"}
_HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
_TYPE_PREFIX = "type.googleapis.com/"
_DOWNSTREAM_CONNECTIONS = (
    "envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig"
)


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


def _socket_address(address: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": address, "port_value": port}}


def _static_cluster(name: str, address: str, port: int, connect_timeout: str) -> dict[str, Any]:
    # STATIC needs an IP; a name (e.g. the cpx Service) is resolved by Envoy and re-resolved on
    # change, which is what lets cpx move between pods.
    return {
        "name": name,
        "type": "STATIC" if _is_ip(address) else "STRICT_DNS",
        "connect_timeout": connect_timeout,
        "lb_policy": "ROUND_ROBIN",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _socket_address(address, port)}}]}],
        },
    }


def _file_source(path: str) -> dict[str, str]:
    return {"filename": path}


def _san_matcher(san: str) -> list[dict[str, Any]]:
    return [{"san_type": "DNS", "matcher": {"exact": san}}]


def _tls_certificate(cert_file: str, key_file: str) -> dict[str, Any]:
    return {"certificate_chain": _file_source(cert_file), "private_key": _file_source(key_file)}


def _validation_context(cafile: str, server_san: str) -> dict[str, Any]:
    return {"trusted_ca": _file_source(cafile), "match_typed_subject_alt_names": _san_matcher(server_san)}


def _upstream_tls(
    cafile: str, cert_file: str, key_file: str, server_san: str, resources_dir: str | None
) -> dict[str, Any]:
    common: dict[str, Any] = {"tls_params": {"tls_maximum_protocol_version": "TLSv1_3"}}
    if resources_dir is None:
        # Certificates read once at start-up (Contour's default: no rotation without a restart).
        common["tls_certificates"] = [_tls_certificate(cert_file, key_file)]
        common["validation_context"] = _validation_context(cafile, server_san)
    else:
        # Certificates behind file-based SDS resources, which Envoy watches and reloads.
        sds = Path(resources_dir, SDS_SUBDIR)
        common["tls_certificate_sds_secret_configs"] = [
            _path_sds(SDS_TLS_CERTIFICATE_NAME, str(sds / SDS_TLS_CERTIFICATE_FILE))
        ]
        common["validation_context_sds_secret_config"] = _path_sds(
            SDS_VALIDATION_CONTEXT_NAME, str(sds / SDS_VALIDATION_CONTEXT_FILE)
        )
    return {
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": _TYPE_PREFIX + "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "common_tls_context": common,
        },
    }


def _path_sds(name: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "sds_config": {"resource_api_version": "V3", "path_config_source": {"path": path}},
    }


def _xds_cluster(
    address: str,
    port: int,
    *,
    namespace: str,
    dns_lookup_family: str,
    keepalive_interval: int | None,
    tls: dict[str, Any] | None,
) -> dict[str, Any]:
    cluster = _static_cluster(XDS_CLUSTER, address, port, "5s")
    http2: dict[str, Any] = {}
    if keepalive_interval:
        # Off by default, as in Contour (TCP keepalive already finds dead peers in ~45 s): a gRPC
        # server only accepts pings this often with grpc.http2.min_ping_interval_without_data_ms
        # at most the interval; by default it answers a third idle ping with GOAWAY "too many
        # pings", dropping the ADS stream every few minutes.
        http2["connection_keepalive"] = {"interval": f"{keepalive_interval}s", "timeout": "20s"}
    cluster.update(
        alt_stat_name=f"{namespace}_{XDS_CLUSTER}_{port}",
        dns_lookup_family=_DNS_LOOKUP_FAMILY[dns_lookup_family],
        upstream_connection_options={
            "tcp_keepalive": {"keepalive_probes": 3, "keepalive_time": 30, "keepalive_interval": 5}
        },
        typed_extension_protocol_options={
            _HTTP_PROTOCOL_OPTIONS: {
                "@type": _TYPE_PREFIX + _HTTP_PROTOCOL_OPTIONS,
                "explicit_http_config": {"http2_protocol_options": http2},
            }
        },
        # Contour's thresholds: the defaults (1024) are too low for one EDS watch per cluster.
        circuit_breakers={
            "thresholds": [
                {
                    "priority": priority,
                    "max_connections": 100000,
                    "max_pending_requests": 100000,
                    "max_requests": 60000000,
                    "max_retries": 50,
                }
                for priority in ("HIGH", "DEFAULT")
            ]
        },
    )
    if tls is not None:
        cluster["transport_socket"] = tls
    return cluster


def ads_config_source() -> dict[str, Any]:
    """The ``ConfigSource`` every dynamic resource uses: the shared ADS stream."""
    return {"ads": {}, "resource_api_version": "V3"}


def _overload_manager(max_heap: int, max_downstream_connections: int) -> dict[str, Any]:
    monitors: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    if max_heap > 0:
        # Contour's --overload-max-heap: shrink the heap at 95 %, stop accepting requests at 98 %.
        monitors.append(
            {
                "name": "envoy.resource_monitors.fixed_heap",
                "typed_config": {
                    "@type": _TYPE_PREFIX
                    + "envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig",
                    "max_heap_size_bytes": str(max_heap),
                },
            }
        )
        heap = "envoy.resource_monitors.fixed_heap"
        actions += [
            {"name": "envoy.overload_actions.shrink_heap", "triggers": [_threshold(heap, 0.95)]},
            {"name": "envoy.overload_actions.stop_accepting_requests", "triggers": [_threshold(heap, 0.98)]},
        ]
    if max_downstream_connections > 0:
        monitors.append(
            {
                "name": "envoy.resource_monitors.global_downstream_max_connections",
                "typed_config": {
                    "@type": _TYPE_PREFIX + _DOWNSTREAM_CONNECTIONS,
                    "max_active_downstream_connections": str(max_downstream_connections),
                },
            }
        )
    return {"refresh_interval": "0.25s", "resource_monitors": monitors, "actions": actions}


def _threshold(monitor: str, value: float) -> dict[str, Any]:
    return {"name": monitor, "threshold": {"value": value}}


XDS_API_TYPES = {"delta": "DELTA_GRPC", "sotw": "GRPC"}
_DEFAULTS = BootstrapOptions()


def bootstrap_config(  # noqa: PLR0913  (why: one keyword per `cpx bootstrap` option)
    *,
    xds_address: str = _DEFAULTS.xds_address,
    xds_port: int = _DEFAULTS.xds_port,
    admin_address: str = _DEFAULTS.admin_address,
    admin_port: int = 0,
    stats_address: str = _DEFAULTS.stats_address,
    stats_port: int = 0,
    node_id: str = _DEFAULTS.node_id,
    cluster: str = "cpx",
    xds_cafile: str | None = None,
    xds_cert_file: str | None = None,
    xds_key_file: str | None = None,
    resources_dir: str | None = None,
    xds_server_san: str = XDS_SERVER_SAN,
    namespace: str = _DEFAULTS.namespace,
    dns_lookup_family: str = "auto",
    xds_keepalive_interval: int | None = None,
    admin_access_log_path: str = "/dev/null",
    rtds_layer: bool = False,
    xds: bool = True,
    overload_max_heap: int = 0,
    overload_downstream_max_connections: int = 0,
    static_listeners: Sequence[Mapping[str, Any]] = (),
    static_clusters: Sequence[Mapping[str, Any]] = (),
    xds_api: str = _DEFAULTS.xds_api,
    deferred_cluster_stats: bool = _DEFAULTS.deferred_cluster_stats,
) -> dict[str, Any]:
    """Return the Envoy bootstrap (Envoy's JSON field names) for an Envoy managed by cpx.

    Give either none or all of ``xds_cafile``/``xds_cert_file``/``xds_key_file``: with them the xDS
    connection is mutual TLS (Envoy presents the client certificate, and checks that cpx's
    certificate is signed by the CA and names ``xds_server_san``). With ``resources_dir`` the
    certificates are referenced through file-based SDS resources under ``<resources_dir>/sds``
    (write them with :func:`sds_resource_files`), which Envoy reloads when they change.
    ``static_listeners``/``static_clusters`` (Envoy JSON) are added as is; with ``xds=False`` they
    are all there is (no xDS cluster, no dynamic resources): a static Envoy for tests, which
    otherwise would wait ``initial_fetch_timeout`` for an xDS server before serving.
    The admin interface listens on the Unix socket ``admin_address`` only; ``admin_port`` and
    ``stats_port`` (0: none, the default here; ``cpx bootstrap`` says 9001 and 8002) add the
    read-only listeners of :mod:`cpx.xds.envoy.admin`. With ``deferred_cluster_stats`` (the
    default) Envoy creates a cluster's traffic statistics (``upstream_rq_*``, ``upstream_cx_*``, ...)
    when the cluster first sees traffic: creating 10k clusters then takes Envoy half the time.
    """
    if not admin_address.startswith("/"):
        raise ValueError(
            f"admin_address must be the absolute path of a Unix socket (got {admin_address!r}): "
            "Envoy's admin interface is never on TCP; admin_port is its read-only listener"
        )
    if dns_lookup_family not in _DNS_LOOKUP_FAMILY:
        raise ValueError(f"dns_lookup_family must be one of {sorted(_DNS_LOOKUP_FAMILY)}")
    tls_files = (xds_cafile, xds_cert_file, xds_key_file)
    if any(tls_files) and not all(tls_files):
        raise ValueError("give all of xds_cafile, xds_cert_file and xds_key_file, or none of them")
    tls = None
    if xds_cafile and xds_cert_file and xds_key_file:
        tls = _upstream_tls(xds_cafile, xds_cert_file, xds_key_file, xds_server_san, resources_dir)

    layers: list[dict[str, Any]] = [{"name": "static", "static_layer": RE2_RUNTIME}]
    if rtds_layer and xds:
        layers.append(
            {"name": "dynamic", "rtds_layer": {"name": "dynamic", "rtds_config": ads_config_source()}}
        )
    # Last, so that changes made through the admin /runtime_modify endpoint win (Contour does this).
    layers.append({"name": "admin", "admin_layer": {}})

    clusters: list[dict[str, Any]] = []
    if xds:
        clusters.append(
            _xds_cluster(
                xds_address,
                xds_port,
                namespace=namespace,
                dns_lookup_family=dns_lookup_family,
                keepalive_interval=xds_keepalive_interval,
                tls=tls,
            )
        )
    # The read-only listeners' way to the admin socket (Contour's cluster of the same name).
    clusters.append({**admin_cluster(admin_address), "alt_stat_name": f"{namespace}_{ADMIN_CLUSTER}"})
    clusters += [dict(c) for c in static_clusters]
    listeners = admin_listeners(admin_port=admin_port, stats_address=stats_address, stats_port=stats_port)
    listeners += [dict(listener) for listener in static_listeners]

    config: dict[str, Any] = {
        "node": {"id": node_id, "cluster": cluster},
        "static_resources": {
            "clusters": clusters,
            "listeners": listeners,
        },
        "admin": {
            "address": pipe_address(admin_address),
            "access_log": [
                {
                    "name": "envoy.access_loggers.file",
                    "typed_config": {
                        "@type": _TYPE_PREFIX + "envoy.extensions.access_loggers.file.v3.FileAccessLog",
                        "path": admin_access_log_path,
                    },
                }
            ],
        },
        "layered_runtime": {"layers": layers},
        "default_regex_engine": {
            "name": "envoy.regex_engines.google_re2",
            "typed_config": {"@type": _TYPE_PREFIX + "envoy.extensions.regex_engines.v3.GoogleRE2"},
        },
    }
    if xds:
        config["dynamic_resources"] = {
            "ads_config": {
                # State-of-the-world ADS by default (as Contour's Envoys speak); "delta" makes
                # Envoy subscribe incrementally, so a change sends only the resources that changed.
                "api_type": XDS_API_TYPES[xds_api],
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": XDS_CLUSTER}}],
            },
            # Envoy's default initial_fetch_timeout (15 s) is kept, as Contour does: a listener or
            # cluster that never arrives does not block start-up forever.
            "lds_config": ads_config_source(),
            "cds_config": ads_config_source(),
        }
    if deferred_cluster_stats:
        # Most of Envoy's cost of a new cluster is its ~100 traffic counters and gauges (names
        # built, tags extracted). Deferred, an idle cluster has none: its series appear in
        # /stats with its first request (Envoy's own option for large cluster counts).
        config["deferred_stat_options"] = {"enable_deferred_creation_stats": True}
    if overload_max_heap > 0 or overload_downstream_max_connections > 0:
        config["overload_manager"] = _overload_manager(overload_max_heap, overload_downstream_max_connections)
    checked = _checked(config, bootstrap_pb2.Bootstrap())
    # json_format renders Struct numbers as floats (1048576.0); keep the integers readable.
    checked["layered_runtime"]["layers"][0]["static_layer"] = dict(RE2_RUNTIME)
    return checked


def sds_resource_files(
    resources_dir: str,
    *,
    xds_cafile: str,
    xds_cert_file: str,
    xds_key_file: str,
    xds_server_san: str = XDS_SERVER_SAN,
) -> dict[str, dict[str, Any]]:
    """The two file-based SDS resources ``resources_dir`` mode refers to, by path."""
    sds = Path(resources_dir, SDS_SUBDIR)
    cert = {
        "name": SDS_TLS_CERTIFICATE_NAME,
        "tls_certificate": _tls_certificate(xds_cert_file, xds_key_file),
    }
    validation = {
        "name": SDS_VALIDATION_CONTEXT_NAME,
        "validation_context": _validation_context(xds_cafile, xds_server_san),
    }
    type_url = _TYPE_PREFIX + secret_pb2.Secret.DESCRIPTOR.full_name
    return {
        str(sds / SDS_TLS_CERTIFICATE_FILE): _checked(
            {"resources": [{"@type": type_url, **cert}]}, discovery_pb2.DiscoveryResponse()
        ),
        str(sds / SDS_VALIDATION_CONTEXT_FILE): _checked(
            {"resources": [{"@type": type_url, **validation}]}, discovery_pb2.DiscoveryResponse()
        ),
    }


def write_bootstrap(
    path: str, config: Mapping[str, Any], *, resources: Mapping[str, Mapping[str, Any]] | None = None
) -> None:
    """Write the bootstrap JSON to ``path`` (``-`` for stdout) and any SDS resource files."""
    for resource_path, resource in (resources or {}).items():
        target = Path(resource_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(resource, indent=2) + "\n")
    text = json.dumps(config, indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text)


def _checked(config: Mapping[str, Any], message: Message) -> dict[str, Any]:
    """Round-trip through the protobuf message: unknown fields or bad values raise ParseError."""
    _import_any_types(config)
    json_format.ParseDict(config, message)
    rendered: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return rendered


def _import_any_types(value: Any) -> None:
    # json_format resolves "@type" in the default descriptor pool, which only knows imported
    # modules; import the xds-protos package of every type URL that is not known yet.
    for type_url in set(_type_urls(value)):
        full_name = type_url.rpartition("/")[2]
        if not _known(full_name):
            _import_package(full_name.rpartition(".")[0])


def _type_urls(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        if isinstance(value.get("@type"), str):
            yield value["@type"]
        for item in value.values():
            yield from _type_urls(item)
    elif isinstance(value, list):
        for item in value:
            yield from _type_urls(item)


def _known(full_name: str) -> bool:
    try:
        descriptor_pool.Default().FindMessageTypeByName(full_name)
    except KeyError:
        return False
    return True


def _import_package(package: str) -> None:
    try:
        module = importlib.import_module(package)
    except ImportError:
        return  # json_format reports the unknown type with its name
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if info.name.endswith("_pb2"):
            importlib.import_module(f"{package}.{info.name}")
