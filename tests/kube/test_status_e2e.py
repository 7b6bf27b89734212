"""Two ``cpx serve --kubeconfig`` replicas, one Lease, against the emulated API server.

Only the leader writes HTTPProxy status (with the Envoy Service's address); when it stops it
releases the Lease, the other replica takes over and writes what changes from then on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cpx.testing.cpxproc import CpxProcess
from cpx.testing.kubeapi import KubeAPI

FAST_ELECTION = [
    "--leader-election-lease-duration", "3s",
    "--leader-election-renew-deadline", "2s",
    "--leader-election-retry-period", "200ms",
]  # fmt: skip
PROXY_PATH = "/apis/projectcontour.io/v1/namespaces/default/httpproxies/p"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/projectcontour/leases/leader-elect"


def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def api() -> Iterator[KubeAPI]:
    with KubeAPI() as api:
        yield api


def _envoy_service(ip: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "envoy", "namespace": "projectcontour"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ip}]}},
    }


def test_only_the_leader_writes_status_and_the_follower_takes_over(api: KubeAPI, tmp_path: Path) -> None:
    api.create(
        _envoy_service("192.0.2.10"),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s", "namespace": "default"},
            "spec": {"ports": [{"port": 80}]},
        },
        {
            "apiVersion": "projectcontour.io/v1",
            "kind": "HTTPProxy",
            "metadata": {"name": "p", "namespace": "default", "generation": 1},
            "spec": {
                "virtualhost": {"fqdn": "p.example.com"},
                "routes": [{"services": [{"name": "s", "port": 80}]}],
            },
        },
    )
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    replicas = [
        CpxProcess(
            [],
            tmp_path,
            name=f"cpx-{i}",
            plugins=["httpproxy"],
            extra_args=["--kubeconfig", str(kubeconfig), *FAST_ELECTION],
        )
        for i in range(2)
    ]
    try:
        for replica in replicas:
            replica.start(wait=False)
        for replica in replicas:
            replica.wait_ready()

        def status() -> dict[str, Any]:
            got: dict[str, Any] = api.request("GET", PROXY_PATH).get("status") or {}
            return got

        until(lambda: status().get("loadBalancer"))
        assert status()["currentStatus"] == "valid"
        assert status()["loadBalancer"] == {"ingress": [{"ip": "192.0.2.10"}]}

        def leaders() -> list[CpxProcess]:
            return [r for r in replicas if r.running and r.metric("leader_election_master_status") == 1]

        leader = until(leaders)
        assert len(leader) == 1
        leader, follower = leader[0], next(r for r in replicas if r is not leader[0])
        assert follower.metric("contour_status_update_total", kind="HTTPProxy") == 0
        assert leader.metric("contour_status_update_success_total", kind="HTTPProxy") >= 1
        holder = api.request("GET", LEASE_PATH)["spec"]["holderIdentity"]

        assert leader.stop() == 0  # SIGTERM: releases the Lease on the way out
        until(lambda: leaders() == [follower], timeout=5)
        assert api.request("GET", LEASE_PATH)["spec"]["holderIdentity"] not in ("", holder)

        # The new leader writes what changes: the Envoy Service's new address.
        api.patch(
            _envoy_service(""), {"status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}}
        )
        until(lambda: status().get("loadBalancer") == {"ingress": [{"hostname": "lb.example.com"}]})
        assert follower.metric("contour_status_update_success_total", kind="HTTPProxy") >= 1
    finally:
        for replica in replicas:
            if replica.running:
                replica.kill()
