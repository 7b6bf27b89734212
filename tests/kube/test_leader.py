"""Leader election on a Lease, and status writing by the leader only, against the emulator.

Timings are shrunk (lease 1.5 s, renew 1 s, retry 0.2 s) so that takeovers take a second or two.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import kmock
import pytest

from cpx.config import Config, StatusWritingOptions
from cpx.ops.metrics import Metrics
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.sources.kube.rest import MERGE_PATCH, collection_path, object_path, request_json
from cpx.status.leader import LEASE, LeaderElector, micro_time
from cpx.status.updater import start_status_writing
from cpx.testing.kubeversions import VersionedKubernetesEmulator, api_client_for

pytestmark = pytest.mark.kmock(cls=VersionedKubernetesEmulator)

FAST = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}
NS, NAME = "projectcontour", "leader-elect"


async def lease(api: Any) -> dict[str, Any]:
    got: dict[str, Any] = await asyncio.to_thread(request_json, api, "GET", object_path(LEASE, NS, NAME))
    return got


async def until(check: Callable[[], bool], timeout: float = 5.0) -> float:
    """Wait for ``check``; returns the seconds it took."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@contextlib.asynccontextmanager
async def campaigning(*electors: LeaderElector) -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks = [asyncio.create_task(e.run()) for e in electors]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def elector(api: Any, identity: str, events: list[str] | None = None, **kw: Any) -> LeaderElector:
    log = events if events is not None else []
    return LeaderElector(
        api,
        NAME,
        NS,
        identity,
        on_started_leading=lambda: log.append(f"{identity} started"),
        on_stopped_leading=lambda: log.append(f"{identity} stopped"),
        **{**FAST, **kw},
    )


async def test_a_release_racing_a_late_renewal_still_gives_the_lease_up(
    kmock: kmock.KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cancelled campaign cannot stop a renewal already running in its thread: when that write
    # lands between the release's read and write, the release's write conflicts.
    api = api_client_for(kmock)
    leader = elector(api, "a")
    assert await asyncio.to_thread(leader._try_acquire_or_renew) is True
    update = leader._update
    raced: list[bool] = []

    def renewal_lands_first(meta: Any, spec: Any) -> bool:
        if not raced:
            raced.append(update(meta, {**spec, "holderIdentity": "a", "renewTime": spec["renewTime"]}))
        return update(meta, spec)

    monkeypatch.setattr(leader, "_update", renewal_lands_first)
    await asyncio.to_thread(leader._release)
    assert raced == [True]
    assert (await lease(api))["spec"]["holderIdentity"] == ""


async def test_one_of_two_leads_and_the_other_takes_over_when_it_stops(
    kmock: kmock.KubernetesEmulator,
) -> None:
    api = api_client_for(kmock)
    events: list[str] = []
    metrics = Metrics()
    a = elector(api, "a", events, metrics=metrics)
    b = elector(api, "b", events)
    async with campaigning(a, b) as (task_a, task_b):
        await until(lambda: a.is_leader or b.is_leader)
        await asyncio.sleep(0.6)  # a few renewals: still exactly one leader
        assert [a.is_leader, b.is_leader].count(True) == 1
        leader, follower, task = (a, b, task_a) if a.is_leader else (b, a, task_b)
        spec = (await lease(api))["spec"]
        assert spec["holderIdentity"] == leader.identity
        assert spec["leaseDurationSeconds"] == 2  # whole seconds in the Lease
        assert spec["leaseTransitions"] == 0
        assert spec["acquireTime"].endswith("Z") and spec["renewTime"] >= spec["acquireTime"]
        if leader is a:
            assert metrics.registry.get_sample_value("leader_election_master_status", {"name": NAME}) == 1

        task.cancel()  # the leader stops: it releases the Lease ...
        await asyncio.gather(task, return_exceptions=True)
        assert not leader.is_leader
        took = await until(lambda: follower.is_leader)  # ... and the follower takes over at once
        assert took < 1.0  # well under the lease duration: it did not wait for expiry
    spec = (await lease(api))["spec"]
    assert spec["leaseTransitions"] == 1  # taking a released Lease counts as a transition
    assert events == [
        f"{leader.identity} started",
        f"{leader.identity} stopped",
        f"{follower.identity} started",
        f"{follower.identity} stopped",
    ]


async def test_an_expired_lease_is_taken_over(kmock: kmock.KubernetesEmulator) -> None:
    """A holder that died without releasing: the follower waits a lease duration, as observed on
    its own clock, then takes the Lease."""
    api = api_client_for(kmock)
    old = micro_time(dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "holderIdentity": "ghost",
            "leaseDurationSeconds": 1,
            "renewTime": old,
            "leaseTransitions": 3,
        },
    }
    await asyncio.to_thread(request_json, api, "POST", collection_path(LEASE, NS), body=body)
    b = elector(api, "b")
    async with campaigning(b):
        await asyncio.sleep(0.5)
        assert not b.is_leader and b.holder == "ghost"  # renewTime is never trusted across clocks
        took = await until(lambda: b.is_leader)
        assert 0.3 < took < 2.0
    assert (await lease(api))["spec"]["leaseTransitions"] == 4


