"""Prometheus metrics, with Contour's names where Contour has one (dashboards keep working)."""

from __future__ import annotations

import importlib.metadata

import attrs
from prometheus_client import CollectorRegistry, Counter, Gauge, Summary


@attrs.define(eq=False, slots=False)  # metric objects are attached in __attrs_post_init__
class Metrics:
    registry: CollectorRegistry = attrs.field(factory=CollectorRegistry)

    def __attrs_post_init__(self) -> None:
        r = self.registry
        self.build_info = Gauge(
            "contour_build_info", "Build information", ["version", "implementation"], registry=r
        )
        self.dagrebuild_total = Counter(
            "contour_dagrebuild", "Total number of times DAG has been rebuilt", registry=r
        )
        self.dagrebuild_timestamp = Gauge(
            "contour_dagrebuild_timestamp", "Timestamp of the last DAG rebuild", registry=r
        )
        self.dagrebuild_seconds = Summary(
            "contour_dagrebuild_seconds", "Duration of DAG rebuilds", registry=r
        )
        self.dag_cache_object = Gauge(
            "contour_dag_cache_object", "Objects in the source cache", ["kind"], registry=r
        )
        self.eventhandler_operation = Counter(
            "contour_eventhandler_operation", "Object events handled", ["op", "kind"], registry=r
        )
        self.xds_connections = Gauge("cpx_xds_connections", "Open xDS streams", registry=r)
        self.xds_requests = Counter("cpx_xds_requests", "xDS requests received", ["type_url"], registry=r)
        self.xds_responses = Counter("cpx_xds_responses", "xDS responses sent", ["type_url"], registry=r)
        self.xds_nacks = Counter(
            "cpx_xds_nacks", "xDS requests carrying an error (NACK)", ["type_url"], registry=r
        )
        self.xds_rejects = Counter(
            "cpx_xds_rejects", "xDS responses rejected by Envoy, once per response", ["type"], registry=r
        )
        # Status writing (Kubernetes mode, leader only; standalone mode counts computed changes
        # in status_update_total): noop is a subset of success, as in Contour.
        self.status_update_total = Counter(
            "contour_status_update", "Total number of status updates by object kind", ["kind"], registry=r
        )
        self.status_update_success = Counter(
            "contour_status_update_success",
            "Number of status updates that succeeded by object kind",
            ["kind"],
            registry=r,
        )
        self.status_update_failed = Counter(
            "contour_status_update_failed",
            "Number of status updates that failed by object kind",
            ["kind"],
            registry=r,
        )
        self.status_update_conflict = Counter(
            "contour_status_update_conflict",
            "Number of status update conflicts encountered by object kind",
            ["kind"],
            registry=r,
        )
        self.status_update_noop = Counter(
            "contour_status_update_noop",
            "Number of status updates that are no-ops by object kind",
            ["kind"],
            registry=r,
        )
        self.status_update_duration = Summary(
            "contour_status_update_duration_seconds",
            "How long a status update takes to finish",
            ["kind", "error"],
            registry=r,
        )
        # client-go's leader election gauge (controller-runtime exposes it for Contour).
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the leader-election Lease",
            ["name"],
            registry=r,
        )
        # Tenant safety: builds that failed outright, and objects left out of the configuration.
        self.dag_build_failed = Gauge(
            "cpx_dag_build_failed",
            "1 while the latest DAG build failed (the last good one is served)",
            registry=r,
        )
        self.dag_build_failures = Counter(
            "cpx_dag_build_failures", "DAG builds that failed outright", registry=r
        )
        self.quarantined_objects = Gauge(
            "cpx_quarantined_objects", "Objects left out because translating them broke something", registry=r
        )
        # The installed distribution's version (the same string as cpx.__version__): importing the
        # facade from here would make this low layer depend on everything the facade re-exports.
        self.build_info.labels(version=importlib.metadata.version("cpx"), implementation="cpx").set(1)
