#!/usr/bin/env python3
"""In-process rebuild after one changed route: HTTPRoutes against the same routes as HTTPProxies.

    .venv/bin/python tests/bench/route_change_bench.py [--count 1000] [--changes 15]
        [--kinds httpproxy,httproute] [--json]

Not a test: it prints figures and never fails on them.  Per kind, N objects as
``translate_bench.py`` writes them with one path each (one host, one route, one Service and
EndpointSlice each; HTTPRoutes attach to one Gateway listener on port 80 at the default address,
which shares ``ingress_http``), fed to one ``SnapshotHandler`` with that kind's plugin.  Measured
(wall-clock and process CPU time, minimum and median):

- full build: ``upsert`` of every object, then the first ``rebuild()`` (median of ``--runs``);
- one change: ``upsert`` of one object whose path changed, then ``rebuild()`` (DAG, xDS caches,
  statuses), the path ``cpx serve`` takes on a change; ``--changes`` samples over the table.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpx import Config
from cpx.testing import PluginHost, SnapshotHandler

sys.path.insert(0, str(Path(__file__).parent))
import translate_bench  # the same objects as the whole-process bench

PLUGINS = {"httpproxy": "httpproxy", "httproute": "gatewayapi", "ingress": "ingress"}


def objects(kind: str, count: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = list(translate_bench.GATEWAY) if kind == "httproute" else []
    for i in range(count):
        docs += translate_bench.FILES[kind](i, 1, 1)
    return docs


def moved(obj: dict[str, Any], path: str) -> dict[str, Any]:
    """``obj`` (the route of one host) with its one path changed to ``path``."""
    obj = copy.deepcopy(obj)
    spec = obj["spec"]
    if obj["kind"] == "HTTPRoute":
        spec["rules"][0]["matches"][0]["path"]["value"] = path
    elif obj["kind"] == "HTTPProxy":
        spec["routes"][0]["conditions"][0]["prefix"] = path
    else:
        spec["rules"][0]["http"]["paths"][0]["path"] = path
    obj["metadata"]["resourceVersion"] = path
    return obj


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    walls, cpus = zip(*samples, strict=True)
    return {
        "wall_min_ms": min(walls) * 1e3,
        "wall_median_ms": statistics.median(walls) * 1e3,
        "cpu_min_ms": min(cpus) * 1e3,
        "cpu_median_ms": statistics.median(cpus) * 1e3,
    }


def full_build(host: PluginHost, docs: list[dict[str, Any]]) -> tuple[SnapshotHandler, tuple[float, float]]:
    gc.collect()
    start = clock()
    handler = SnapshotHandler.create(host, Config())
    for doc in docs:
        handler.upsert(copy.deepcopy(doc), validate=True)
    handler.rebuild()
    return handler, since(start)


def measure(kind: str, count: int, changes: int, runs: int) -> dict[str, Any]:
    host = PluginHost.load([PLUGINS[kind]])
    docs = objects(kind, count)
    routes = [doc for doc in docs if doc["kind"] in ("HTTPRoute", "HTTPProxy", "Ingress")]
    builds = [full_build(host, docs) for _ in range(runs)]
    handler = builds[-1][0]
    handler.rebuild()  # warm

    def change(n: int) -> Callable[[], object]:
        obj = moved(routes[n * len(routes) // changes], f"/change-{n}")
        return lambda: handler.upsert(obj, validate=True)

    samples = []
    for n in range(changes):
        apply = change(n)
        gc.collect()
        start = clock()
        apply()
        handler.rebuild()
        samples.append(since(start))
    return {"kind": kind, "count": count, "full": summary([b[1] for b in builds]), "change": summary(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=15)
    parser.add_argument("--runs", type=int, default=3, help="full builds per kind")
    parser.add_argument("--kinds", default="httpproxy,httproute")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(kind, args.count, args.changes, args.runs) for kind in args.kinds.split(",")]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.count} routes; wall / CPU ms, median (min)")
    for r in results:
        for row in ("full", "change"):
            f = r[row]
            print(
                f"  {r['kind']:10} {row:7} {f['wall_median_ms']:8.1f} ({f['wall_min_ms']:.1f}) wall  "
                f"{f['cpu_median_ms']:8.1f} ({f['cpu_min_ms']:.1f}) CPU"
            )


if __name__ == "__main__":
    main()
