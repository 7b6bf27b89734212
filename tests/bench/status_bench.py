#!/usr/bin/env python3
"""Status-writing benchmark: how long the status updater takes to write N HTTPProxies' status.

    .venv/bin/python tests/bench/status_bench.py [--count 3000] [--concurrency 16] [--json]

Not a test: it prints figures and never fails on them.  The emulated API server (kmock's
KubernetesEmulator) runs in a child process of this script (``--child-emulator``) holding the N
HTTPProxies; this process computes their status with the real pipeline (httpproxy plugin) and
times :class:`cpx.status.updater.StatusUpdater` writing them all (GET + merge + PATCH of
``/status`` each), then a full rewrite where nothing changed (GET + merge, no PATCH).  See
``tests/bench/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

NAMESPACE = "bench"


def httpproxy(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": f"proxy-{i}", "namespace": NAMESPACE, "generation": 1},
        "spec": {
            "virtualhost": {"fqdn": f"host-{i}.example.com"},
            "routes": [{"conditions": [{"prefix": "/"}], "services": [{"name": f"svc-{i}", "port": 80}]}],
        },
    }


def service(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    }


# -- the emulator (child process) ----------------------------------------------------------------


def _fast(emulator_cls: Any, latency: float) -> Any:
    """kmock's emulator costs O(requests served so far + objects stored) per request: it matches
    each request against its reactions by filtering every request it remembers, and finds an
    object by scanning every stored one.  At thousands of objects that, not cpx, would be what is
    measured (6,000 requests take minutes).  This subclass serves a GET or PATCH of one named
    object directly (the same store, the same merge patch, the same watch event, the same 404) and
    forgets requests; everything else goes through kmock as usual.  ``latency`` (seconds) delays
    each such answer, as a network and a real API server's storage would."""
    import aiohttp.web
    import attrs
    import kmock

    @attrs.define(kw_only=True)
    class FastEmulator(emulator_cls):  # type: ignore[misc]  # kmock has no type hints
        async def _handle(self, request: Any) -> Any:
            del self._requests[:-1]  # keep only this one: its reactions are matched against it
            direct = (kmock.action.FETCH, kmock.action.UPDATE)
            if request.resource is None or request.name is None or request.action not in direct:
                return await super()._handle(request)
            async with self._lock:
                obj = self._objects._objects.get((request.resource, request.namespace, request.name))
                if obj is None or obj.deleted:
                    raise kmock.KubernetesObjectNotFoundError()
                if request.action == kmock.action.UPDATE:
                    obj.patch(request.data)
                    await self._buses[request.resource].put({"type": "MODIFIED", "object": obj.raw})
                raw = obj.raw
            if latency:
                await asyncio.sleep(latency)
            return aiohttp.web.json_response(raw)

    return FastEmulator


def child_emulator(count: int, plain: bool, latency: float) -> None:
    import kmock

    async def main() -> None:
        cls = kmock.KubernetesEmulator if plain else _fast(kmock.KubernetesEmulator, latency)
        async with cls() as emulator, kmock.Server(emulator) as server:
            for i in range(count):
                emulator.objects["projectcontour.io/v1/httpproxies", NAMESPACE, f"proxy-{i}"] = httpproxy(i)
            print(str(server.url).rstrip("/"), flush=True)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin

    asyncio.run(main())


# -- the measurement -----------------------------------------------------------------------------


def computed_statuses(count: int) -> tuple[Any, dict[Any, Any], float]:
    from cpx.config import Config
    from cpx.plugins import PluginHost
    from cpx.snapshot import SnapshotHandler

    started = time.perf_counter()
    pipeline = SnapshotHandler.create(PluginHost.load(["httpproxy"]), Config())
    for i in range(count):
        pipeline.upsert(service(i))
        pipeline.upsert(httpproxy(i))
    pipeline.rebuild()
    statuses = pipeline.changed_statuses()
    return pipeline, statuses, time.perf_counter() - started


