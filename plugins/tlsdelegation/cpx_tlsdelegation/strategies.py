"""Hypothesis strategies for TLSCertificateDelegations (``cpx_fuzz_strategies``; needs hypothesis).

Generated from the CRD's schema; Secret names and target namespaces draw from the shared
:class:`~cpx.testing.strategies.World`, so that delegations meet the HTTPProxies and Ingresses
that reference those Secrets across namespaces.
"""

from __future__ import annotations

from typing import Any

from cpx.testing.strategies import KindStrategy, Strategy, World, from_schema, hostile_strings, kind_objects
from hypothesis import strategies as st

from cpx_tlsdelegation import crd
from cpx_tlsdelegation.kinds import TLS_CERTIFICATE_DELEGATION


def delegations(world: World) -> Strategy[dict[str, Any]]:
    targets = st.sampled_from((*world.namespaces, "*"))
    overrides: dict[str, Strategy[Any]] = {
        "secretName": world.maybe(st.sampled_from(world.secrets), hostile_strings()),
        "targetNamespaces": st.lists(world.maybe(targets, hostile_strings()), max_size=3),
    }
    spec = from_schema(
        crd.OPENAPI_SCHEMA["properties"]["spec"], overrides, path="spec", hostile=world.hostile
    )
    return kind_objects(TLS_CERTIFICATE_DELEGATION, world, ("certs", "wildcard"), spec)


STRATEGIES = (KindStrategy(gvk=TLS_CERTIFICATE_DELEGATION, objects=delegations),)
