"""Run-time configuration: the records every option of cpx ends up in, and the one place their
defaults are written.

* :class:`Config`: what the core and the plugins see (the xDS server, Envoy's two static
  listeners, the event loop's hold-off, the plugins' own options);
* :class:`ServeOptions`: what only the serving process needs (``cpx serve``), with
  :class:`StatusWritingOptions` for Kubernetes mode's status writing;
* :class:`BootstrapOptions` and :class:`CertgenOptions`: the Envoy side (``cpx bootstrap``,
  ``cpx certgen``, ``cpx run``).

The command line takes every flag's default from these records (:func:`default`), so a default
changed here changes ``--help`` and behaviour alike. Contour's flag names and defaults throughout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

# Where Contour is installed: its leader-election Lease, its Envoy Service, its certificates.
CONTOUR_NAMESPACE = "projectcontour"


@attrs.frozen(kw_only=True)
class Config:
    # xDS server (Contour's defaults and flag names).
    xds_address: str = "127.0.0.1"
    xds_port: int = 8001
    xds_cafile: str | None = None
    xds_cert_file: str | None = None
    xds_key_file: str | None = None
    # Where Envoy listens for the two static listeners.
    http_address: str = "0.0.0.0"
    http_port: int = 8080
    https_address: str = "0.0.0.0"
    https_port: int = 8443
    # Debounce of the event loop (Contour's HoldoffDelay / HoldoffMaxDelay).
    holdoff_delay: float = 0.1
    holdoff_max_delay: float = 0.5
    # Plain-HTTP routes: one RouteConfiguration per exact host through Scoped RDS ("scoped"), or
    # Contour's single RouteConfiguration per listener ("single"); see docs/design/0018.
    route_shape: Literal["scoped", "single"] = "scoped"
    # Plugin-contributed options by their Python name (e.g. "ingress_class_name").
    options: Mapping[str, Any] = attrs.field(factory=dict)

    def option(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name)
        return default if value is None else value


@attrs.frozen(kw_only=True)
class StatusWritingOptions:
    """Kubernetes mode: status writing by the elected leader (:mod:`cpx.status.updater`)."""

    leader_election_resource_name: str = "leader-elect"
    leader_election_resource_namespace: str = CONTOUR_NAMESPACE
    # Seconds (the flags take Go durations too: "15s").
    leader_election_lease_duration: float = 15.0
    leader_election_renew_deadline: float = 10.0
    leader_election_retry_period: float = 2.0
    disable_leader_election: bool = False
    envoy_service_name: str = "envoy"
    envoy_service_namespace: str = CONTOUR_NAMESPACE
    # --ingress-status-address (the core option): when set, the Envoy Service is not watched.
    ingress_status_address: str | None = None
    concurrency: int = 16
    identity: str | None = None  # default: host name + a unique suffix


@attrs.frozen(kw_only=True)
class ServeOptions:
    """What the serving process (:func:`cpx.serving.serve`) needs beyond :class:`Config`."""

    manifests: Sequence[Path] = ()
    # Kubernetes mode (instead of manifests): a kubeconfig file, or the pod's service account.
    kubeconfig: Path | None = None
    incluster: bool = False
    watch_namespaces: Sequence[str] = ()  # empty: every namespace
    on_missing_crd: Literal["skip", "fail"] = "skip"
    status_file: Path | None = None
    health_address: str = "127.0.0.1"
    health_port: int = 8000
    debug_address: str = "127.0.0.1"
    debug_port: int = 6060
    status_writing: StatusWritingOptions = StatusWritingOptions()
    # Run every candidate snapshot through `envoy --mode validate` before publishing it.
    envoy_validate: bool = False
    envoy_binary: Path | None = None  # default: cpx.testing.envoy.envoy_binary()

    @property
    def kubernetes(self) -> bool:
        return self.kubeconfig is not None or self.incluster


@attrs.frozen(kw_only=True)
class BootstrapOptions:
    """``cpx bootstrap``: the Envoy that cpx manages (:mod:`cpx.xds.envoy.bootstrap`)."""

    xds_address: str = Config().xds_address
    xds_port: int = Config().xds_port
    # Envoy's admin interface listens only on this Unix socket (Contour's default).
    admin_address: str = "/admin/admin.sock"
    # The read-only listeners in front of it (0: none).
    admin_port: int = 9001
    stats_address: str = "0.0.0.0"
    stats_port: int = 8002
    node_id: str = "cpx"
    xds_api: Literal["sotw", "delta"] = "sotw"
    namespace: str = CONTOUR_NAMESPACE
    # A cluster's traffic statistics are created at its first request (halves Envoy's time to
    # create 10k clusters; Contour's bootstrap creates them all up front).
    deferred_cluster_stats: bool = True


@attrs.frozen(kw_only=True)
class CertgenOptions:
    """``cpx certgen``: the xDS mTLS certificates (:mod:`cpx.ops.certgen`)."""

    namespace: str = CONTOUR_NAMESPACE
    lifetime_days: int = 365


def default(record: type[Any], name: str) -> Any:
    """The default of one field of an options record (for the command line's flags)."""
    return attrs.fields_dict(record)[name].default
