"""Hypothesis strategies for ExtensionServices (``cpx_fuzz_strategies``; needs hypothesis).

Generated from the CRD's schema (:func:`cpx.testing.strategies.from_schema`); the Services and CA
Secrets they name come from the shared :class:`~cpx.testing.strategies.World`, so clusters are
really produced.  Few names, so that HTTPProxies' authorization references meet them.
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
)
from hypothesis import strategies as st

from cpx_extsvc import schema
from cpx_extsvc.kinds import EXTENSION_SERVICE

NAMES = ("auth", "ratelimit")


def extension_services(world: World) -> Strategy[dict[str, Any]]:
    overrides: dict[str, Strategy[Any]] = {
        "services[].name": world.maybe(st.sampled_from(world.services), hostile_strings()),
        "services[].port": world.maybe(st.sampled_from([p[1] for p in world.ports]), hostile_ints()),
        "caSecret": world.maybe(st.sampled_from(world.secrets), hostile_strings()),
        "protocol": st.sampled_from(("h2", "h2c", "http/1.1")),
        "status": st.just({}),
    }
    spec = from_schema(schema.SPEC_SCHEMA, overrides, path="spec", hostile=world.hostile)
    return kind_objects(EXTENSION_SERVICE, world, NAMES, spec)


STRATEGIES = (KindStrategy(gvk=EXTENSION_SERVICE, objects=extension_services),)
