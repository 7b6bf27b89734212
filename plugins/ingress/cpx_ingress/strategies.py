"""Hypothesis strategies for Ingress objects (``cpx_fuzz_strategies``; needs hypothesis).

Mostly valid Ingresses over the shared :class:`~cpx.testing.strategies.World` (its Services,
ports, Secrets and hosts), with hostile but schema-valid paths, hosts and annotation values.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import cpx_ingress.annotations as ann
from cpx.testing.strategies import (
    KindStrategy,
    Strategy,
    World,
    hostile_ints,
    hostile_strings,
    kind_objects,
    mostly,
)
from cpx_ingress.kinds import INGRESS
from cpx_ingress.schema import PATH_TYPES

PATHS = ("/", "/a", "/a/", "/b/c")
# Schema-valid, yet each needs care on the way to Envoy.
ODD_PATHS = ("/a?b", "/a#b", "/a b", "/%41", "/a\r\nb", "/" + "p" * 2000, "/é", "/(", "", "/a\x00")
DURATIONS = ("10s", "1m30s", "infinity", "0s", "-1s", "99999999999h", "1.5h", "abc", "")
ANNOTATION_VALUES: dict[str, tuple[str, ...]] = {
    ann.RESPONSE_TIMEOUT: DURATIONS,
    ann.REQUEST_TIMEOUT: DURATIONS,
    ann.PER_TRY_TIMEOUT: DURATIONS,
    ann.RETRY_ON: ("5xx", "gateway-error,reset", "retriable-status-codes", "nope", ""),
    ann.NUM_RETRIES: ("3", "0", "-1", "99999999999", "x"),
    ann.TLS_MIN_VERSION: ("1.2", "1.3", "1.1", "x"),
    ann.TLS_MAX_VERSION: ("1.2", "1.3", "1.0"),
    ann.TLS_CERT_NAMESPACE: ("default", "team-a", "x"),
    ann.WEBSOCKET_ROUTES: ("/", "/ws, /a", "/a?b", ""),
    ann.FORCE_SSL_REDIRECT: ("true", "false", "yes"),
    ann.ALLOW_HTTP: ("false", "true"),
    "projectcontour.io/ingress.class": ("contour", "other"),
}


def _annotations(world: World) -> Strategy[dict[str, str]]:
    def value(key: str) -> Strategy[str]:
        return world.maybe(st.sampled_from(ANNOTATION_VALUES[key]), hostile_strings())

    keys = st.lists(st.sampled_from(sorted(ANNOTATION_VALUES)), max_size=3, unique=True)
    return keys.flatmap(lambda ks: st.fixed_dictionaries({k: value(k) for k in ks}))


def _backend(world: World) -> Strategy[dict[str, Any]]:
    port = world.maybe(
        st.one_of(
            st.sampled_from(world.ports).map(lambda p: {"number": p[1]}),
            st.sampled_from(world.ports).map(lambda p: {"name": p[0]}),
        ),
        hostile_ints().map(lambda n: {"number": n}),
    )
    name = world.maybe(st.sampled_from(world.services), hostile_strings())
    return st.fixed_dictionaries({"service": st.fixed_dictionaries({"name": name, "port": port})})


def _rule(world: World) -> Strategy[dict[str, Any]]:
    path = st.fixed_dictionaries(
        {
            "path": world.maybe(
                st.sampled_from(PATHS), st.one_of(st.sampled_from(ODD_PATHS), hostile_strings())
            ),
            "pathType": st.sampled_from(PATH_TYPES),
            "backend": _backend(world),
        }
    )
    host = world.maybe(st.sampled_from(world.hosts), hostile_strings())
    http = st.fixed_dictionaries({"paths": st.lists(path, min_size=1, max_size=3)})
    return mostly(st.fixed_dictionaries({"http": http, "host": host}), st.fixed_dictionaries({"http": http}))


def ingresses(world: World) -> Strategy[dict[str, Any]]:
    tls = st.fixed_dictionaries(
        {
            "hosts": st.lists(st.sampled_from(world.hosts), min_size=1, max_size=2),
            "secretName": mostly(st.just(world.secrets[0]), st.sampled_from(world.secrets)),
        }
    )
    spec = st.fixed_dictionaries(
        {
            "rules": st.lists(_rule(world), min_size=1, max_size=3),
            "tls": mostly(st.lists(tls, min_size=1, max_size=2), st.just([]), ratio=1),
        },
        optional={
            "defaultBackend": _backend(world),
            "ingressClassName": mostly(st.just("contour"), st.just("other")),
        },
    )
    names = ("web", "api", "admin")
    return kind_objects(INGRESS, world, names, spec, optional_meta={"annotations": _annotations(world)})


STRATEGIES = (KindStrategy(gvk=INGRESS, objects=ingresses),)
