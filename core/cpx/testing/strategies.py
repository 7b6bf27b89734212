"""Hypothesis strategies for fuzzing cpx with Kubernetes objects (needs ``cpx[testing]``: hypothesis).

Two families, for every kind the enabled plugins declare:

* **schema-plausible objects**: mostly valid, and referring to each other through one shared
  :class:`World` (the same namespaces, Service names and ports, Secret names and hosts), so that
  translation really produces routes, clusters, endpoints and secrets; their leaves are often
  hostile but schema-valid (CR/LF, long strings, unicode, odd regexes, bad IPs, huge ints);
* **type-confused mutations** (:func:`type_confused`): any node of such an object replaced by a
  value of another JSON type, a value nested hundreds of levels deep or a huge list.

:func:`kind_strategies` adds the core's own for Service, EndpointSlice, Secret and Namespace; a plugin
contributes :class:`KindStrategy` records for its own kinds through the ``cpx_fuzz_strategies``
hook (imported lazily there, so hypothesis is only needed when fuzzing).  :func:`from_schema`
turns an OpenAPI schema (e.g. a CRD's) into a strategy, with overrides for the fields that
should refer to the world.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
from hypothesis import strategies as st

from cpx import objects as k8s
from cpx.objects import GroupVersionKind, KubeObject

Strategy = st.SearchStrategy


@attrs.frozen(kw_only=True)
class World:
    """The names generated objects share, so that they refer to each other."""

    namespaces: tuple[str, ...] = ("default", "team-a")
    services: tuple[str, ...] = ("echo", "api")
    # Service port name -> number; endpoints listen on number + 8000.
    ports: tuple[tuple[str, int], ...] = (("http", 80), ("https", 443), ("grpc", 8080))
    secrets: tuple[str, ...] = ("tls", "ca", "weak")
    hosts: tuple[str, ...] = ("a.example.com", "b.example.com", "*.wild.example.com")
    # Whether leaves are sometimes hostile (CR/LF, huge ints, bad IPs, ...) rather than all valid.
    hostile: bool = True

    def maybe(self, good: Strategy[Any], bad: Strategy[Any]) -> Strategy[Any]:
        """``good``, or in a hostile world now and then ``bad``."""
        return mostly(good, bad) if self.hostile else good


@attrs.frozen(kw_only=True)
class KindStrategy:
    """How to generate valid-looking objects of one kind (a ``cpx_fuzz_strategies`` record)."""

    gvk: GroupVersionKind
    objects: Callable[[World], Strategy[KubeObject]]
    # Valid objects the kind's generated ones mostly need beside them (e.g. the Gateway routes
    # attach to), added to :func:`environment` by :func:`object_sets`: random draws of several
    # kinds would rarely meet.
    environment: Callable[[World], list[KubeObject]] | None = None


# -- leaves: hostile but plausible values -------------------------------------------------------

HOSTILE_STRINGS = (
    "",
    " ",
    "a\r\nx-injected: 1",
    "\n",
    "\x00",
    "\x7f",
    "/a?b",
    "/a#b",
    "//",
    "/../x",
    "%2f",
    "*",
    "(",
    "[",
    "a{1000000}",
    "(a+)+$",
    "\\",
    '"',
    "é🙂",
    "\u202e",
    "999.1.1.1",
    "::1",
    "127.0.0.1",
    "localhost",
    "0",
    "-1",
    "1e400",
    "infinity",
    "1h",
    "99999999999h",
    "Host",
    ":authority",
    "x" * 300,
    "a" * 5000,
    "b" * 20000,
)
HOSTILE_INTS = (0, -1, 1, 65535, 65536, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63), 10**30)


def hostile_strings() -> Strategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE_STRINGS),
        st.text(max_size=12),
        st.from_regex(r"[a-z][-a-z0-9]{0,10}", fullmatch=True),
    )


def mostly(good: Strategy[Any], bad: Strategy[Any], ratio: int = 4) -> Strategy[Any]:
    """``good`` about ``ratio`` times out of ``ratio + 1``, else ``bad`` (shrinks towards good)."""
    # sampled_from draws about uniformly; one_of would not honour repeated branches as weights.
    return st.sampled_from(range(ratio + 1)).flatmap(lambda i: bad if i == ratio else good)


def hostile_ints() -> Strategy[int]:
    return st.one_of(st.sampled_from(HOSTILE_INTS), st.integers(-10, 70000))


def json_values(max_leaves: int = 8) -> Strategy[Any]:
    """Any value a YAML manifest can hold: JSON plus YAML's dates and binary."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        hostile_ints(),
        st.floats(allow_nan=True, allow_infinity=True),
        hostile_strings(),
        st.dates(),
        st.datetimes(timezones=st.just(dt.UTC)),
        st.binary(max_size=8),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.one_of(st.text(max_size=5), hostile_ints()), inner, max_size=3),
        ),
        max_leaves=max_leaves,
    )


