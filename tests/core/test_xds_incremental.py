"""What the xDS server works out incrementally equals what it would work out from scratch.

Random sequences of changes: a type snapshot derived from the previous one (its version, what it
says it touched), the changes between any two versions, a make-before-break view's merged types,
and whether a client holds some names, each compared with the same computed over every name.
"""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.cluster.v3 import cluster_pb2
from envoy.service.discovery.v3 import discovery_pb2
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cpx.xds.resource import CLUSTER, ENDPOINT, ROUTE, Resource, Snapshot, TypeSnapshot
from cpx.xds.server import wire
from cpx.xds.server.changes import ChangeCache, Changes
from cpx.xds.server.counters import XdsCounters
from cpx.xds.server.edsnames import ClusterEdsNames, eds_name
from cpx.xds.server.names import NameSets
from cpx.xds.server.rejects import Rejections
from cpx.xds.server.sequencing import _merged
from cpx.xds.server.streams import DeltaStream, DeltaWatch, SotwStream, SotwWatch, StreamHub
from cpx.xds.typeversion import BUCKETS

NAMES = [f"n{i}" for i in range(24)]

# One step: per name, its version; absent names are gone. "same" keeps the very object (as a cache
# hands out what did not change), "copy" rebuilds it at the same version.
states = st.lists(
    st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["v1", "v2", "v3", "same", "copy"])),
    min_size=1,
    max_size=12,
)


def resources_of(state: Mapping[str, str], before: Mapping[str, Resource]) -> dict[str, Resource]:
    out = {}
    for name, step in state.items():
        old = before.get(name)
        if step == "same" and old is not None:
            out[name] = old
            continue
        version = (old.version if old is not None else "v1") if step in ("same", "copy") else step
        out[name] = Resource(name, ROUTE, version.encode(), version)
    return out


def full_diff(old: Mapping[str, Resource], new: Mapping[str, Resource]) -> Changes:
    changed = {n for n, r in new.items() if n not in old or old[n].version != r.version}
    return Changes(frozenset(changed), frozenset(old.keys() - new.keys()))


def chain(steps: list[dict[str, str]], hinted: bool) -> list[TypeSnapshot]:
    out: list[TypeSnapshot] = []
    for state in steps:
        previous = out[-1] if out else None
        now = resources_of(state, previous.resources if previous else {})
        hint = (now.keys() | previous.resources.keys()) if hinted and previous else None
        out.append(TypeSnapshot.of(ROUTE, now, previous=previous, changed=hint))
    return out


@settings(max_examples=150, deadline=None)
@given(states, st.booleans())
def test_a_derived_type_snapshot_is_the_one_built_from_scratch(
    steps: list[dict[str, str]], hinted: bool
) -> None:
    snaps = chain(steps, hinted)
    for previous, snap in zip([None, *snaps], snaps, strict=False):
        fresh = TypeSnapshot.of(ROUTE, snap.resources)
        assert snap.version == fresh.version and snap == fresh
        assert snap.tree.names == fresh.tree.names and snap.tree.digests == fresh.tree.digests
        if previous is not None:
            diff = full_diff(previous.resources, snap.resources)
            if snap is not previous:
                assert snap.parent == previous.version
                assert snap.touched == diff.changed | diff.removed
            else:
                assert diff == Changes(frozenset(), frozenset())


def test_versions_depend_on_content_only() -> None:
    many = {f"r{i}": Resource(f"r{i}", ROUTE, b"", f"v{i}") for i in range(4 * BUCKETS)}
    scratch = TypeSnapshot.of(ROUTE, many)
    grown = TypeSnapshot.of(ROUTE, {})
    for name in reversed(list(many)):
        grown = TypeSnapshot.of(ROUTE, {**grown.resources, name: many[name]}, previous=grown)
    assert grown.version == scratch.version
    moved = TypeSnapshot.of(ROUTE, {**many, "r7": Resource("r7", ROUTE, b"", "other")}, previous=scratch)
    assert moved.version != scratch.version and moved.touched == {"r7"}
    assert TypeSnapshot.of(ROUTE, many, previous=moved).version == scratch.version


@settings(max_examples=100, deadline=None)
@given(states, st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=1, max_size=20))
def test_changes_between_any_two_versions_are_exact(
    steps: list[dict[str, str]], pairs: list[tuple[int, int]]
) -> None:
    snaps = chain(steps, hinted=False)
    # Views derived from published snapshots, and snapshots built with no link at all.
    branches = [
        TypeSnapshot.of(ROUTE, {**s.resources, "extra": Resource("extra", ROUTE, b"", "x")}, previous=s)
        for s in snaps[::2]
    ]
    loose = [TypeSnapshot.of(ROUTE, s.resources) for s in snaps[1::3]]
    every = snaps + branches + loose
    cache = ChangeCache()
    for snap in snaps:
        cache.learn(snap)
    for index, built in zip(range(1, len(snaps), 6), loose[::2], strict=False):
        cache.link(snaps[index - 1], built)  # as the server links snapshots built from scratch
    for i, j in pairs:
        old, new = every[i % len(every)], every[j % len(every)]
        assert cache.between(old, new) == full_diff(old.resources, new.resources)


