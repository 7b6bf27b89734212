"""Hypothesis strategies for the Gateway API kinds (``cpx_fuzz_strategies``; needs hypothesis).

Generated from the upstream CRDs' own OpenAPI schemas (the files ``deploy/`` ships, beside this
package in the source tree), so every field is reachable; the fields that name other objects draw
from the shared :class:`~cpx.testing.strategies.World` and a few fixed names, so that classes,
Gateways, routes, Services, Secrets and grants meet and really produce listeners and routes.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import attrs
import yaml
from cpx import GroupVersionKind
from cpx.testing import default_ca
from cpx.testing.strategies import (
    KindStrategy,
    Strategy,
    World,
    from_schema,
    hostile_ints,
    hostile_strings,
    kind_objects,
    mostly,
    namespaces_of,
)
from hypothesis import strategies as st

from cpx_gatewayapi.kinds import (
    BACKEND_TLS_POLICY,
    CONFIG_MAP,
    DEFAULT_CONTROLLER_NAME,
    GATEWAY,
    GATEWAY_CLASS,
    GRPCROUTE,
    HTTPROUTE,
    REFERENCE_GRANT,
    TCPROUTE,
    TLSROUTE,
)

CRDS = Path(__file__).resolve().parent.parent / "crd"
GATEWAYS = ("gw", "other")
CLASSES = ("contour", "elsewhere")
ADDRESSES = ("127.0.0.2", "127.0.0.3", "::1", "not-an-ip")
LISTENERS = ("http", "https", "tls", "tcp")
PROTOCOLS = ("HTTP", "HTTPS", "TLS", "TCP")
PORTS = (80, 443, 8443)
# Fields left out, the generated objects would mostly attach nowhere: routes name parents and have
# rules, Gateways have addresses (their own loopback address, as the conformance harness gives).
REQUIRED = {"parentRefs", "rules", "addresses", "hostnames"}
PATHS = ("/", "/a", "/a/", "/b")
ODD_PATHS = ("/a?b", "/a\r\nb", "/(", "/" + "x" * 2000, "/a#b", "/%2f")


@functools.cache
def _spec_schema(kind: str, version: str) -> Any:
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            versions = {v["name"]: v for v in crd["spec"]["versions"]}
            return versions[version]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    raise FileNotFoundError(f"no CRD for {kind} under {CRDS} (the source tree's crd/ folder)")


def _overrides(world: World) -> dict[str, Strategy[Any]]:
    def often(good: Strategy[Any]) -> Strategy[Any]:
        return world.maybe(good, hostile_strings())

    hosts = often(st.sampled_from(world.hosts))
    return {
        "spec.controllerName": mostly(st.just(DEFAULT_CONTROLLER_NAME), st.just("example.com/other")),
        "spec.gatewayClassName": st.sampled_from(CLASSES),
        "parentRefs[].name": st.sampled_from(GATEWAYS),
        "parentRefs[].namespace": st.sampled_from(world.namespaces),
        # A Service reference without a port is refused by the schema: mostly give one.
        "backendRefs[]": world.maybe(
            st.fixed_dictionaries(
                {
                    "name": st.sampled_from(world.services),
                    "port": st.sampled_from([p[1] for p in world.ports]),
                },
                optional={"weight": st.integers(0, 3), "kind": st.sampled_from(("Service", "Other"))},
            ),
            st.fixed_dictionaries({"name": hostile_strings(), "port": hostile_ints()}),
        ),
        "targetRefs[].name": often(st.sampled_from(world.services)),
        "certificateRefs[].name": often(st.sampled_from(world.secrets)),
        "caCertificateRefs[].name": often(st.sampled_from(world.secrets)),
        "addresses[].value": st.sampled_from(ADDRESSES),
        "addresses[].type": mostly(st.just("IPAddress"), st.just("Hostname")),
        "listeners[].name": st.sampled_from(LISTENERS),
        "listeners[].protocol": world.maybe(st.sampled_from(PROTOCOLS), hostile_strings()),
        "listeners[].port": world.maybe(st.sampled_from(PORTS), hostile_ints()),
        "parentRefs[].sectionName": st.sampled_from(LISTENERS),
        "parentRefs[].port": st.sampled_from(PORTS),
        "listeners[].hostname": hosts,
        "spec.hostnames[]": hosts,
        "validation.hostname": hosts,
        "path.value": world.maybe(st.sampled_from(PATHS), st.sampled_from(ODD_PATHS)),
        "status": st.just({}),
    }


def _kind(gvk: GroupVersionKind, names: tuple[str, ...], *, max_fields: int = 3) -> KindStrategy:
    def objects(world: World) -> Strategy[dict[str, Any]]:
        schema = _spec_schema(gvk.kind, gvk.version)
        required = sorted({*schema.get("required", ()), *(REQUIRED & set(schema["properties"]))})
        spec = from_schema(
            {**schema, "required": required},
            _overrides(world),
            path="spec",
            max_fields=max_fields,
            hostile=world.hostile,
        )
        return kind_objects(gvk, world, names, spec)

    return KindStrategy(gvk=gvk, objects=objects)


def config_maps(world: World) -> Strategy[dict[str, Any]]:
    """CA bundles (``ca.crt``) named like the world's Secrets: the test CA, or not a certificate."""
    ca = st.just(0).map(lambda _: default_ca().cert_pem.decode())
    data = world.maybe(
        st.fixed_dictionaries({"ca.crt": ca}), st.fixed_dictionaries({"ca.crt": hostile_strings()})
    )
    meta = st.fixed_dictionaries({"name": st.sampled_from(world.secrets), "namespace": namespaces_of(world)})
    return st.fixed_dictionaries(
        {"apiVersion": st.just("v1"), "kind": st.just("ConfigMap"), "metadata": meta, "data": data}
    )


