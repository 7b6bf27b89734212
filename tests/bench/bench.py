#!/usr/bin/env python3
"""cpx benchmark: translation time, memory, incremental changes and change-to-Envoy latency.

    .venv/bin/python tests/bench/bench.py [--sizes 1000,10000] [--json] [--skip-envoy]

Not a test: it prints a table (or JSON with ``--json``) and never fails on a number.  See
``tests/bench/README.md`` for what each figure means.  Sub-measurements that need a clean process
(memory) run in a child interpreter of this same script (``--child-memory``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import http.client
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

SHAPES = ("hosts", "paths")
# "hosts": N Ingresses, each with its own host, one path, its own Service + EndpointSlice.
# "paths": N Ingresses on one shared host, one distinct path each, own Service + EndpointSlice.
SHARED_HOST = "shared.example.com"
NAMESPACE = "bench"

try:
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover
    _Dumper = yaml.SafeDumper


# -- objects -----------------------------------------------------------------------------------


def service(i: int, target_port: int = 8080) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": NAMESPACE, "resourceVersion": "1"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": target_port, "protocol": "TCP"}]},
    }


def endpoint_slice(i: int, port: int = 8080, address: str = "127.0.0.1", rv: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"svc-{i}-1",
            "namespace": NAMESPACE,
            "resourceVersion": rv,
            "labels": {"kubernetes.io/service-name": f"svc-{i}"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


def ingress(
    i: int,
    shape: str,
    *,
    host: str | None = None,
    path: str | None = None,
    rv: str = "1",
    service_index: int | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    if host is None:
        host = SHARED_HOST if shape == "paths" else f"host-{i}.example.com"
    if path is None:
        path = f"/p-{i}" if shape == "paths" else "/"
    svc = i if service_index is None else service_index
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name or f"ing-{i}", "namespace": NAMESPACE, "resourceVersion": rv},
        "spec": {
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": path,
                                "pathType": "Prefix",
                                "backend": {"service": {"name": f"svc-{svc}", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }


def objects(n: int, shape: str, target_port: int = 8080) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(service(i, target_port))
        out.append(endpoint_slice(i, target_port))
        out.append(ingress(i, shape))
    return out


# -- helpers -----------------------------------------------------------------------------------


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS / VmHWM in bytes from /proc (Linux)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p90(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def new_pipeline() -> Any:
    from cpx.config import Config
    from cpx.plugins import PluginHost
    from cpx.snapshot import SnapshotHandler

    return SnapshotHandler.create(PluginHost.load(["ingress"]), Config())


def load(pipeline: Any, objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        pipeline.upsert(obj)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- in-process benchmarks ----------------------------------------------------------------------


def bench_translation(n: int, shape: str, runs: int) -> dict[str, Any]:
    """Fresh pipeline per run: insert every object, then one full rebuild()."""
    inserts, rebuilds, totals = [], [], []
    snap = None
    for _ in range(runs):
        objs = objects(n, shape)
        pipeline = new_pipeline()
        gc.collect()
        t0 = time.perf_counter()
        load(pipeline, objs)
        t1 = time.perf_counter()
        snap = pipeline.rebuild()
        t2 = time.perf_counter()
        inserts.append(t1 - t0)
        rebuilds.append(t2 - t1)
        totals.append(t2 - t0)
        del pipeline, objs
    counts = {k.rsplit(".", 1)[-1]: len(v.resources) for k, v in snap.types.items()} if snap else {}
    return {
        "insert_s": median(inserts),
        "rebuild_s": median(rebuilds),
        "total_s": median(totals),
        "runs": runs,
        "resources": counts,
    }


def bench_changes(n: int, shape: str, changes: int) -> dict[str, Any]:
    """One built pipeline; then single-object changes, each followed by what serve does."""
    pipeline = new_pipeline()
    load(pipeline, objects(n, shape))
    pipeline.rebuild()
    pipeline.rebuild()  # warm: the steady state of a running server
    ingress_times, new_times, slice_times, noop_times = [], [], [], []
    for k in range(changes):
        i = (k * 7919) % n
        # A modified Ingress: same name, new path (and host for "hosts") and resourceVersion.
        obj = ingress(
            i,
            shape,
            rv=f"c{k}",
            path=f"/changed-{k}",
            host=None if shape == "paths" else f"changed-{k}.example.com",
        )
        t0 = time.perf_counter()
        needed = pipeline.upsert(obj)
        if needed:
            pipeline.rebuild()
        ingress_times.append(time.perf_counter() - t0)
    for k in range(changes):
        # A new Ingress next to the existing ones (an existing Service).
        obj = ingress(n + k, shape, service_index=k % n, rv="1")
        t0 = time.perf_counter()
        if pipeline.upsert(obj):
            pipeline.rebuild()
        new_times.append(time.perf_counter() - t0)
    for k in range(changes):
        i = (k * 7919) % n
        obj = endpoint_slice(i, address=f"10.1.{k // 250}.{k % 250 + 1}", rv=f"c{k}")
        t0 = time.perf_counter()
        pipeline.upsert(obj)
        pipeline.endpoints_changed([(NAMESPACE, f"svc-{i}")])
        slice_times.append(time.perf_counter() - t0)
    for _ in range(changes):
        t0 = time.perf_counter()
        pipeline.rebuild()
        noop_times.append(time.perf_counter() - t0)
    return {
        "ingress_change_s": median(ingress_times),
        "ingress_change_p90_s": p90(ingress_times),
        "ingress_add_s": median(new_times),
        "slice_change_s": median(slice_times),
        "slice_change_p90_s": p90(slice_times),
        "noop_rebuild_s": median(noop_times),
        "changes": changes,
    }


def child_memory(n: int, shape: str) -> dict[str, Any]:
    """Runs in a fresh interpreter: RSS growth of one full build, then tracemalloc's peak."""
    new_pipeline()  # imports and plugin loading are not part of the figure
    objs = objects(n, shape)
    gc.collect()
    before = proc_status()
    pipeline = new_pipeline()
    load(pipeline, objs)
    pipeline.rebuild()
    after = proc_status()
    result = {
        "rss_before_bytes": before.get("VmRSS", 0),
        "rss_after_bytes": after.get("VmRSS", 0),
        "rss_hwm_bytes": after.get("VmHWM", 0),
        "rss_delta_bytes": after.get("VmHWM", 0) - before.get("VmRSS", 0),
    }
    del pipeline
    gc.collect()
    tracemalloc.start()
    pipeline = new_pipeline()
    load(pipeline, objs)
    pipeline.rebuild()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result["tracemalloc_peak_bytes"] = peak
    result["tracemalloc_retained_bytes"] = current
    return result


