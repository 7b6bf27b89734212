"""Ingress status: ``status.loadBalancer`` from ``--ingress-status-address`` (no conditions).

Contour's loadBalancerStatusWriter uses either that flag or the Envoy Service's own load-balancer
status; cpx supports the flag.  Problems found while building go to the DAG's notes, not here.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any

# A DNS name, loosely: what a load balancer hostname can look like.
_HOSTNAME = re.compile(r"(?i)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\.?")


def parse_status_addresses(value: str | Iterable[str] | None) -> list[dict[str, str]]:
    """``status.loadBalancer.ingress`` entries: an IP address → ``ip``, anything else → ``hostname``.

    Values are comma-separated (Contour's parseStatusFlag); raises ValueError for an entry that is
    neither an IP address nor a host name.
    """
    if value is None:
        return []
    values = [value] if isinstance(value, str) else list(value)
    entries: list[dict[str, str]] = []
    for item in (part.strip() for v in values for part in str(v).split(",")):
        if not item:
            continue
        try:
            ipaddress.ip_address(item)
        except ValueError:
            if not _HOSTNAME.fullmatch(item) or len(item) > 253:
                raise ValueError(f"{item!r} is neither an IP address nor a host name") from None
            entries.append({"hostname": item})
        else:
            entries.append({"ip": item})
    return entries


def load_balancer_status(value: str | Iterable[str] | None) -> dict[str, Any] | None:
    """The ``status`` every accepted Ingress gets, or None when no address is configured."""
    entries = parse_status_addresses(value)
    if not entries:
        return None
    return {"loadBalancer": {"ingress": entries}}


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