def gateway_environment(world: World) -> list[dict[str, Any]]:
    """Our GatewayClass and a Gateway with an HTTP, an HTTPS (the world's TLS Secret), a TLS and a
    TCP listener, admitting routes of every namespace: what the generated routes attach to."""
    group = GATEWAY_CLASS.group
    tls = {"certificateRefs": [{"name": world.secrets[0]}]}
    listeners = [
        {"name": "http", "port": 80, "protocol": "HTTP"},
        {"name": "https", "port": 443, "protocol": "HTTPS", "tls": tls},
        {"name": "tls", "port": 8443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
        {"name": "tcp", "port": 9000, "protocol": "TCP"},
    ]
    for listener in listeners:
        listener["allowedRoutes"] = {"namespaces": {"from": "All"}}
    gateway_spec = {
        "gatewayClassName": CLASSES[0],
        "addresses": [{"type": "IPAddress", "value": ADDRESSES[0]}],
        "listeners": listeners,
    }
    return [
        {
            "apiVersion": f"{group}/v1",
            "kind": "GatewayClass",
            "metadata": {"name": CLASSES[0]},
            "spec": {"controllerName": DEFAULT_CONTROLLER_NAME},
        },
        {
            "apiVersion": f"{group}/v1",
            "kind": "Gateway",
            "metadata": {"name": GATEWAYS[0], "namespace": world.namespaces[0]},
            "spec": gateway_spec,
        },
    ]


STRATEGIES = (
    attrs.evolve(_kind(GATEWAY_CLASS, CLASSES), environment=gateway_environment),
    _kind(GATEWAY, GATEWAYS),
    _kind(HTTPROUTE, ("web", "api")),
    _kind(GRPCROUTE, ("rpc",)),
    _kind(TLSROUTE, ("tls",)),
    _kind(TCPROUTE, ("tcp",)),
    _kind(REFERENCE_GRANT, ("grant",)),
    _kind(BACKEND_TLS_POLICY, ("policy",)),
    KindStrategy(gvk=CONFIG_MAP, objects=config_maps),
)
