"""Load-balancer status from the flag: ``--ingress-status-address``, shared by every kind that reports it.

Contour writes the Envoy Service's load-balancer address (or this flag, which then wins) into
Ingress and HTTPProxy status alike, so the core owns the option and its parsing.  Where the address
comes from decides the path:

* the flag (here): the plugins' processors put :func:`load_balancer_status` in the computed status;
* the Envoy Service (:mod:`cpx.status.loadbalancer_watch`): watched in Kubernetes mode, and put
  into each computed status by the status updater, for the kinds whose
  ``StatusWriterSpec.load_balancer`` turns the Service's core/v1 LoadBalancerStatus into their own
  status shape (the plugins own those shapes, and which of their objects get it).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any

from cpx.records import OptionSpec

STATUS_ADDRESS_OPTION = OptionSpec(
    name="ingress_status_address",
    help="Address(es) to write to status.loadBalancer of Ingress and HTTPProxy objects "
    "(IP or host name, comma-separated).",
    config_key="ingress-status-address",
)

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
    """The ``status`` every accepted object gets, or None when no address is configured."""
    entries = parse_status_addresses(value)
    if not entries:
        return None
    return {"loadBalancer": {"ingress": entries}}