def bench_memory(n: int, shape: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child-memory", str(n), shape],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


# -- change to Envoy ---------------------------------------------------------------------------


@contextlib.contextmanager
def cpx_serve(manifests: Path, workdir: Path, timeout: float) -> Iterator[Any]:
    from cpx.testing.cpxproc import CpxProcess

    runner = CpxProcess(manifests, workdir, plugins=["ingress"], start_timeout=timeout, log_level="warning")
    runner.start()
    try:
        yield runner
    finally:
        runner.stop(timeout=30)


def write_atomic(path: Path, docs: list[dict[str, Any]]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        yaml.dump_all(docs, fh, Dumper=_Dumper, sort_keys=False)
    os.replace(tmp, path)


def probe(port: int, host: str, timeout: float = 1.0) -> bool:
    """One GET through Envoy: True when it answered 200 from the echo backend for ``host``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/", headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            return False
        return json.loads(body).get("headers", {}).get("host") == host  # type: ignore[no-any-return]
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def wait_until(check: Callable[[], bool], timeout: float, interval: float) -> float | None:
    start = time.perf_counter()
    deadline = start + timeout
    while True:
        if check():
            return time.perf_counter() - start
        if time.perf_counter() > deadline:
            return None
        time.sleep(interval)


def bench_converge(n: int, iterations: int, interval: float) -> dict[str, Any]:
    from cpx.testing import EchoServer, EnvoyProcess

    with tempfile.TemporaryDirectory(prefix="cpx-bench-") as tmp, EchoServer("echo") as echo:
        root = Path(tmp)
        manifests = root / "manifests"
        manifests.mkdir()
        objs = objects(n, "hosts", target_port=echo.port)
        chunk = 3000
        for offset in range(0, len(objs), chunk):
            write_atomic(manifests / f"base-{offset // chunk:04d}.yaml", objs[offset : offset + chunk])
        del objs
        t0 = time.perf_counter()
        with cpx_serve(manifests, root / "cpx", timeout=300) as cpx:
            cpx_ready = time.perf_counter() - t0
            envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=root / "envoy")
            with envoy:
                first = wait_until(lambda: probe(cpx.http_port, f"host-{n - 1}.example.com"), 300, 0.05)
                envoy_ready = time.perf_counter() - t0
                if first is None:
                    raise RuntimeError(f"Envoy never served the initial routes\n{envoy.log_text()[-2000:]}")
                rss_serve = proc_status(cpx.proc.pid).get("VmRSS", 0)
                rss_envoy = proc_status(envoy.proc.pid).get("VmRSS", 0) if envoy.proc else 0
                samples: list[float] = []
                failures = 0
                first_change = float("nan")
                probe_file = manifests / "probe.yaml"
                # One extra change first, reported on its own: the first route update after the
                # initial configuration is much slower than later ones (mostly inside Envoy).
                for k in range(iterations + 1):
                    time.sleep(0.7)  # isolated changes: past the 500 ms holdoff maximum
                    host = f"probe-{k}.example.com"
                    doc = ingress(n + 1, "hosts", host=host, service_index=k % n, name="probe", rv=f"p{k}")
                    start = time.perf_counter()
                    write_atomic(probe_file, [doc])
                    took = wait_until(functools.partial(probe, cpx.http_port, host, 0.5), 30, interval)
                    if took is None:
                        failures += 1
                    elif k == 0:
                        first_change = time.perf_counter() - start
                    else:
                        samples.append(time.perf_counter() - start)
                rss_serve_after = proc_status(cpx.proc.pid)
    return {
        "median_s": median(samples),
        "p90_s": p90(samples),
        "min_s": min(samples) if samples else float("nan"),
        "max_s": max(samples) if samples else float("nan"),
        "samples": len(samples),
        "failures": failures,
        "first_change_s": first_change,
        "samples_s": samples,
        "cpx_ready_s": cpx_ready,
        "envoy_first_route_s": envoy_ready,
        "cpx_rss_bytes": rss_serve,
        "cpx_rss_after_bytes": rss_serve_after.get("VmRSS", 0),
        "cpx_hwm_bytes": rss_serve_after.get("VmHWM", 0),
        "envoy_rss_bytes": rss_envoy,
    }


# -- output ------------------------------------------------------------------------------------


def ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 1000:.1f} ms"


def mib(value: int) -> str:
    return f"{value / 2**20:.0f} MiB"


def table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, ...]] = []
    header = ("metric", *[f"{shape} {n}" for n, shape in results["cases"]])
    cases = results["cases"]

    def row(label: str, get: Callable[[dict[str, Any]], str]) -> None:
        cells = []
        for n, shape in cases:
            data = results["by_case"].get(f"{shape}:{n}", {})
            try:
                cells.append(get(data))
            except (KeyError, TypeError):
                cells.append("-")
        rows.append((label, *cells))

    row("insert all objects", lambda d: ms(d["translation"]["insert_s"]))
    row("full rebuild()", lambda d: ms(d["translation"]["rebuild_s"]))
    row("insert + rebuild", lambda d: ms(d["translation"]["total_s"]))
    row("tracemalloc peak", lambda d: mib(d["memory"]["tracemalloc_peak_bytes"]))
    row("RSS growth (HWM - before)", lambda d: mib(d["memory"]["rss_delta_bytes"]))
    row("RSS after build (process)", lambda d: mib(d["memory"]["rss_after_bytes"]))
    row("changed Ingress + rebuild (med)", lambda d: ms(d["changes"]["ingress_change_s"]))
    row("changed Ingress + rebuild (p90)", lambda d: ms(d["changes"]["ingress_change_p90_s"]))
    row("new Ingress + rebuild (med)", lambda d: ms(d["changes"]["ingress_add_s"]))
    row("EndpointSlice change (med)", lambda d: ms(d["changes"]["slice_change_s"]))
    row("rebuild, nothing changed (med)", lambda d: ms(d["changes"]["noop_rebuild_s"]))
    row("change -> Envoy 200 (median)", lambda d: ms(d["converge"]["median_s"]))
    row("change -> Envoy 200 (p90)", lambda d: ms(d["converge"]["p90_s"]))
    row("  samples / failures", lambda d: f"{d['converge']['samples']} / {d['converge']['failures']}")
    row("  first change after start", lambda d: ms(d["converge"]["first_change_s"]))
    row("cpx serve ready", lambda d: ms(d["converge"]["cpx_ready_s"]))
    row("Envoy serves all routes", lambda d: ms(d["converge"]["envoy_first_route_s"]))
    row("cpx serve RSS", lambda d: mib(d["converge"]["cpx_rss_bytes"]))
    row("cpx serve RSS peak (HWM)", lambda d: mib(d["converge"]["cpx_hwm_bytes"]))
    row("Envoy RSS", lambda d: mib(d["converge"]["envoy_rss_bytes"]))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in (header, *rows)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated route counts")
    parser.add_argument(
        "--shapes", default="hosts,paths", help="hosts (1 host per Ingress), paths (1 host x N paths)"
    )
    parser.add_argument("--runs", type=int, default=3, help="full translations per case (median)")
    parser.add_argument("--changes", type=int, default=20, help="single-object changes per case (median)")
    parser.add_argument("--iterations", type=int, default=10, help="change-to-Envoy samples per size")
    parser.add_argument("--poll", type=float, default=0.005, help="Envoy polling interval in seconds")
    parser.add_argument("--skip-envoy", action="store_true", help="no cpx serve / Envoy convergence run")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--json", action="store_true", help="machine-readable results on stdout")
    parser.add_argument("--child-memory", nargs=2, metavar=("N", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child_memory:
        print(json.dumps(child_memory(int(args.child_memory[0]), args.child_memory[1])))
        return

    sizes = [int(s) for s in args.sizes.split(",") if s]
    shapes = [s for s in args.shapes.split(",") if s]
    for shape in shapes:
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r}")
    results: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "cases": [(n, shape) for n in sizes for shape in shapes],
        "by_case": {},
    }
    started = time.perf_counter()
    for n in sizes:
        for shape in shapes:
            case: dict[str, Any] = {}
            results["by_case"][f"{shape}:{n}"] = case
            log(f"[{time.perf_counter() - started:6.1f}s] {shape} {n}: translation")
            case["translation"] = bench_translation(n, shape, args.runs)
            if not args.skip_memory:
                log(f"[{time.perf_counter() - started:6.1f}s] {shape} {n}: memory")
                case["memory"] = bench_memory(n, shape)
            log(f"[{time.perf_counter() - started:6.1f}s] {shape} {n}: single changes")
            case["changes"] = bench_changes(n, shape, args.changes)
            if shape == "hosts" and not args.skip_envoy:
                log(f"[{time.perf_counter() - started:6.1f}s] {shape} {n}: change -> Envoy")
                case["converge"] = bench_converge(n, args.iterations, args.poll)
    results["elapsed_s"] = time.perf_counter() - started
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(table(results))
        print(f"\n(python {results['python']}, {results['cpus']} CPUs, {results['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
