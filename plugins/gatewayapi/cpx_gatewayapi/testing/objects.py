"""The GatewayClass and Gateways tests serve, built in one place (the harness contract: class
``contour`` of controller ``projectcontour.io/gateway-controller``, each Gateway on its own
loopback address in ``spec.addresses[0]``).

**Example**::

    text = gateway_yaml("127.0.0.77") + '''
    ---
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    ...'''
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from cpx_gatewayapi.kinds import GROUP
from cpx_gatewayapi.testing.base import CONTROLLER_NAME, GATEWAY_CLASS_NAME

API_VERSION = f"{GROUP}/v1"
HTTP_LISTENER: Mapping[str, Any] = {"name": "http", "port": 80, "protocol": "HTTP"}


def gateway_class(generation: int | None = None) -> dict[str, Any]:
    """The GatewayClass ``contour`` of cpx's default controller name."""
    meta: dict[str, Any] = {"name": GATEWAY_CLASS_NAME}
    if generation is not None:
        meta["generation"] = generation
    return {
        "apiVersion": API_VERSION,
        "kind": "GatewayClass",
        "metadata": meta,
        "spec": {"controllerName": CONTROLLER_NAME},
    }


def gateway(
    address: str | None,
    listeners: Sequence[Mapping[str, Any]] = (HTTP_LISTENER,),
    *,
    name: str = "gw",
    namespace: str = "default",
    generation: int | None = None,
) -> dict[str, Any]:
    """A Gateway of class ``contour`` on ``address`` (None: cpx's default address)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if generation is not None:
        meta["generation"] = generation
    spec: dict[str, Any] = {"gatewayClassName": GATEWAY_CLASS_NAME}
    if address is not None:
        spec["addresses"] = [{"type": "IPAddress", "value": address}]
    spec["listeners"] = [dict(listener) for listener in listeners]
    return {"apiVersion": API_VERSION, "kind": "Gateway", "metadata": meta, "spec": spec}


def gateway_yaml(
    address: str | None, listeners: Sequence[Mapping[str, Any]] = (HTTP_LISTENER,), **kw: Any
) -> str:
    """The GatewayClass and one :func:`gateway` as YAML documents, to put before a test's routes."""
    return yaml.safe_dump_all([gateway_class(), gateway(address, listeners, **kw)], sort_keys=False)
