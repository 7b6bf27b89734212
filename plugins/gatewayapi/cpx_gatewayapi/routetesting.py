"""Test support, never used by the plugin itself: a stand-in for the Gateway side's
``gateways.resolve`` while it returns no Gateways, with the issue's layout
(``<protocol>-<port>-<address>`` on port + 8000, allowedRoutes Same/All/Selector).

Imported by the HTTPRoute tests, and loaded as a plugin module by the real-Envoy test, where its
import installs the stand-in in the ``cpx serve`` process.  Once the real ``resolve`` returns the
Gateways, it is used unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpx import ObjectKey, SourceView
from cpx.dag import DAG, Protocol

from cpx_gatewayapi import gateways
from cpx_gatewayapi.kinds import GATEWAY, GATEWAY_CLASS
from cpx_gatewayapi.model import GatewayListener, Resolution, ResolvedGateway
from cpx_gatewayapi.settings import Settings

REAL_RESOLVE = gateways.resolve


def resolve(dag: DAG, source: SourceView, settings: Settings) -> Resolution:
    resolution = REAL_RESOLVE(dag, source, settings)
    return resolution if resolution.gateways else _fake_resolve(dag, source, settings)


def _fake_resolve(dag: DAG, source: SourceView, settings: Settings) -> Resolution:
    classes = {
        c["metadata"]["name"]
        for c in source.list(GATEWAY_CLASS)
        if c.get("spec", {}).get("controllerName") == settings.controller_name
    }
    found = {}
    for gw in source.list(GATEWAY):
        if gw["spec"].get("gatewayClassName") not in classes:
            continue
        key = ObjectKey.of(gw)
        address = (gw["spec"].get("addresses") or [{}])[0].get("value", settings.default_address)
        listeners = tuple(_listener(dag, source, key, address, spec) for spec in gw["spec"]["listeners"])
        found[key] = ResolvedGateway(
            key=key, generation=1, controller_name=settings.controller_name, listeners=listeners
        )
    return Resolution(found)


def _listener(
    dag: DAG, source: SourceView, key: ObjectKey, address: str, spec: Mapping[str, Any]
) -> GatewayListener:
    protocol = spec["protocol"]
    name = f"{protocol.lower()}-{spec['port']}-{address.replace('.', '_')}"
    dag.ensure_listener(name, Protocol[protocol], address, spec["port"] + 8000)
    secret = None
    if protocol == "HTTPS":
        ref = spec["tls"]["certificateRefs"][0]
        secret = source.lookup_tls_secret(key.namespace, ref["name"], key)
    allowed = spec.get("allowedRoutes") or {}
    kinds = frozenset(k["kind"] for k in allowed.get("kinds") or ()) or frozenset({"HTTPRoute", "GRPCRoute"})
    namespaces = allowed.get("namespaces") or {}

    def admits(namespace: str, labels: Mapping[str, str]) -> bool:
        origin = namespaces.get("from", "Same")
        if origin == "All":
            return True
        if origin == "Selector":
            wanted = namespaces["selector"].get("matchLabels") or {}
            return all(labels.get(k) == v for k, v in wanted.items())
        return namespace == key.namespace

    return GatewayListener(
        gateway=key,
        name=spec["name"],
        port=spec["port"],
        protocol=protocol,
        hostname=spec.get("hostname"),
        tls_mode="Terminate" if protocol == "HTTPS" else None,
        kinds=kinds,
        admits_namespace=admits,
        dag_listener=name,
        address=address,
        envoy_port=spec["port"] + 8000,
        secret=secret,
    )


def install() -> None:
    gateways.resolve = resolve