def deeply_nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def confusing_values() -> Strategy[Any]:
    """A replacement for any node: another JSON type, deep nesting, huge lists and strings."""
    return st.one_of(
        json_values(),
        st.integers(2, 990).map(deeply_nested),
        st.sampled_from((1_000, 20_000)).map(lambda n: list(range(n))),
        st.sampled_from((1_000, 20_000)).map(lambda n: [{"a": i} for i in range(n // 10)]),
        st.just("y" * 300_000),
        st.just(10**5000),
    )


# -- mutations ----------------------------------------------------------------------------------

# Identity fields: a manifest without them never reaches the pipeline (the file loader refuses it).
_IDENTITY = {("apiVersion",), ("kind",), ("metadata",), ("metadata", "name"), ("metadata", "namespace")}


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """(path, container, key) of every node under ``value``, not deep inside earlier mutations."""
    if len(path) > 12 or (isinstance(value, list) and len(value) > 50):
        return
    items: Any = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    )
    for key, item in items:
        here = (*path, key)
        if here not in _IDENTITY:
            yield here, value, key
        yield from _nodes(item, here)


@st.composite
def type_confused(draw: st.DrawFn, objects: Strategy[KubeObject], max_mutations: int = 3) -> KubeObject:
    """An object of ``objects`` with 1 to ``max_mutations`` nodes replaced by confusing values."""
    obj = copy.deepcopy(draw(objects))
    for _ in range(draw(st.integers(1, max_mutations))):
        nodes = list(_nodes(obj))
        if not nodes:
            break
        _path, container, key = draw(st.sampled_from(nodes))
        container[key] = draw(confusing_values())
    return obj


# -- OpenAPI schemas ----------------------------------------------------------------------------

Overrides = Mapping[str, Strategy[Any]]


def _override(path: str, overrides: Overrides) -> Strategy[Any] | None:
    for suffix, strategy in overrides.items():
        if path == suffix or path.endswith(f".{suffix}"):
            return strategy
    return None


@functools.cache
def _pattern_strategy(pattern: str) -> Strategy[str] | None:
    try:
        re.compile(pattern)
    except re.error:
        return None
    return st.from_regex(pattern, fullmatch=True)


def _string(schema: Mapping[str, Any], hostile: bool) -> Strategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    pattern = schema.get("pattern")
    matching = _pattern_strategy(pattern) if pattern else None
    plain = st.from_regex(r"[a-z][-a-z0-9]{0,10}", fullmatch=True)
    good = matching.filter(lambda s: len(s) < 300) if matching is not None else plain
    return mostly(good, hostile_strings()) if hostile else good


def _integer(schema: Mapping[str, Any], hostile: bool) -> Strategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    low, high = schema.get("minimum"), schema.get("maximum")
    good = st.integers(min_value=low, max_value=high)
    return mostly(good, hostile_ints()) if hostile else good


def from_schema(  # noqa: PLR0911  (why: one return per JSON-schema type)
    schema: Mapping[str, Any],
    overrides: Overrides = MappingProxyType({}),
    *,
    path: str = "",
    max_fields: int = 4,
    max_items: int = 2,
    hostile: bool = True,
) -> Strategy[Any]:
    """Values for an OpenAPI (structural) schema: required fields plus up to ``max_fields``
    optional ones per object, up to ``max_items`` list items; ``overrides`` maps a field path or
    path suffix (``services[].name``, ``fqdn``) to the strategy to use there; ``hostile``: leaves
    are now and then hostile (then some objects are refused by the schema check)."""
    override = _override(path, overrides)
    if override is not None:
        return override

    def inner(sub: Mapping[str, Any], where: str) -> Strategy[Any]:
        return from_schema(
            sub, overrides, path=where, max_fields=max_fields, max_items=max_items, hostile=hostile
        )

    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return st.one_of(_integer(schema, hostile), _string(schema, hostile))
    if kind == "string":
        return _string(schema, hostile)
    if kind == "integer":
        return _integer(schema, hostile)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        low = schema.get("minItems") or 0
        return st.lists(
            inner(schema.get("items", {}), f"{path}[]"), min_size=low, max_size=max(low, max_items)
        )
    properties: Mapping[str, Any] = schema.get("properties", {})
    if kind == "object" and not properties:
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            keys = st.from_regex(r"[a-z][-a-z0-9]{0,8}", fullmatch=True)
            return st.dictionaries(keys, inner(additional, f"{path}{{}}"), max_size=2)
        return st.just({})
    fields = {name: inner(sub, f"{path}.{name}" if path else name) for name, sub in properties.items()}
    required = [name for name in schema.get("required", ()) if name in fields]
    optional = sorted(set(fields) - set(required))
    return _objects(fields, required, optional, max_fields)


@st.composite
def _objects(
    draw: st.DrawFn,
    fields: Mapping[str, Strategy[Any]],
    required: Sequence[str],
    optional: Sequence[str],
    most: int,
) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(optional), max_size=most, unique=True)) if optional else []
    return {name: draw(fields[name]) for name in (*required, *chosen)}


