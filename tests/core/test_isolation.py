"""Per-object fault isolation: one object's crash or bad output leaves out that object, not the build."""

from __future__ import annotations

from typing import Any

import pytest

from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.isolation import blame, find_culprit, sanitize
from cpx.objects import ObjectKey
from cpx.plugins import PluginHost
from cpx.snapshot import BuildError, SnapshotHandler
from cpx.sources.view import SourceView
from cpx.xds import resource
from cpx.xds.resource import Snapshot

# Contour's single-RouteConfiguration shape: what these tests inspect (the scoped shape's split of
# it is tested in test_scoped_routes.py).
SINGLE = Config(route_shape="single")


def service(name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": "default", "name": name},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }


def ingress(name: str, *, boom: str = "", version: str = "1") -> dict[str, Any]:
    path = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}},
    }
    meta: dict[str, Any] = {"namespace": "default", "name": name, "resourceVersion": version}
    if boom:
        meta["annotations"] = {"test/boom": boom}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta,
        "spec": {"rules": [{"host": f"{name}.example.com", "http": {"paths": [path]}}]},
    }


class Bomb:
    """A processor that crashes on Ingresses annotated ``test/boom``: ``blind`` without saying
    which, ``blamed`` through :func:`cpx.isolation.blame`, ``always`` whatever the input."""

    runs = 0

    def run(self, dag: DAG, source: SourceView) -> None:
        Bomb.runs += 1
        for obj in source.all_objects():
            how = (obj.get("metadata") or {}).get("annotations", {}).get("test/boom")
            if how == "blind":
                raise RuntimeError("kaboom\nforged log line")
            if how == "blamed":
                with blame(ObjectKey.of(obj)):
                    raise ValueError("bad value")
            if how == "always":
                raise RuntimeError("always")
            if how == "ghost":  # blames an object that does not exist
                with blame(ObjectKey("", "Ghost", "default", "nobody")):
                    raise RuntimeError("haunted")


def make_pipeline(*objects: dict[str, Any]) -> SnapshotHandler:
    p = SnapshotHandler.create(PluginHost.load(["ingress"]), SINGLE)
    p.builder.processors = [*p.builder.processors, ("bomb", Bomb())]  # runs last
    p.upsert(service())
    for obj in objects:
        p.upsert(obj)
    return p


def hosts(snapshot: Snapshot) -> str:
    body = snapshot.get(resource.ROUTE).resources["ingress_http"].body
    return body.decode("latin-1")


def key(name: str) -> ObjectKey:
    return ObjectKey("networking.k8s.io", "Ingress", "default", name)


# -- find_culprit ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", range(9))
def test_find_culprit_finds_the_one_bad_candidate_in_log_steps(bad: int) -> None:
    candidates = [key(str(i)) for i in range(9)]
    trials: list[int] = []

    def fails_without(excluded: Any) -> bool:
        trials.append(len(excluded))
        return candidates[bad] not in excluded

    assert find_culprit(candidates, fails_without) == candidates[bad]
    assert len(trials) <= 5  # 1 + ceil(log2(9))


def test_find_culprit_is_none_when_the_failure_is_no_candidates_fault() -> None:
    assert find_culprit([key("a"), key("b")], lambda excluded: True) is None
    assert find_culprit([], lambda excluded: True) is None


def test_sanitize_keeps_one_bounded_line() -> None:
    assert sanitize("a\nb\x1b[31m") == "a\\x0ab\\x1b[31m"
    assert len(sanitize("x" * 5000)) == 1024


# -- the pipeline ----------------------------------------------------------------------------------


def test_an_unattributed_crash_is_bisected_to_its_object_and_the_rest_is_built() -> None:
    objects = [ingress(f"ok{i}") for i in range(6)]
    p = make_pipeline(*objects[:3], ingress("bad", boom="blind"), *objects[3:])
    snapshot = p.rebuild()
    assert list(p.quarantined) == [key("bad")]
    assert all(f"ok{i}.example.com" in hosts(snapshot) for i in range(6))
    assert "bad.example.com" not in hosts(snapshot)
    status = p.statuses()[key("bad")]
    (note,) = status.notes
    assert (note.type, note.reason) == ("InternalError", "TranslationFailed")
    assert note.message == "RuntimeError: kaboom\\x0aforged log line"
    assert p.last_build_error is None


def test_a_blamed_crash_quarantines_its_object_without_bisecting() -> None:
    p = make_pipeline(*(ingress(f"ok{i}") for i in range(8)), ingress("bad", boom="blamed"))
    Bomb.runs = 0
    p.rebuild()
    assert Bomb.runs == 2  # the failing build and the one without the culprit
    assert list(p.quarantined) == [key("bad")]
    assert p.statuses()[key("bad")].notes[0].message == "ValueError: bad value"


