"""Prometheus metrics, with Contour's names where Contour has one (dashboards keep working)."""

from __future__ import annotations

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
            "cpx_xds_nacks", "xDS responses rejected by Envoy (NACK)", ["type_url"], registry=r
        )
        self.status_update_total = Counter(
            "contour_status_update", "Status updates computed", ["kind"], registry=r
        )
        from cpx import __version__  # noqa: PLC0415 (avoid an import cycle at module load)

        self.build_info.labels(version=__version__, implementation="cpx").set(1)