# -- the core's kinds ---------------------------------------------------------------------------


def namespaces_of(world: World) -> Strategy[str]:
    """One of the world's namespaces, mostly the first (objects meet more often)."""
    return mostly(st.just(world.namespaces[0]), st.sampled_from(world.namespaces))


def object_meta(world: World, names: Sequence[str], **labels: Strategy[str]) -> Strategy[dict[str, Any]]:
    label_values = st.fixed_dictionaries({k: v for k, v in labels.items()})
    return st.fixed_dictionaries(
        {
            "name": st.sampled_from(names),
            "namespace": namespaces_of(world),
            "labels": label_values,
        }
    )


def kind_objects(
    gvk: GroupVersionKind,
    world: World,
    names: Sequence[str],
    spec: Strategy[Any],
    *,
    optional_meta: Mapping[str, Strategy[Any]] | None = None,
) -> Strategy[dict[str, Any]]:
    """Objects of ``gvk`` with ``spec``: named from ``names``, in one of the world's namespaces when
    the kind is namespaced; ``optional_meta`` are metadata fields drawn or left out (annotations)."""
    required: dict[str, Strategy[Any]] = {"name": st.sampled_from(names)}
    if gvk.namespaced:
        required["namespace"] = namespaces_of(world)
    meta = (
        st.fixed_dictionaries(required, optional=optional_meta)
        if optional_meta
        else st.fixed_dictionaries(required)
    )
    return st.fixed_dictionaries(
        {"apiVersion": st.just(gvk.api_version), "kind": st.just(gvk.kind), "metadata": meta, "spec": spec}
    )


def _service_ports(world: World) -> Strategy[list[dict[str, Any]]]:
    port = st.sampled_from(world.ports).flatmap(
        lambda p: st.fixed_dictionaries(
            {"name": st.just(p[0]), "port": st.just(p[1])},
            optional={
                "targetPort": st.one_of(st.just(p[1] + 8000), st.just(p[0])),
                "protocol": st.sampled_from(("TCP", "UDP")),
                "appProtocol": st.sampled_from(("h2c", "https", "kubernetes.io/h2c", "x")),
            },
        )
    )
    return st.lists(port, min_size=1, max_size=3, unique_by=lambda p: p["name"])