def test_a_quarantined_object_stays_out_until_it_changes() -> None:
    p = make_pipeline(ingress("a"), ingress("bad", boom="blind"))
    p.rebuild()
    assert p.upsert(ingress("bad", boom="blind")) is False  # the same object again: nothing to do
    assert key("bad") in p.quarantined
    assert p.upsert(ingress("bad", version="2")) is True  # fixed
    assert "bad.example.com" in hosts(p.rebuild())
    assert not p.quarantined and not p.statuses()[key("bad")].notes


def test_deleting_a_quarantined_object_forgets_it() -> None:
    p = make_pipeline(ingress("a"), ingress("bad", boom="blind"))
    p.rebuild()
    assert p.delete(ingress("bad", boom="blind")) is True
    assert key("bad") not in p.quarantined and key("bad") not in p.statuses()


def test_a_fault_no_object_explains_fails_the_build_and_keeps_the_last_snapshot() -> None:
    p = make_pipeline(ingress("a"))
    good = p.rebuild()
    p.upsert(ingress("b"))
    p.upsert(ingress("c", boom="always"))
    p.rebuild()  # c is the culprit: quarantined
    assert list(p.quarantined) == [key("c")]
    # Now a crash whatever the input: every candidate excluded still fails.
    p.builder.processors = [*p.builder.processors, ("always", _Always())]
    with pytest.raises(BuildError, match="always"):
        p.rebuild()
    assert p.last_build_error is not None and "always" in p.last_build_error
    assert p.snapshot is not None and p.snapshot is not good  # the last good one, untouched
    assert "b.example.com" in hosts(p.snapshot)


class _Always:
    def run(self, dag: DAG, source: SourceView) -> None:
        raise RuntimeError("always broken")


def test_a_snapshot_checker_verdict_is_bisected_to_the_object() -> None:
    p = make_pipeline(*(ingress(f"ok{i}") for i in range(5)), ingress("evil"))

    def check(snapshot: Snapshot) -> str | None:
        return "host evil is not allowed\n" if "evil.example.com" in hosts(snapshot) else None

    p.checkers.append(check)
    snapshot = p.rebuild()
    assert list(p.quarantined) == [key("evil")]
    assert "ok4.example.com" in hosts(snapshot)
    (note,) = p.statuses()[key("evil")].notes
    assert (note.reason, note.message) == ("EnvoyRejected", "host evil is not allowed\\x0a")


def test_quarantine_shows_in_changed_statuses() -> None:
    p = make_pipeline(ingress("a"))
    p.rebuild()
    p.changed_statuses()
    p.upsert(ingress("bad", boom="blind"))
    p.rebuild()
    changed = p.changed_statuses()
    assert key("bad") in changed and changed[key("bad")] is not None
    p.delete(ingress("bad", boom="blind"))
    p.rebuild()
    assert p.changed_statuses() == {key("bad"): None}


def test_a_nack_is_noted_on_what_changed_in_the_last_build_and_fed_the_resource() -> None:
    p = make_pipeline(ingress("a"), ingress("b"))
    p.rebuild()
    p.upsert(ingress("new"))
    p.upsert(service("other"))  # changed too, but feeds no route configuration
    p.rebuild()
    p.changed_statuses()
    blamed = p.envoy_rejected(resource.ROUTE, ["ingress_http"], "Proto constraint validation failed\n(x)")
    assert blamed == [key("new")]
    assert list(p.changed_statuses()) == [key("new")]
    (note,) = p.statuses()[key("new")].notes
    assert (note.type, note.reason) == ("RouteConfigurationError", "EnvoyRejected")
    assert note.message == "Proto constraint validation failed\\x0a(x)"
    # Any xDS client can NACK: nothing is left out on its word alone.
    assert not p.quarantined and "new.example.com" in hosts(p.rebuild())
    # A new version of the object clears the note.
    p.upsert(ingress("new", boom="harmless", version="2"))
    p.rebuild()
    assert not p.statuses()[key("new")].notes and key("new") in p.changed_statuses()


def test_a_nack_of_what_did_not_change_blames_nobody() -> None:
    p = make_pipeline(ingress("a"))
    p.rebuild()
    p.upsert(ingress("b"))
    p.rebuild()
    assert p.envoy_rejected(resource.CLUSTER, ["no-such-cluster"], "bad") == []
    assert not p.quarantined


