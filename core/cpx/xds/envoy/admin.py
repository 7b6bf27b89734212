"""Envoy's admin interface, kept off the network (Contour's bootstrap and ``internal/envoy/v3/stats.go``).

The admin interface can do anything to Envoy (``POST /quitquitquit``, ``/logging``,
``/runtime_modify``, ``/healthcheck/fail``...), so it listens only on a Unix socket
(GHSA-5ph6-qq5x-7jwc): no TCP port, hence nothing an ExternalName Service or any other cluster can
point at.  What operators and probes need is proxied from loopback/pod TCP listeners to the socket
through the ``envoy-admin`` cluster, for ``GET`` on an explicit list of read-only paths:

* ``envoy-admin`` on ``127.0.0.1:<admin port>``: Contour's debugging paths (config dump, stats,
  clusters, ...), for ``kubectl port-forward``;
* ``stats-health`` on ``<stats address>:<stats port>``: ``/ready`` (readiness probe) and the
  Prometheus stats, as Contour's listener on 8002.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ADMIN_CLUSTER = "envoy-admin"
# Only Envoy's user may connect (connecting to a Unix socket needs write permission).
SOCKET_MODE = 0o600
# Contour's AdminListener paths: every one of them is read-only for GET.
READ_ONLY_PATHS = (
    "/certs",
    "/clusters",
    "/listeners",
    "/config_dump",
    "/memory",
    "/ready",
    "/runtime",
    "/server_info",
    "/stats",
    "/stats/prometheus",
    "/stats/recentlookups",
)
# Contour's "stats-health" listener.
STATS_PATHS = ("/ready", "/stats", "/stats/prometheus")
_TYPE_PREFIX = "type.googleapis.com/"
_HCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
_ROUTER = "envoy.extensions.filters.http.router.v3.Router"


def pipe_address(path: str) -> dict[str, Any]:
    return {"pipe": {"path": path, "mode": SOCKET_MODE}}


def admin_cluster(socket_path: str) -> dict[str, Any]:
    """The cluster the read-only listeners forward to: the admin socket."""
    return {
        "name": ADMIN_CLUSTER,
        "type": "STATIC",
        "connect_timeout": "0.250s",
        "load_assignment": {
            "cluster_name": ADMIN_CLUSTER,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": socket_path}}}}]}],
        },
    }


def _admin_route(path: str) -> dict[str, Any]:
    get_only = {"name": ":method", "string_match": {"exact": "GET", "ignore_case": True}}
    return {"match": {"path": path, "headers": [get_only]}, "route": {"cluster": ADMIN_CLUSTER}}


def read_only_listener(name: str, address: str, port: int, paths: Sequence[str]) -> dict[str, Any]:
    """A plain-HTTP listener that forwards ``GET`` of exactly ``paths`` to the admin socket.

    Paths are normalised first (``/stats/../quitquitquit`` is ``/quitquitquit``: no route, 404);
    any other method or path answers 404 from Envoy itself.
    """
    hcm = {
        "@type": _TYPE_PREFIX + _HCM,
        "stat_prefix": name,
        "normalize_path": True,
        "merge_slashes": True,
        "route_config": {
            "name": name,
            "virtual_hosts": [
                {"name": "backend", "domains": ["*"], "routes": [_admin_route(p) for p in paths]}
            ],
        },
        "http_filters": [
            {"name": "envoy.filters.http.router", "typed_config": {"@type": _TYPE_PREFIX + _ROUTER}}
        ],
    }
    return {
        "name": name,
        "address": {"socket_address": {"address": address, "port_value": port}},
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
        ],
    }


def admin_listeners(*, admin_port: int, stats_address: str, stats_port: int) -> list[dict[str, Any]]:
    """The read-only listeners; a port of 0 leaves that listener out."""
    listeners = []
    if admin_port:
        listeners.append(read_only_listener(ADMIN_CLUSTER, "127.0.0.1", admin_port, READ_ONLY_PATHS))
    if stats_port:
        listeners.append(read_only_listener("stats-health", stats_address, stats_port, STATS_PATHS))
    return listeners


def with_admin_socket(config: Mapping[str, Any], socket_path: str) -> dict[str, Any]:
    """``config`` (a bootstrap) with its admin interface, and the ``envoy-admin`` cluster if it
    has one, moved to ``socket_path`` (e.g. a per-test directory instead of /admin)."""
    out = dict(config)
    out["admin"] = {**dict(config.get("admin") or {}), "address": pipe_address(socket_path)}
    static = dict(config.get("static_resources") or {})
    clusters = [
        {**c, "load_assignment": admin_cluster(socket_path)["load_assignment"]}
        if c.get("name") == ADMIN_CLUSTER
        else c
        for c in static.get("clusters", [])
    ]
    if "clusters" in static:
        static["clusters"] = clusters
        out["static_resources"] = static
    return out