def services(world: World) -> Strategy[KubeObject]:
    cluster = st.fixed_dictionaries({"type": st.just("ClusterIP"), "ports": _service_ports(world)})
    external = st.fixed_dictionaries(
        {
            "type": st.just("ExternalName"),
            "externalName": world.maybe(
                st.just("example.com"), st.sampled_from(("localhost", "127.0.0.1", "a..b", "x" * 300))
            ),
            "ports": _service_ports(world),
        }
    )
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.just("Service"),
            "metadata": object_meta(world, world.services),
            "spec": st.one_of(cluster, cluster, cluster, external),
        }
    )


_ADDRESSES = ("127.0.0.1", "10.0.0.1", "127.0.0.2")
_BAD_ADDRESSES = ("::1", "fe80::1", "999.1.1.1", "0.0.0.0", "1.2.3", "a.example.com", "", "255.255.255.255")


def endpoint_slices(world: World) -> Strategy[KubeObject]:
    endpoint = st.fixed_dictionaries(
        {
            "addresses": st.lists(
                world.maybe(st.sampled_from(_ADDRESSES), st.sampled_from(_BAD_ADDRESSES)),
                min_size=1,
                max_size=2,
            )
        },
        optional={"conditions": st.fixed_dictionaries({"ready": st.booleans()})},
    )
    port = st.sampled_from(world.ports).map(lambda p: {"name": p[0], "port": p[1] + 8000, "protocol": "TCP"})
    return st.builds(
        lambda meta, address_type, ports, endpoints: {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": meta,
            "addressType": address_type,
            "ports": ports,
            "endpoints": endpoints,
        },
        object_meta(
            world,
            tuple(f"{s}-{i}" for s in world.services for i in (1, 2)),
            **{"kubernetes.io/service-name": st.sampled_from(world.services)},
        ),
        world.maybe(st.just("IPv4"), st.sampled_from(("IPv6", "FQDN"))),
        st.lists(port, max_size=3),
        st.lists(endpoint, max_size=3),
    )


@functools.cache
def _tls_data(bits: int) -> dict[str, str]:
    """``data`` of a TLS Secret for the world's hosts: the test CA's 2048-bit certificate, or a
    self-signed one with a ``bits``-bit key (1024: a key Envoy refuses)."""
    # cryptography only when a Secret is drawn.
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

    from cpx.ops import certgen  # noqa: PLC0415
    from cpx.testing.tls import issue_cert, self_signed  # noqa: PLC0415

    hosts = ("a.example.com", "*.wild.example.com")
    pair = issue_cert(hosts) if bits == 2048 else self_signed(rsa.generate_private_key(65537, bits), hosts)
    data: dict[str, str] = certgen.tls_secret("", "", pair)["data"]
    return data


def secrets(world: World) -> Strategy[KubeObject]:
    good = st.one_of(
        st.just(2048).map(_tls_data),
        st.fixed_dictionaries({"ca.crt": st.just(2048).map(lambda b: _tls_data(b)["tls.crt"])}),
    )
    bad = st.one_of(
        st.just(1024).map(_tls_data),
        st.fixed_dictionaries({"tls.crt": st.just("bm90IGEgY2VydA=="), "tls.key": st.just("")}),
    )
    data = world.maybe(good, bad)
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.just("Secret"),
            "metadata": object_meta(world, world.secrets),
            "type": world.maybe(st.just("kubernetes.io/tls"), st.just("Opaque")),
            "data": data,
        }
    )


def namespaces(world: World) -> Strategy[KubeObject]:
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.just("Namespace"),
            "metadata": st.fixed_dictionaries(
                {"name": st.sampled_from(world.namespaces)},
                optional={
                    "labels": st.dictionaries(
                        st.sampled_from(("team", "env")),
                        world.maybe(st.just("x"), hostile_strings()),
                        max_size=2,
                    )
                },
            ),
        }
    )