async def test_a_leader_that_sees_another_holder_steps_down(kmock: kmock.KubernetesEmulator) -> None:
    api = api_client_for(kmock)
    events: list[str] = []
    a = elector(api, "a", events)
    async with campaigning(a):
        await until(lambda: a.is_leader)
        now = micro_time(dt.datetime.now(dt.UTC))
        await asyncio.to_thread(
            request_json,
            api,
            "PATCH",
            object_path(LEASE, NS, NAME),
            body={"spec": {"holderIdentity": "usurper", "renewTime": now, "leaseDurationSeconds": 15}},
            content_type=MERGE_PATCH,
        )
        await until(lambda: not a.is_leader)
        assert events == ["a started", "a stopped"]


def test_timings_are_checked() -> None:
    with pytest.raises(ValueError, match="lease duration"):
        LeaderElector(None, NAME, NS, "x", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderElector(None, NAME, NS, "x", lease_duration=15, renew_deadline=2, retry_period=2)


HTTPPROXY_PATH = "/apis/projectcontour.io/v1/namespaces/default/httpproxies"


def _proxy(name: str, port: int = 80) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {
            "virtualhost": {"fqdn": f"{name}.example.com"},
            "routes": [{"services": [{"name": "s", "port": port}]}],
        },
    }


async def test_two_replicas_one_lease_only_the_leader_writes_status(kmock: kmock.KubernetesEmulator) -> None:
    """What `cpx serve` runs in Kubernetes mode: each replica computes every status, only the one
    holding the Lease writes it; when it stops, the other takes over and catches up."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "default"},
        "spec": {"ports": [{"port": 80}]},
    }
    setup = api_client_for(kmock)
    for name in ("p1", "p2"):
        await asyncio.to_thread(request_json, setup, "POST", HTTPPROXY_PATH, body=_proxy(name))
    options = StatusWritingOptions(
        leader_election_lease_duration=1.5,
        leader_election_renew_deadline=1.0,
        leader_election_retry_period=0.2,
        ingress_status_address="192.0.2.1",  # no Envoy Service to watch here
    )
    replicas = []
    for name in ("one", "two"):
        pipeline = SnapshotHandler.create(PluginHost.load(["httpproxy"]), Config())
        for obj in (service, _proxy("p1"), _proxy("p2")):
            pipeline.upsert(obj)
        pipeline.rebuild()
        api = api_client_for(kmock, user_agent=f"cpx-{name}")
        writing = start_status_writing(api, pipeline, attrs.evolve(options, identity=name), Metrics())
        writing.submit(pipeline.changed_statuses())
        replicas.append((name, pipeline, writing))

    def writers() -> set[str]:
        return {
            r.headers.get("User-Agent", "")
            for r in kmock
            if r.method == "PATCH" and r.url.path.endswith("/status")
        }

    def written(name: str) -> bool:
        obj = kmock.objects["projectcontour.io/v1/httpproxies", "default", name]
        state: str | None = obj.get("status", {}).get("currentStatus")
        return state == "valid"

    try:
        await until(lambda: written("p1") and written("p2"))
        first = writers()
        assert len(first) == 1  # the leader's requests only
        leader_name = first.pop().removeprefix("cpx-")
        leader = next(r for r in replicas if r[0] == leader_name)
        follower = next(r for r in replicas if r[0] != leader_name)

        await leader[2].stop()  # releases the Lease
        assert follower[2].elector is not None
        await until(lambda: bool(follower[2].elector and follower[2].elector.is_leader), timeout=3)
        # A change both replicas see (a port that does not exist): only the new leader writes it.
        for _name, pipeline, writing in replicas:
            pipeline.upsert(_proxy("p2", port=81))
            pipeline.rebuild()
            writing.submit(pipeline.changed_statuses())
        await until(lambda: not written("p2"))
        assert writers() == {f"cpx-{leader_name}", f"cpx-{follower[0]}"}
        after = [
            r.headers.get("User-Agent")
            for r in kmock
            if r.method == "PATCH" and r.url.path.endswith("/p2/status")
        ]
        assert after[-1] == f"cpx-{follower[0]}"
    finally:
        for _name, _pipeline, writing in replicas:
            await writing.stop()