def test_changes_without_a_remembered_path_are_compared_name_by_name() -> None:
    cache = ChangeCache()
    snaps = chain([{"a": "v1"}, *({"a": "v1", f"n{i}": "v1"} for i in range(100)), {"b": "v2"}], hinted=False)
    for snap in snaps:
        cache.learn(snap)  # more links than are remembered: the first ones are forgotten
    assert cache.between(snaps[0], snaps[-1]) == Changes(frozenset({"b"}), frozenset({"a"}))


def merged_reference(layers: list[Snapshot]) -> dict[str, Resource]:
    out: dict[str, Resource] = {}
    for layer in reversed(layers):
        out.update(layer.get(ROUTE).resources)
    return out


@settings(max_examples=100, deadline=None)
@given(states, st.lists(st.integers(0, 11), min_size=1, max_size=3))
def test_a_merged_view_holds_every_layer(steps: list[dict[str, str]], picks: list[int]) -> None:
    snaps = chain(steps, hinted=False)
    layers = [Snapshot({ROUTE: snaps[i % len(snaps)]}) for i in picks]
    merged = _merged(ROUTE, layers, ChangeCache())
    assert dict(merged.resources) == merged_reference(layers)
    assert merged.version == TypeSnapshot.of(ROUTE, merged.resources).version


# --- whether a client holds names: from what changed, or over every name ---------------------------


def hub() -> StreamHub:
    counters = XdsCounters()
    return StreamHub(counters, Rejections(counters))


def endpoints(state: Mapping[str, str]) -> dict[str, Resource]:
    return {n: Resource(n, ENDPOINT, v.encode(), v) for n, v in state.items()}


steps_and_subscriptions = st.lists(
    st.tuples(
        st.none() | st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["v1", "v2", "v3"])),
        st.sets(st.sampled_from(NAMES)),
        st.booleans(),  # answer from the new snapshot before checking
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=100, deadline=None)
@given(steps_and_subscriptions, st.sets(st.sampled_from(NAMES)))
# A name subscribed since the last answer, the snapshot unchanged: not held yet.
@example([({"n0": "v1", "n1": "v1"}, {"n1"}, True), (None, {"n0", "n1"}, False)], {"n0"})
def test_sotw_holds_equals_a_check_of_every_name(
    steps: list[tuple[dict[str, str] | None, set[str], bool]], asked: set[str]
) -> None:
    stream = SotwStream(hub(), None)
    snap: TypeSnapshot | None = None
    nonce = ""
    for state, names, answer in steps:
        if snap is None or state is not None:  # None: the snapshot stays as it is
            snap = TypeSnapshot.of(ENDPOINT, endpoints(state or {}), previous=snap)
        stream.on_request(
            discovery_pb2.DiscoveryRequest(
                type_url=ENDPOINT, resource_names=sorted(names), response_nonce=nonce
            )
        )
        if answer and stream._respond_type(ENDPOINT, snap) is not None:
            nonce = stream.by_type[ENDPOINT].nonce
        watch = stream.by_type[ENDPOINT]
        wanted = asked & snap.resources.keys()
        expected = all(watch.sent.get(n) == snap.resources[n].version for n in wanted if n in watch.names)
        assert stream._holds(ENDPOINT, snap, wanted) == expected


@settings(max_examples=100, deadline=None)
@given(steps_and_subscriptions, st.sets(st.sampled_from(NAMES)), st.booleans())
def test_delta_holds_equals_a_check_of_every_name(
    steps: list[tuple[dict[str, str] | None, set[str], bool]], asked: set[str], wildcard: bool
) -> None:
    stream = DeltaStream(hub(), None)
    snap: TypeSnapshot | None = None
    subscribed: set[str] = set()
    for state, names, answer in steps:
        if snap is None or state is not None:  # None: the snapshot stays as it is
            snap = TypeSnapshot.of(ENDPOINT, endpoints(state or {}), previous=snap)
        nonce = stream.by_type[ENDPOINT].nonce if ENDPOINT in stream.by_type else ""
        request = discovery_pb2.DeltaDiscoveryRequest(
            type_url=ENDPOINT,
            resource_names_subscribe=sorted(names - subscribed) + (["*"] if wildcard and not nonce else []),
            resource_names_unsubscribe=sorted(subscribed - names),
            response_nonce=nonce,
        )
        stream.on_request(request)
        subscribed = set(names)
        if answer:
            stream._respond_type(ENDPOINT, snap)
        watch = stream.by_type[ENDPOINT]
        wanted = [n for n in asked & snap.resources.keys() if watch.wildcard or n in watch.names]
        expected = all(watch.known.get(n) == snap.resources[n].version for n in wanted)
        assert stream._holds(ENDPOINT, snap, asked & snap.resources.keys()) == expected