CORE_KINDS = (k8s.SERVICE, k8s.ENDPOINT_SLICE, k8s.SECRET, k8s.NAMESPACE)
CORE_STRATEGIES = (
    KindStrategy(gvk=k8s.SERVICE, objects=services),
    KindStrategy(gvk=k8s.ENDPOINT_SLICE, objects=endpoint_slices),
    KindStrategy(gvk=k8s.SECRET, objects=secrets),
    KindStrategy(gvk=k8s.NAMESPACE, objects=namespaces),
)


# -- sets of objects ----------------------------------------------------------------------------


def kind_strategies(host: Any) -> list[KindStrategy]:
    """The core's kinds' strategies, then every :class:`KindStrategy` the plugins of a
    :class:`~cpx.plugins.PluginHost` contribute (the core's own are here, not in its runtime
    plugin, so that runtime code never imports test code)."""
    plugins = [record for _plugin, record in host.contributions("cpx_fuzz_strategies", KindStrategy)]
    return [*CORE_STRATEGIES, *plugins]


def any_object(
    kinds: Sequence[KindStrategy], world: World = World(), confused: float = 0.3
) -> Strategy[KubeObject]:
    """One object of any of ``kinds``: valid, with hostile leaves, or (a share of about
    ``confused``) type-confused."""
    clean = attrs.evolve(world, hostile=False)
    valid = st.one_of([k.objects(clean) for k in kinds])
    hostile = st.one_of([k.objects(world) for k in kinds])
    tenths = round(confused * 10)
    choices = (
        ["valid"] * ((10 - tenths + 1) // 2) + ["hostile"] * ((10 - tenths) // 2) + ["confused"] * tenths
    )
    by_name = {"valid": valid, "hostile": hostile, "confused": type_confused(valid)}
    return st.sampled_from(choices).flatmap(by_name.__getitem__)


def environment(world: World) -> list[KubeObject]:
    """Valid Services (every port), their EndpointSlices on 127.0.0.1 and the TLS and CA Secrets,
    in the world's first namespace: what tenants' objects refer to."""
    namespace = world.namespaces[0]
    out: list[KubeObject] = []
    for name in world.services:
        meta = {"name": name, "namespace": namespace}
        ports = [{"name": p, "port": n, "targetPort": n + 8000} for p, n in world.ports]
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": ports}})
        out.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {**meta, "name": f"{name}-1", "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "ports": [{"name": p, "port": n + 8000} for p, n in world.ports],
                "endpoints": [{"addresses": ["127.0.0.1"]}],
            }
        )
    tls = _tls_data(2048)
    for name, data in (("tls", tls), ("ca", {"ca.crt": tls["tls.crt"]})):
        meta = {"name": name, "namespace": namespace}
        out.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": data})
    out[-2]["type"] = "kubernetes.io/tls"
    return out


def object_sets(
    kinds: Sequence[KindStrategy], world: World = World(), max_size: int = 8, confused: float = 0.3
) -> Strategy[list[KubeObject]]:
    """Lists of objects that refer to each other (names may repeat: later ones replace earlier).

    Mostly the :func:`environment` first (with the kinds' own ``environment`` objects), so that
    what follows finds the Services and Secrets it names, and routes, clusters, endpoints and
    secrets are really published; then objects of the core's kinds, then at least one of the
    plugins' kinds (tenants' objects).
    """
    extras = [k.environment for k in kinds if k.environment is not None]
    backbone = mostly(
        st.builds(lambda: [*environment(world), *(obj for extra in extras for obj in extra(world))]),
        st.just([]),
    )
    core = [k for k in kinds if k.gvk in CORE_KINDS]
    tenant = [k for k in kinds if k.gvk not in CORE_KINDS] or core
    parts = st.tuples(
        backbone,
        st.lists(any_object(core, world, confused), max_size=max_size // 2),
        st.lists(any_object(tenant, world, confused), min_size=1, max_size=max_size - max_size // 2),
    )
    return parts.map(lambda p: [*p[0], *p[1], *p[2]])
