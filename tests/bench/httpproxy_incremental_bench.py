#!/usr/bin/env python3
"""Incremental HTTPProxy benchmark: one changed HTTPProxy among N, in process.

    .venv/bin/python tests/bench/httpproxy_incremental_bench.py [--count 10000] [--changes 15] [--json]
        [--serve]

Not a test: it prints figures and never fails on them.  N root HTTPProxies (one fqdn and one route
each, every tenth including a child proxy) with N Services and EndpointSlices, in namespace
``bench``.  Measured, each as minimum and median of ``--changes`` samples, in wall-clock and in
the process's CPU time (steadier on a shared machine):

- DAG build: ``Builder([listeners, httpproxy]).build(source)`` after one HTTPProxy changed, with
  the processor's memo kept (incremental) and reset before each build (what every build did
  before the processor was incremental);
- whole pipeline: ``SnapshotHandler.upsert`` of one changed HTTPProxy, then ``rebuild()`` (DAG,
  xDS caches, statuses), the path ``cpx serve`` takes on a change.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from cpx_httpproxy import testing as hp
from cpx_httpproxy.kinds import HTTPPROXY
from cpx_httpproxy.processor import HTTPProxyProcessor

from cpx import Config, KubeObject, WatchSpec, ingress_class_accepts
from cpx.testing import Builder, ListenerProcessor, PluginHost, SnapshotHandler, SourceCache

NAMESPACE = "bench"


def proxy(i: int, version: int = 1, prefix: str = "/") -> KubeObject:
    """Root ``proxy-<i>`` for ``host-<i>.example.com``: one route to ``svc-<i>``, and an include
    of ``child-<i>`` for every tenth one."""
    includes = [hp.include(f"child-{i}", hp.prefix("/child"))] if i % 10 == 0 else []
    obj = hp.root(
        f"proxy-{i}",
        f"host-{i}.example.com",
        hp.route(hp.prefix(prefix), services=[hp.service(f"svc-{i}")]),
        namespace=NAMESPACE,
        includes=includes,
    )
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


def objects(count: int, address: str | None = None, port: int = 8080) -> list[KubeObject]:
    """Every root, child, Service and EndpointSlice (endpoints at ``address``: one per Service
    when None)."""
    out: list[KubeObject] = []
    for i in range(count):
        meta = {"name": f"svc-{i}", "namespace": NAMESPACE}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": meta,
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
        out.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    **meta,
                    "name": f"svc-{i}-1",
                    "labels": {"kubernetes.io/service-name": f"svc-{i}"},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address or f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"]}],
                "ports": [{"name": "http", "port": port}],
            }
        )
        out.append(proxy(i))
        if i % 10 == 0:
            out.append(
                hp.child(f"child-{i}", hp.route(services=[hp.service(f"svc-{i}")]), namespace=NAMESPACE)
            )
    return out


# Each sample as (wall, CPU) milliseconds: on a shared machine the process's CPU time is the
# steadier measure of cpx's own work (the build is single-threaded).
Samples = list[tuple[float, float]]


def timed(samples: int, change: Callable[[int], None], measured: Callable[[], object]) -> Samples:
    out = []
    for n in range(samples):
        change(n)
        start, cpu = time.perf_counter(), time.process_time()
        measured()
        out.append(((time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000))
    return out


def dag_builds(count: int, samples: int, *, reset: bool) -> Samples:
    watch = WatchSpec(gvk=HTTPPROXY, accept=ingress_class_accepts)
    source = SourceCache(watches={HTTPPROXY.group_kind: watch})
    for obj in objects(count):
        source.insert(obj)
    config = Config()
    processor = HTTPProxyProcessor.from_config(config)
    builder = Builder([("listeners", ListenerProcessor(config)), ("httpproxy", processor)])
    builder.build(source)

    def change(n: int) -> None:
        source.insert(proxy(count // 2 + n, version=n + 2, prefix=f"/v{n}"))
        if reset:
            processor.memo.reset()

    return timed(samples, change, lambda: builder.build(source))


def pipeline_rebuilds(count: int, samples: int) -> Samples:
    pipeline = SnapshotHandler.create(PluginHost.load(["httpproxy"]), Config())
    for obj in objects(count):
        pipeline.upsert(obj)
    pipeline.rebuild()
    pipeline.rebuild()

    def change(n: int) -> None:
        pipeline.upsert(proxy(count // 2 + n, version=n + 2, prefix=f"/v{n}"))

    return timed(samples, change, pipeline.rebuild)


def serve_startup(count: int) -> dict[str, Any]:
    """``cpx serve`` on ``count`` proxies in manifest files, then Envoy: seconds to each milestone."""
    import tempfile
    from pathlib import Path

    from cpx.testing import EchoServer, EnvoyProcess, http_get
    from cpx.testing.cpxproc import CpxProcess, write_manifest

    def serves(port: int, host: str) -> bool:
        try:
            return http_get(f"http://127.0.0.1:{port}/", host_header=host, timeout=5.0).status == 200
        except OSError:
            return False

    with tempfile.TemporaryDirectory(prefix="cpx-bench-") as tmp, EchoServer("echo") as echo:
        root = Path(tmp)
        docs = objects(count, address="127.0.0.1", port=echo.port)
        chunk = 3000
        for offset in range(0, len(docs), chunk):
            name = f"base-{offset // chunk:04d}.yaml"
            write_manifest(root / "manifests", name, docs[offset : offset + chunk])
        del docs
        cpx = CpxProcess(root / "manifests", root / "cpx", plugins=["httpproxy"], start_timeout=300)
        started = time.perf_counter()
        cpx.start()
        ready = time.perf_counter()
        try:
            with EnvoyProcess.with_xds(cpx.xds_port, workdir=root / "envoy"):
                last = f"host-{count - 1}.example.com"
                while not serves(cpx.http_port, last):
                    if time.perf_counter() - ready > 300:
                        raise SystemExit(f"Envoy never served {last}")
                    time.sleep(0.05)
                served = time.perf_counter()
                rss = _rss_bytes(cpx)
        finally:
            cpx.stop(timeout=30)
    return {
        "cpx_ready_s": round(ready - started, 2),
        "envoy_start_to_last_host_s": round(served - ready, 2),
        "total_s": round(served - started, 2),
        "cpx_rss_mib": round(rss / 2**20, 1),
    }


def _rss_bytes(cpx: Any) -> int:
    with open(f"/proc/{cpx.proc.pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def summary(samples: Samples) -> dict[str, float]:
    wall, cpu = [w for w, _ in samples], [c for _, c in samples]
    return {
        "min_ms": round(min(wall), 1),
        "median_ms": round(statistics.median(wall), 1),
        "cpu_min_ms": round(min(cpu), 1),
        "cpu_median_ms": round(statistics.median(cpu), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help="time cpx serve and Envoy from start instead")
    args = parser.parse_args()
    results: dict[str, Any] = {"count": args.count}
    if args.serve:
        results.update(serve_startup(args.count))
        print(json.dumps(results, indent=2))
        return
    print(f"building {args.count} HTTPProxies ...", file=sys.stderr)
    results["dag_build_incremental"] = summary(dag_builds(args.count, args.changes, reset=False))
    results["dag_build_from_scratch"] = summary(dag_builds(args.count, max(3, args.changes // 3), reset=True))
    results["pipeline_change_rebuild"] = summary(pipeline_rebuilds(args.count, args.changes))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"one changed HTTPProxy among {args.count}      wall min   median    CPU min   median")
    for name in ("dag_build_incremental", "dag_build_from_scratch", "pipeline_change_rebuild"):
        row = results[name]
        wall = f"{row['min_ms']:>8.1f} ms {row['median_ms']:>8.1f} ms"
        print(f"  {name:<32} {wall} {row['cpu_min_ms']:>8.1f} ms {row['cpu_median_ms']:>8.1f} ms")


if __name__ == "__main__":
    main()