async def measure(url: str, count: int, concurrency: int) -> dict[str, Any]:
    from kubernetes import client

    from cpx.ops.metrics import Metrics
    from cpx.sources.kube.rest import request_json
    from cpx.status.updater import StatusUpdater

    pipeline, statuses, build_seconds = computed_statuses(count)
    configuration = client.Configuration(host=url)
    configuration.connection_pool_maxsize = max(concurrency, 10)
    api = client.ApiClient(configuration)
    metrics = Metrics()
    updater = StatusUpdater(api, pipeline.status_writers, metrics, concurrency=concurrency)
    task = asyncio.create_task(updater.run())
    updater.start_writing()
    try:
        started = time.perf_counter()
        updater.submit(statuses)
        await updater.idle()
        first = time.perf_counter() - started

        started = time.perf_counter()
        updater.rewrite_all()
        await updater.idle()
        noop = time.perf_counter() - started
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    def sample(name: str) -> float:
        return metrics.registry.get_sample_value(name, {"kind": "HTTPProxy"}) or 0.0

    listed = await asyncio.to_thread(
        request_json, api, "GET", f"/apis/projectcontour.io/v1/namespaces/{NAMESPACE}/httpproxies"
    )
    valid = sum(1 for item in listed["items"] if (item.get("status") or {}).get("currentStatus") == "valid")
    return {
        "objects": count,
        "concurrency": concurrency,
        "compute_seconds": round(build_seconds, 3),
        "write_seconds": round(first, 3),
        "writes_per_second": round(count / first, 1),
        "noop_rewrite_seconds": round(noop, 3),
        "updates": sample("contour_status_update_total"),
        "noops": sample("contour_status_update_noop_total"),
        "failed": sample("contour_status_update_failed_total"),
        "conflicts": sample("contour_status_update_conflict_total"),
        "valid_in_api": valid,
    }


def run(count: int, concurrency: int, plain: bool, latency_ms: float) -> dict[str, Any]:
    args = [
        sys.executable,
        __file__,
        "--child-emulator",
        "--count",
        str(count),
        "--latency-ms",
        str(latency_ms),
    ]
    if plain:
        args.append("--plain-emulator")
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url:
            raise SystemExit("the emulator did not start")
        result = asyncio.run(measure(url, count, concurrency))
        result["emulator"] = "kmock as is" if plain else "kmock, direct GET/PATCH"
        result["latency_ms"] = 0 if plain else latency_ms
        return result
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--concurrency", default="16", help="comma-separated: one run each")
    parser.add_argument(
        "--plain-emulator", action="store_true", help="kmock as is (quadratic: use --count 300)"
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="added to each GET/PATCH answer (not with --plain-emulator)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child-emulator", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_emulator:
        child_emulator(args.count, args.plain_emulator, args.latency_ms / 1000)
        return
    results = []
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        print(f"writing {args.count} HTTPProxy statuses, concurrency {concurrency} ...", file=sys.stderr)
        results.append(run(args.count, concurrency, args.plain_emulator, args.latency_ms))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    first = results[0]
    print(
        f"status writing, {os.cpu_count()} CPUs, emulator in a child process ({first['emulator']}, "
        f"{first['latency_ms']:g} ms added per request)"
    )
    print(
        f"{'objects':>8} {'workers':>8} {'write all':>10} {'writes/s':>9} {'no-op rewrite':>14} {'failed':>7}"
    )
    for r in results:
        print(
            f"{r['objects']:>8} {r['concurrency']:>8} {r['write_seconds']:>9.2f}s"
            f" {r['writes_per_second']:>9.0f} {r['noop_rewrite_seconds']:>13.2f}s {r['failed']:>7.0f}"
        )
    for r in results:
        if r["valid_in_api"] != r["objects"] or r["failed"]:
            print(f"WARNING: {r['valid_in_api']} of {r['objects']} valid in the API, {r['failed']} failed")


if __name__ == "__main__":
    main()
