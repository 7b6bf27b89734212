#!/usr/bin/env python3
"""What ``--envoy-validate`` costs: wall time of :meth:`cpx.xds.constraints.envoycheck.EnvoyValidator.check`.

    .venv/bin/python tests/bench/envoycheck_bench.py [--sizes 1000,10000] [--runs 5] [--batch 100] [--json]

Not a test: it prints medians (render = snapshot to static bootstrap in Python; check = render plus
one ``envoy --mode validate`` run; update = check(snapshot, previous) with one Ingress added since
previous) for the examples/ manifests, N-Ingress snapshots built as tests/bench/bench.py builds
them, and a batch of small snapshots in one Envoy run (check_batch)
against the same snapshots checked one by one.  Figures are in docs/design/0009-envoy-validate.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench  # tests/bench/bench.py: the objects and the pipeline
from cpx.config import Config
from cpx.plugins import PluginHost
from cpx.snapshot import SnapshotHandler
from cpx.sources.manifests import expand, parse_file
from cpx.xds.constraints.envoycheck import EnvoyValidator, render_bootstrap
from cpx.xds.resource import Snapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def timed(action: Callable[[], object], runs: int) -> float:
    """Median wall seconds of ``runs`` calls."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def example(name: str) -> Snapshot:
    pipeline = SnapshotHandler.create(PluginHost.load(None), Config())
    for path in expand([EXAMPLES / name]):
        for obj in parse_file(path)[0]:
            if pipeline.accepts(obj):
                pipeline.upsert(obj)
    return pipeline.rebuild()


def ingresses(n: int, shape: str = "hosts", first: int = 0) -> Snapshot:
    pipeline = bench.new_pipeline()
    bench.load(pipeline, bench.objects(n, shape)[3 * first :])
    snapshot: Snapshot = pipeline.rebuild()
    return snapshot


def measure(
    validator: EnvoyValidator, label: str, snapshot: Snapshot, runs: int, previous: Snapshot | None = None
) -> dict[str, Any]:
    assert validator.check(snapshot) is None, label  # a refused snapshot would measure something else
    size = len(render_bootstrap(snapshot).SerializeToString())
    row = {
        "case": label,
        "bootstrap_bytes": size,
        "render_s": timed(lambda: render_bootstrap(snapshot), runs),
        "check_s": timed(lambda: validator.check(snapshot), runs),
    }
    if previous is not None:  # the snapshot as an update of one without its last Ingress
        row["update_check_s"] = timed(lambda: validator.check(snapshot, previous), runs)
    bench.log(f"{label}: {row}")
    return row


def measure_batch(validator: EnvoyValidator, count: int, runs: int) -> dict[str, Any]:
    # Distinct small snapshots (3 Ingresses each, different names), as a fuzzer produces them.
    snapshots = [ingresses(3 * (i + 1), first=3 * i) for i in range(count)]
    assert validator.check_batch(snapshots) == [None] * count
    one_by_one = timed(lambda: [validator.check(s) for s in snapshots], max(1, runs // 2))
    batched = timed(lambda: validator.check_batch(snapshots), runs)
    row = {"case": f"{count} small snapshots", "one_by_one_s": one_by_one, "check_batch_s": batched}
    bench.log(f"batch: {row}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000", help="Ingress counts (comma-separated)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per case (median reported)")
    parser.add_argument("--batch", type=int, default=100, help="snapshots in the batch case (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    validator = EnvoyValidator()
    rows = [
        measure(validator, f"examples/{name}", example(name), args.runs)
        for name in ("quickstart", "ingress", "httpproxy")
    ]
    for n in (int(s) for s in args.sizes.split(",") if s):
        for shape in bench.SHAPES:
            snapshot, previous = ingresses(n, shape), ingresses(n - 1, shape)
            rows.append(measure(validator, f"{n} Ingresses ({shape})", snapshot, args.runs, previous))
    batch = measure_batch(validator, args.batch, args.runs) if args.batch else None
    if args.json:
        json.dump({"checks": rows, "batch": batch}, sys.stdout, indent=2)
        print()
        return
    print(f"{'case':32} {'bootstrap':>10} {'render':>10} {'check':>10} {'update':>10}")
    for row in rows:
        kib = row["bootstrap_bytes"] / 1024
        update = bench.ms(row.get("update_check_s", float("nan")))
        print(
            f"{row['case']:32} {kib:8.0f}KiB {bench.ms(row['render_s']):>10} "
            f"{bench.ms(row['check_s']):>10} {update:>10}"
        )
    if batch:
        print(
            f"{batch['case']}: one by one {bench.ms(batch['one_by_one_s'])}, "
            f"check_batch {bench.ms(batch['check_batch_s'])}"
        )


if __name__ == "__main__":
    main()
