"""Ingress status: ``status.loadBalancer`` from ``--ingress-status-address`` (no conditions).

Contour's loadBalancerStatusWriter uses either that flag or the Envoy Service's own load-balancer
status; so does cpx: the flag's address is computed here, the Service's is overlaid by the core's
status updater in Kubernetes mode (``StatusWriterSpec.load_balancer``).  Problems found while
building go to the DAG's notes, not here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from cpx import load_balancer_status, parse_status_addresses

__all__ = [
    "computed_status",
    "envoy_load_balancer",
    "load_balancer_status",
    "merge_status",
    "parse_status_addresses",
]


def computed_status(template: Mapping[str, Any]) -> dict[str, Any]:
    """A private copy per Ingress, so that a status writer may mutate it safely."""
    return copy.deepcopy(dict(template))


def merge_status(current: Mapping[str, Any], computed: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """StatusWriterSpec.merge: write ``loadBalancer`` only when this build computed one.

    With no status address configured cpx computes nothing, and whatever another writer put in
    ``status.loadBalancer`` is left alone; an unchanged status is not written again.
    """
    if not computed:
        return None
    merged = {**current, **computed}
    return None if merged == dict(current) else merged


def envoy_load_balancer(service_lb: Mapping[str, Any], computed: Mapping[str, Any]) -> dict[str, Any]:
    """StatusWriterSpec.load_balancer: the Envoy Service's core/v1 LoadBalancerStatus as a
    networking/v1 IngressLoadBalancerStatus, i.e. without the fields only core/v1 has (``ipMode``),
    as Contour's coreToNetworkingLBStatus, in every Ingress's status."""
    entries = []
    for entry in service_lb.get("ingress") or ():
        if not isinstance(entry, Mapping):
            continue
        out = {k: copy.deepcopy(entry[k]) for k in ("ip", "hostname", "ports") if k in entry}
        entries.append(out)
    return {**computed, "loadBalancer": {"ingress": entries} if entries else {}}