def test_requests_listing_the_same_names_share_one_set() -> None:
    sets = NameSets()
    many = [f"r{i}" for i in range(100)]
    first = discovery_pb2.DiscoveryRequest(type_url=ROUTE, resource_names=many, version_info="1")
    ack = discovery_pb2.DiscoveryRequest(
        type_url=ROUTE, resource_names=many, version_info="2", response_nonce="7"
    )
    assert sets.of(first) == frozenset(many) and sets.of(ack) is sets.of(first)
    more = discovery_pb2.DiscoveryRequest(type_url=ROUTE, resource_names=[*many, "new"], response_nonce="8")
    assert sets.of(more) == frozenset([*many, "new"])
    reordered = discovery_pb2.DiscoveryRequest(type_url=ROUTE, resource_names=many[::-1])
    assert sets.of(reordered) == frozenset(many)
    assert sets.of(discovery_pb2.DiscoveryRequest(type_url=ROUTE, resource_names=["a", "b"])) == {"a", "b"}


@settings(max_examples=100, deadline=None)
@given(states)
def test_complete_responses_encoded_from_the_last_one_are_encoded_anew(steps: list[dict[str, str]]) -> None:
    cache = wire.ResponseCache()
    for snap in chain(steps, hinted=False):
        everything = wire.sotw_resources(ROUTE, (snap.resources[n] for n in sorted(snap.resources)))
        assert cache.resources(snap, None) == everything


def eds_cluster(name: str, service: str) -> Resource:
    msg = cluster_pb2.Cluster(name=name)
    if service == "static":
        msg.type = cluster_pb2.Cluster.STATIC
    else:
        msg.type = cluster_pb2.Cluster.EDS
        msg.eds_cluster_config.service_name = service
    return Resource.from_message(name, CLUSTER, msg)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["s1", "s2", "s3", "", "static"])),
        min_size=1,
        max_size=10,
    )
)
def test_the_eds_names_of_changing_clusters_are_those_counted_anew(steps: list[dict[str, str]]) -> None:
    tracked, changes = ClusterEdsNames(), ChangeCache()
    endpoints = TypeSnapshot.of(ENDPOINT, {n: Resource(n, ENDPOINT, b"", "1") for n in ("s1", "s2", "n3")})
    clusters: TypeSnapshot | None = None
    for state in steps:
        built = {name: eds_cluster(name, service) for name, service in state.items()}
        clusters = TypeSnapshot.of(CLUSTER, built, previous=clusters)
        wanted = tracked.wanted(clusters, endpoints, changes)
        expected = {eds_name(c) for c in clusters.resources.values()} & endpoints.resources.keys()
        assert set(wanted) == expected and all(n in wanted for n in expected) and "s3" not in wanted


delta_steps = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from(NAMES[:8]), st.sampled_from(["v1", "v2"])),
        st.lists(st.sampled_from([*NAMES[:10], "*"]), max_size=4),  # subscribe
        st.lists(st.sampled_from([*NAMES[:10], "*"]), max_size=4),  # unsubscribe
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=200, deadline=None)
@given(delta_steps, st.booleans())
def test_a_delta_answer_from_what_changed_is_the_answer_of_a_full_pass(
    steps: list[tuple[dict[str, str], list[str], list[str]]], wildcard: bool
) -> None:
    """Two watches see the same requests and snapshots; one always answers from a full pass."""
    cache = ChangeCache()
    incremental, full = DeltaWatch(ENDPOINT, wildcard=wildcard), DeltaWatch(ENDPOINT, wildcard=wildcard)
    snap: TypeSnapshot | None = None
    basis: TypeSnapshot | None = None
    for state, subscribe, unsubscribe in steps:
        snap = TypeSnapshot.of(ENDPOINT, endpoints(state), previous=snap)
        for watch in (incremental, full):
            watch.update(subscribe, unsubscribe)
        changes = None if incremental.dirty or basis is None else cache.between(basis, snap)
        incremental.dirty, basis = False, snap
        answers = []
        for watch, using in ((incremental, changes), (full, None)):
            changed, removed = watch.diff(snap.resources, using)
            watch.record(changed, removed)
            answers.append(({r.name for r in changed}, set(removed)))
        assert answers[0] == answers[1]
        assert incremental.known == full.known


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(NAMES[:8]), st.sampled_from(["v1", "v2"])),
            st.frozensets(st.sampled_from(NAMES[:10])),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_a_sotw_answer_from_what_changed_is_the_answer_of_a_full_pass(
    steps: list[tuple[dict[str, str], frozenset[str]]],
) -> None:
    """Two named watches see the same requests and snapshots; one always answers from a full pass."""
    stream = SotwStream(hub(), None)
    incremental, full = SotwWatch(ENDPOINT), SotwWatch(ENDPOINT)
    snap: TypeSnapshot | None = None
    for step, (state, names) in enumerate(steps):
        snap = TypeSnapshot.of(ENDPOINT, endpoints(state), previous=snap)
        for watch in (incremental, full):
            watch.subscribe(names, step == 0, "")
        basis = incremental.basis
        changes = None if incremental.dirty or basis is None else stream.hub.changes.between(basis, snap)
        incremental.dirty, incremental.basis = False, snap
        answered = stream._named_names(incremental, snap, changes)
        assert answered == stream._named_names(full, snap, None)
        assert incremental.sent == full.sent