def test_a_nack_from_an_authenticated_envoy_leaves_out_what_it_was_traced_to() -> None:
    p = make_pipeline(ingress("a"))
    p.rebuild()
    p.upsert(ingress("new"))
    p.rebuild()
    assert p.envoy_rejected(resource.ROUTE, ["ingress_http"], "no", leave_out=True) == [key("new")]
    assert list(p.quarantined) == [key("new")]
    snapshot = p.rebuild()
    assert "new.example.com" not in hosts(snapshot) and "a.example.com" in hosts(snapshot)
    assert p.statuses()[key("new")].notes[0].reason == "EnvoyRejected"


def test_a_domain_two_virtual_hosts_share_is_traced_to_what_changed() -> None:
    # The schema check refuses upper-case hosts; without it, two hosts differing in case would
    # make Envoy refuse the whole route table ("duplicate domain").
    upper = ingress("upper")
    upper["spec"]["rules"][0]["host"] = "SAME.example.com"
    lower = ingress("lower")
    lower["spec"]["rules"][0]["host"] = "same.example.com"
    p = make_pipeline(ingress("a"), lower)
    p.rebuild()
    p.upsert(upper)
    snapshot = p.rebuild()
    assert list(p.quarantined) == [key("upper")]
    (note,) = p.statuses()[key("upper")].notes
    assert note.reason == "EnvoyConstraintViolated" and "ingress_http" in note.message, note
    assert "same.example.com" in hosts(snapshot) and "a.example.com" in hosts(snapshot)


def test_tls_hosts_differing_in_case_are_traced_to_what_changed() -> None:
    from cpx.testing.tls import make_tls_secret

    secret, _ = make_tls_secret("default", "tls", ["*.example.com", "same.example.com"])
    lower, upper = ingress("lower"), ingress("upper")
    for obj, host in ((lower, "same.example.com"), (upper, "SAME.example.com")):
        obj["spec"]["rules"][0]["host"] = host
        obj["spec"]["tls"] = [{"hosts": [host], "secretName": "tls"}]
    p = make_pipeline(secret, lower)
    p.rebuild()
    p.upsert(upper)
    snapshot = p.rebuild()
    assert list(p.quarantined) == [key("upper")]
    notes = p.statuses()[key("upper")].notes
    assert any("ingress_https" in n.message or "https/" in n.message for n in notes), notes
    listener = snapshot.get(resource.LISTENER).resources["ingress_https"].body
    assert b"same.example.com" in listener and b"SAME.example.com" not in listener


def test_a_fault_blamed_on_no_existing_object_is_bisected_instead() -> None:
    p = make_pipeline(*(ingress(f"ok{i}") for i in range(4)), ingress("haunted", boom="ghost"))
    Bomb.runs = 0
    snapshot = p.rebuild()
    assert list(p.quarantined) == [key("haunted")]
    assert Bomb.runs < 10 and "ok3.example.com" in hosts(snapshot)


def test_nacks_of_one_type_are_traced_once_a_second() -> None:
    p = make_pipeline(ingress("a"))
    p.rebuild()
    p.upsert(ingress("new"))
    p.rebuild()
    assert p.envoy_rejected(resource.ROUTE, iter(["ingress_http"]), "no") == [key("new")]
    assert p.envoy_rejected(resource.ROUTE, ["ingress_http"], "no") == []  # a flood: not again
    assert p.envoy_rejected(resource.CLUSTER, [], "no") == []  # another type is traced (nothing fed it)


def test_an_endpointslice_envoy_would_refuse_is_left_out_on_the_fast_path() -> None:
    def slice_(address: str, version: str) -> dict[str, Any]:
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "namespace": "default",
                "name": "web-1",
                "resourceVersion": version,
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [address]}],
        }

    p = make_pipeline(ingress("a"), slice_("10.0.0.1", "1"))
    p.rebuild()
    bad = slice_("999.1.1.1", "2")  # the schema check refuses it; here it gets past (validate=False)
    p.upsert(bad)
    snapshot = p.endpoints_changed([("default", "web")])
    assert snapshot is not None and p.rebuilds == 1  # no DAG rebuild
    slice_key = ObjectKey("discovery.k8s.io", "EndpointSlice", "default", "web-1")
    assert list(p.quarantined) == [slice_key]
    (note,) = p.statuses()[slice_key].notes
    assert note.reason == "EnvoyConstraintViolated" and "999.1.1.1" in note.message
    assert b"999.1.1.1" not in b"".join(r.body for r in snapshot.get(resource.ENDPOINT).resources.values())
