"""Hypothesis strategies for HTTPProxy objects (``cpx_fuzz_strategies``; needs hypothesis).

Generated from the CRD's own OpenAPI schema (:func:`cpx.testing.strategies.from_schema`), so every
field is reachable and new fields are fuzzed without touching this file; the fields that name
other objects draw from the shared :class:`~cpx.testing.strategies.World`, so that roots,
includes, Services and Secrets meet, and routes, clusters and secrets are really produced.
"""

from __future__ import annotations

from typing import Any

from cpx.testing.strategies import (
    KindStrategy,
    Strategy,
    World,
    from_schema,
    hostile_ints,
    hostile_strings,
    kind_objects,
    mostly,
)
from hypothesis import strategies as st

from cpx_httpproxy import crd
from cpx_httpproxy.kinds import HTTPPROXY

NAMES = ("root", "child", "other")
PREFIXES = ("/", "/a", "/a/", "/b")
ODD_PREFIXES = ("/a?b", "/a\r\nb", "/(", "/" + "x" * 2000, "/a#b", "/%2f")


def _overrides(world: World) -> dict[str, Strategy[Any]]:
    def _often(good: Strategy[Any]) -> Strategy[Any]:
        return world.maybe(good, hostile_strings())

    service_names = _often(st.sampled_from(world.services))
    secrets = _often(st.sampled_from(world.secrets))
    return {
        "spec.virtualhost.fqdn": _often(st.sampled_from(world.hosts)),
        "services[].name": service_names,
        "services[].port": world.maybe(st.sampled_from([p[1] for p in world.ports]), hostile_ints()),
        "secretName": secrets,
        "caSecret": secrets,
        "crlSecret": secrets,
        "includes[].name": st.sampled_from(NAMES),
        "includes[].namespace": st.sampled_from(world.namespaces),
        "include.name": st.sampled_from(NAMES),
        "conditions[].prefix": world.maybe(st.sampled_from(PREFIXES), st.sampled_from(ODD_PREFIXES)),
        "spec.ingressClassName": mostly(st.just("contour"), st.just("other")),
        "status": st.just({}),
    }


def httpproxies(world: World) -> Strategy[dict[str, Any]]:
    spec_schema = crd.OPENAPI_SCHEMA["properties"]["spec"]
    overrides = _overrides(world)
    # Mostly roots with routes (children without a root only ever say so), few optional fields.
    root_schema = {**spec_schema, "required": ["virtualhost", "routes"]}
    spec = mostly(
        from_schema(root_schema, overrides, path="spec", max_fields=2, hostile=world.hostile),
        from_schema(spec_schema, overrides, path="spec", hostile=world.hostile),
        ratio=2,
    )
    return kind_objects(HTTPPROXY, world, NAMES, spec)


STRATEGIES = (KindStrategy(gvk=HTTPPROXY, objects=httpproxies),)
