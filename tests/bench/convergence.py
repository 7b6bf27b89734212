#!/usr/bin/env python3
"""Convergence benchmark (issue #10): change-to-Envoy time against the number of routes, with a floor.

    .venv/bin/python tests/bench/convergence.py [--sizes 1000,3000] [--kinds ingress,httpproxy,httproute]
        [--changes 15] [--ads sotw|delta] [--cpx-arg=--flag ...] [--json FILE] [--plot FILE.png]

Not a test: it prints figures and never fails on them.  Per size and kind: N routes (one host and
one route each, as Ingresses, HTTPProxies or HTTPRoutes) with their Services and EndpointSlices on
one loopback echo server.  HTTPRoutes attach to one Gateway whose HTTP listener shares the core's
``ingress_http`` listener (default address, listener port = Envoy port - 8000), as a Gateway's port
80 does in Contour, so every kind is probed on the same Envoy port.  Two runs, one after the
other, each with its own real Envoy:

- cpx: ``cpx serve`` on the manifests; each change atomically rewrites one manifest;
- floor: cpx's own ADS server (``XdsServer``) in this process, fed snapshots translated before
  timing from the same objects with the same options: each change is one ``set_snapshot``.

Each change (after 0.7 s of quiet) either moves one existing host's route to a new path or adds a
new host; the time is from the write (or ``set_snapshot``) until Envoy answers the new path from the
echo server.  See ``tests/bench/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import http.client
import json
import os
import shlex
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import attrs
import yaml
from cpx_httpproxy import testing as hp

from cpx.snapshot import SnapshotHandler
from cpx.testing import EchoServer, EnvoyProcess, backend, free_port
from cpx.testing.cpxproc import CpxProcess
from cpx.xds.resource import Snapshot
from cpx.xds.server.ads import XdsServer
from cpx_ingress.testing import simple_ingress

# kind -> the plugin that serves it
KINDS = {"ingress": "ingress", "httpproxy": "httpproxy", "httproute": "gatewayapi"}
GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY_PORT_OFFSET = 8000  # Contour's Envoy port for a Gateway listener port below 57536
NAMESPACE = "bench"
BASE_PATH = "/base"
QUIET = 0.7  # seconds before each change: past the 500 ms holdoff maximum, so it is built at once
CHUNK = 3000  # objects per base manifest file
STARTUP_TIMEOUT = 1800.0  # 30k clusters: Envoy and cpx take minutes on a busy 2-core machine
CHANGE_TIMEOUT = 60.0

try:
    _DUMPER: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover
    _DUMPER = yaml.SafeDumper


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- workload --------------------------------------------------------------------------------------


def envoy_http_port() -> int:
    """A free port that a Gateway listener port maps to (above 1023 + 8000)."""
    while (port := free_port()) <= 1023 + GATEWAY_PORT_OFFSET:
        pass
    return port


@attrs.frozen
class Change:
    """One measured change: the manifest file it rewrites, its objects, and the request that sees it."""

    measure: str  # "warmup", "path" (an existing host's route moves) or "new" (a new host)
    file: str
    docs: tuple[dict[str, Any], ...]
    host: str
    path: str


@attrs.frozen
class Workload:
    """``size`` routes of one kind (one host each) with their backends, and the changes timed on them."""

    kind: str
    size: int
    changes: int
    echo_port: int
    sweep: int  # hosts checked once ready
    http_port: int = attrs.field(factory=envoy_http_port)  # Envoy's ingress_http port

    def swept_hosts(self) -> list[str]:
        """``sweep`` hosts spread evenly, the first and the last included (every host when there are
        fewer). Not all of them at large sizes: each host answered keeps an upstream connection of
        Envoy's open to the echo server, a thread and a file descriptor in this process."""
        count = min(self.size, self.sweep)
        if count < 2:
            return [self.host(self.size - 1)]
        return [self.host(k * (self.size - 1) // (count - 1)) for k in range(count)]

    def route(self, name: str, host: str, path: str, service: str, version: int) -> dict[str, Any]:
        if self.kind == "ingress":
            obj = simple_ingress(name, [(host, path, service)], namespace=NAMESPACE)
        elif self.kind == "httproute":
            obj = httproute(name, host, path, service, later=name.startswith("new-"))
        else:
            route = hp.route(hp.prefix(path), services=[hp.service(service)])
            obj = hp.root(name, host, route, namespace=NAMESPACE)
        obj["metadata"]["resourceVersion"] = str(version)
        return obj

    def host(self, i: int) -> str:
        return f"host-{i}.example.com"

    def base_route(self, i: int) -> dict[str, Any]:
        return self.route(f"route-{i}", self.host(i), BASE_PATH, f"svc-{i}", 1)

    def changed_indexes(self) -> list[int]:
        """The hosts whose route moves: spread over the table, one per change, plus the warm-up."""
        count = self.changes + 1
        return sorted({k * self.size // count for k in range(count)})

    def base_files(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """The manifests before any change: bulk files, and one small file per host that will change."""
        moving = set(self.changed_indexes())
        docs: list[dict[str, Any]] = gateway(self.http_port) if self.kind == "httproute" else []
        for i in range(self.size):
            docs += backend(f"svc-{i}", self.echo_port, namespace=NAMESPACE)
            if i not in moving:
                docs.append(self.base_route(i))
        for offset in range(0, len(docs), CHUNK):
            yield f"base-{offset // CHUNK:04d}.yaml", docs[offset : offset + CHUNK]
        for i in sorted(moving):
            yield f"route-{i}.yaml", [self.base_route(i)]

    def change_list(self) -> list[Change]:
        """Warm-up first (Envoy's first update after its initial configuration is slow), then the
        path changes, then the new hosts."""
        out: list[Change] = []
        for k, i in enumerate(self.changed_indexes()):
            path = f"/change-{k:03d}"
            doc = self.route(f"route-{i}", self.host(i), path, f"svc-{i}", 2)
            out.append(Change("warmup" if k == 0 else "path", f"route-{i}.yaml", (doc,), self.host(i), path))
        for k in range(self.changes):
            host = f"new-{k}.example.com"
            doc = self.route(f"new-{k}", host, BASE_PATH, f"svc-{k % self.size}", 1)
            out.append(Change("new", f"new-{k}.yaml", (doc,), host, BASE_PATH))
        return out


def gateway(http_port: int) -> list[dict[str, Any]]:
    """The GatewayClass and the Gateway the HTTPRoutes attach to: one HTTP listener at the default
    address on the port Envoy serves as ``http_port`` (the core's ingress_http, shared)."""
    listener = {"name": "http", "protocol": "HTTP", "port": http_port - GATEWAY_PORT_OFFSET}
    return [
        {
            "apiVersion": GATEWAY_API,
            "kind": "GatewayClass",
            "metadata": {"name": "contour"},
            "spec": {"controllerName": "projectcontour.io/gateway-controller"},
        },
        {
            "apiVersion": GATEWAY_API,
            "kind": "Gateway",
            "metadata": {"name": "bench", "namespace": NAMESPACE},
            "spec": {"gatewayClassName": "contour", "listeners": [listener]},
        },
    ]


def httproute(name: str, host: str, path: str, service: str, *, later: bool) -> dict[str, Any]:
    """One hostname, one rule: a path prefix to port 80 of ``service``.  A route added ``later``
    is younger than the base ones, as in a cluster."""
    created = "2026-01-02T00:00:00Z" if later else "2026-01-01T00:00:00Z"
    meta = {"name": name, "namespace": NAMESPACE, "creationTimestamp": created}
    match = {"path": {"type": "PathPrefix", "value": path}}
    rule = {"matches": [match], "backendRefs": [{"name": service, "port": 80}]}
    spec = {"parentRefs": [{"name": "bench"}], "hostnames": [host], "rules": [rule]}
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": meta, "spec": spec}


def write_yaml(folder: Path, name: str, docs: Sequence[dict[str, Any]]) -> None:
    """Atomically: a temporary dotfile (which cpx ignores), then ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        yaml.dump_all(docs, fh, Dumper=_DUMPER, sort_keys=False)
    os.replace(tmp, folder / name)


# -- probing Envoy ---------------------------------------------------------------------------------


def answered(conn: http.client.HTTPConnection, host: str, path: str) -> bool:
    """One GET through Envoy: True when the echo server answered it for ``host``."""
    try:
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            return False
        return bool(json.loads(body).get("headers", {}).get("host") == host)
    except (OSError, ValueError, http.client.HTTPException):
        conn.close()  # reconnects on the next request
        return False


def wait_answered(port: int, host: str, path: str, *, timeout: float, poll: float) -> float | None:
    """Seconds until ``host`` + ``path`` answers (None after ``timeout``), asking every ``poll``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=max(1.0, poll * 20))
    start = time.perf_counter()
    try:
        while not answered(conn, host, path):
            if time.perf_counter() - start > timeout:
                return None
            time.sleep(poll)
        return time.perf_counter() - start
    finally:
        conn.close()


def unserved(port: int, hosts: Sequence[str], timeout: float) -> list[str]:
    """The hosts that do not answer ``BASE_PATH`` within ``timeout`` (one keep-alive connection)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
    deadline = time.monotonic() + timeout
    missing = list(hosts)
    try:
        while missing and time.monotonic() < deadline:
            missing = [host for host in missing if not answered(conn, host, BASE_PATH)]
            if missing:
                time.sleep(0.5)
    finally:
        conn.close()
    return missing


# -- the runs --------------------------------------------------------------------------------------


@attrs.frozen
class Run:
    """What one run (cpx or floor) measured."""

    samples: dict[str, list[float]]  # by measure: seconds from change to answer
    timeouts: int
    ready_s: float  # from start until Envoy answers the last host
    unserved: int  # hosts still not answering after the ready sweep
    clusters: int  # Envoy's active clusters once ready: the same for cpx and the floor
    rss_bytes: int  # cpx serve's (the floor: this process, for reference)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def rss(pid: int | str = "self") -> int:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait_listening(port: int, timeout: float) -> None:
    """Until something accepts TCP connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def start_envoy(xds_port: int, workdir: Path, ads: str) -> EnvoyProcess:
    envoy = EnvoyProcess.with_xds(xds_port, workdir=workdir, xds_api=ads)
    envoy.start_timeout = STARTUP_TIMEOUT
    return envoy.start()


def wait_all(envoy: EnvoyProcess, port: int, work: Workload, started: float) -> tuple[float, int, int]:
    """Ready time (the last host answers), how many hosts then fail the sweep, and how many
    clusters Envoy has."""
    last = work.host(work.size - 1)
    if wait_answered(port, last, BASE_PATH, timeout=STARTUP_TIMEOUT, poll=0.05) is None:
        raise RuntimeError(f"Envoy never served {last}")
    ready = time.perf_counter() - started
    missing = unserved(port, work.swept_hosts(), timeout=120.0)
    if missing:
        log(f"  {len(missing)} hosts never answered, e.g. {', '.join(missing[:3])}")
    return ready, len(missing), active_clusters(envoy)


def active_clusters(envoy: EnvoyProcess) -> int:
    """Envoy's ``cluster_manager.active_clusters`` (-1 if its admin does not say): filtering
    millions of stats at 30k clusters takes Envoy longer than ``EnvoyProcess.stats`` waits."""
    name = "cluster_manager.active_clusters"
    with contextlib.suppress(OSError, ValueError):
        status, body = envoy.admin_get(f"/stats?filter=^{name}$", timeout=120.0)
        if status == 200:
            return int(body.strip().rpartition(": ")[2])
    return -1


def measure(
    changes: Sequence[Change], apply: Callable[[Change], None], port: int, poll: float
) -> tuple[dict[str, list[float]], int]:
    samples: dict[str, list[float]] = {}
    timeouts = 0
    for change in changes:
        time.sleep(QUIET)
        start = time.perf_counter()
        apply(change)
        took = wait_answered(port, change.host, change.path, timeout=CHANGE_TIMEOUT, poll=poll)
        if took is None:
            timeouts += 1
            log(f"  {change.measure} change of {change.host} not served after {CHANGE_TIMEOUT:.0f} s")
        else:
            samples.setdefault(change.measure, []).append(time.perf_counter() - start)
    return samples, timeouts


def run_cpx(work: Workload, manifests: Path, workdir: Path, args: argparse.Namespace) -> Run:
    cpx = CpxProcess(
        manifests,
        workdir,
        plugins=[KINDS[work.kind]],
        http_port=work.http_port,
        log_level="warning",
        extra_args=args.cpx_arg,
        start_timeout=STARTUP_TIMEOUT,
    )
    started = time.perf_counter()
    # As deployed, Envoy starts alongside cpx and connects once cpx's xDS port is up (before
    # its initial load); --envoy-after-ready starts it only once cpx reports ready.
    cpx.start(wait=args.envoy_after_ready)
    assert cpx.proc is not None
    try:
        if not args.envoy_after_ready:
            wait_listening(cpx.xds_port, STARTUP_TIMEOUT)
        envoy = start_envoy(cpx.xds_port, workdir / "envoy", args.ads)
        try:
            envoy.wait_ready(STARTUP_TIMEOUT)
            ready, missing, clusters = wait_all(envoy, cpx.http_port, work, started)
            memory = rss(cpx.proc.pid)

            def rewrite(change: Change) -> None:
                write_yaml(manifests, change.file, change.docs)

            samples, timeouts = measure(work.change_list(), rewrite, cpx.http_port, args.poll)
        finally:
            envoy.stop()
        cpx.stop(timeout=60)
    finally:
        cpx.kill()
    return Run(samples, timeouts, ready, missing, clusters, memory)


def serve_config(plugin: str, http_port: int, cpx_args: Sequence[str]) -> tuple[Any, Any]:
    """The plugin host and Config ``cpx serve`` would run with these arguments (parsed by its own
    command, so every option, e.g. a route shape, means the same for the floor)."""
    from cpx.cli.options import core_config, plugin_host
    from cpx.cli.serve import serve_command

    argv = [
        "--plugins", plugin,
        "--manifests", "unused",
        "--envoy-service-http-address", "127.0.0.1",
        "--envoy-service-http-port", str(http_port),
        "--envoy-service-https-address", "127.0.0.1",
        "--envoy-service-https-port", str(free_port()),
        *cpx_args,
    ]  # fmt: skip
    ctx = serve_command.make_context("serve", argv)
    return plugin_host(ctx), core_config(ctx, ctx.params)


def floor_snapshots(work: Workload, http_port: int, cpx_args: Sequence[str]) -> list[Snapshot]:
    """The initial snapshot and the one after each change, translated in process before timing."""
    host, config = serve_config(KINDS[work.kind], http_port, cpx_args)
    handler = SnapshotHandler.create(host, config)
    for _, docs in work.base_files():
        for doc in docs:
            handler.upsert(doc, validate=True)
    snapshots = [handler.rebuild()]
    for change in work.change_list():
        for doc in change.docs:
            handler.upsert(doc, validate=True)
        snapshots.append(handler.rebuild())
    return snapshots


class BareServer:
    """cpx's ADS server on its own event loop thread, fed snapshots directly."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bare-ads", daemon=True)
        self.server: XdsServer | None = None

    def _call(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout=60)

    async def _start(self) -> int:
        self.server = XdsServer(address="127.0.0.1", port=0)
        return await self.server.start()

    def start(self) -> int:
        self.thread.start()
        port: int = self._call(self._start())
        return port

    def set_snapshot(self, snapshot: Snapshot) -> None:
        assert self.server is not None
        self.loop.call_soon_threadsafe(self.server.set_snapshot, snapshot)

    def stop(self) -> None:
        if self.server is not None:
            self._call(self.server.stop(grace=0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def run_floor(work: Workload, workdir: Path, args: argparse.Namespace) -> Run:
    http_port = work.http_port
    begun = time.perf_counter()
    snapshots = floor_snapshots(work, http_port, args.cpx_arg)
    log(f"  {len(snapshots)} snapshots translated in {time.perf_counter() - begun:.1f} s")
    gc.collect()
    gc.freeze()  # the snapshots stay: no collection may walk them while changes are timed
    bare = BareServer()
    try:
        xds_port = bare.start()
        bare.set_snapshot(snapshots[0])
        started = time.perf_counter()
        envoy = start_envoy(xds_port, workdir / "floor-envoy", args.ads)
        try:
            envoy.wait_ready(STARTUP_TIMEOUT)
            ready, missing, clusters = wait_all(envoy, http_port, work, started)
            following = iter(snapshots[1:])
            samples, timeouts = measure(
                work.change_list(), lambda _: bare.set_snapshot(next(following)), http_port, args.poll
            )
        finally:
            envoy.stop()
    finally:
        bare.stop()
        gc.unfreeze()
    return Run(samples, timeouts, ready, missing, clusters, rss())


def run_case(work: Workload, args: argparse.Namespace) -> dict[str, Run]:
    with tempfile.TemporaryDirectory(prefix="cpx-convergence-") as tmp:
        root = Path(tmp)
        manifests = root / "manifests"
        manifests.mkdir()
        for name, docs in work.base_files():
            write_yaml(manifests, name, docs)
        log(f"{work.kind} {work.size}: floor (bare ADS server)")
        floor = run_floor(work, root, args)
        log(f"{work.kind} {work.size}: cpx serve")
        cpx = run_cpx(work, manifests, root / "cpx", args)
    if cpx.clusters != floor.clusters:
        log(f"  warning: Envoy had {cpx.clusters} clusters from cpx, {floor.clusters} from the floor")
    return {"cpx": cpx, "floor": floor}


# -- output ----------------------------------------------------------------------------------------


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def ms_pair(values: Sequence[float]) -> str:
    return f"{quantile(values, 0.5) * 1000:.0f} / {quantile(values, 0.9) * 1000:.0f}"


HEADER = (
    "routes",
    "kind",
    "measure",
    "cpx p50/p90 ms",
    "floor p50/p90 ms",
    "cpx ready s",
    "floor ready s",
    "cpx RSS MiB",
    "timeouts",
)


def table_rows(results: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for case in results:
        cpx, floor = case["cpx"], case["floor"]
        for measure in ("path", "new"):
            rows.append(
                (
                    f"{case['size']:,}",
                    case["kind"],
                    measure,
                    ms_pair(cpx["samples"].get(measure, [])),
                    ms_pair(floor["samples"].get(measure, [])),
                    f"{cpx['ready_s']:.1f}",
                    f"{floor['ready_s']:.1f}",
                    f"{cpx['rss_bytes'] / 2**20:.0f}",
                    f"{cpx['timeouts']} / {floor['timeouts']}",
                )
            )
    return rows


def table(results: list[dict[str, Any]]) -> str:
    rows = [HEADER, *table_rows(results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    """x: routes (log), y: p50 of the path changes, one line per kind for cpx and for the floor."""
    try:
        import matplotlib as mpl
    except ImportError:
        raise SystemExit("--plot needs matplotlib: .venv/bin/pip install matplotlib") from None
    mpl.use("Agg")  # no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    kinds = sorted({case["kind"] for case in results})
    for kind, color in zip(kinds, ("tab:blue", "tab:orange", "tab:green"), strict=False):
        cases = sorted((c for c in results if c["kind"] == kind), key=lambda c: c["size"])
        sizes = [c["size"] for c in cases]
        for who, style in (("cpx", "o-"), ("floor", "s--")):
            p50 = [quantile(c[who]["samples"].get("path", []), 0.5) * 1000 for c in cases]
            label = f"{kind}: {'cpx serve' if who == 'cpx' else 'bare ADS server (floor)'}"
            ax.plot(sizes, p50, style, color=color, label=label)
    ax.set_xscale("log")
    ax.set_xticks(sorted({case["size"] for case in results}))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("routes (one host and one route each)")
    ax.set_ylabel("change to Envoy, p50 (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    log(f"plot written to {path}")


def describe(args: argparse.Namespace) -> str:
    extra = f", cpx serve {' '.join(args.cpx_arg)}" if args.cpx_arg else ""
    return f"one changed route's path, {args.changes} changes, {args.ads} ADS{extra}"


# -- main ------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument(
        "--envoy-after-ready",
        action="store_true",
        help="start Envoy once cpx reports ready (default: with cpx, once its xDS port accepts)",
    )
    parser.add_argument("--sizes", default="1000,3000,10000,30000", help="comma-separated route counts")
    parser.add_argument("--kinds", default="ingress,httpproxy", help="ingress, httpproxy and/or httproute")
    parser.add_argument("--changes", type=int, default=15, help="changes per measure (median, p90)")
    parser.add_argument(
        "--cpx-arg",
        action="append",
        default=[],
        help="extra `cpx serve` arguments, split like a shell (repeatable): --cpx-arg '--route-shape "
        "single'; the floor translates with the same options",
    )
    parser.add_argument("--ads", choices=("sotw", "delta"), default="sotw", help="Envoy's xDS flavour")
    parser.add_argument("--poll", type=float, default=0.005, help="Envoy polling interval in seconds")
    parser.add_argument(
        "--sweep", type=int, default=1000, help="hosts checked once Envoy is ready (spread evenly)"
    )
    parser.add_argument("--json", type=Path, help="write every sample to this file")
    parser.add_argument("--plot", type=Path, help="write a PNG plot (needs matplotlib)")
    parser.add_argument("--from-json", type=Path, help="no run: print (and plot) the results of --json")
    args = parser.parse_args(argv)
    args.cpx_arg = [part for value in args.cpx_arg for part in shlex.split(value)]
    for kind in args.kinds.split(","):
        if kind not in KINDS:
            parser.error(f"unknown kind {kind!r} (ingress, httpproxy, httproute)")
    return args


def check_cpx_args(args: argparse.Namespace) -> None:
    """Refuse ``--cpx-arg`` values ``cpx serve`` would refuse, before anything starts."""
    import click

    for kind in args.kinds.split(","):
        try:
            serve_config(KINDS[kind], free_port(), args.cpx_arg)
        except click.ClickException as err:
            raise SystemExit(f"--cpx-arg {' '.join(args.cpx_arg)}: {err.format_message()}") from None


def measure_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    with EchoServer("echo") as echo:
        for size in (int(s) for s in args.sizes.split(",") if s):
            for kind in args.kinds.split(","):
                work = Workload(kind, size, args.changes, echo.port, args.sweep)
                runs = run_case(work, args)
                results.append(
                    {"size": size, "kind": kind, **{who: run.to_json() for who, run in runs.items()}}
                )
                log("\n".join(table(results[-1:]).splitlines()[2:]))
    return results


def main() -> None:
    args = parse_args()
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        results, title = saved["results"], saved["title"]
    else:
        check_cpx_args(args)
        started = time.perf_counter()
        results, title = measure_all(args), describe(args)
        log(f"done in {time.perf_counter() - started:.0f} s")
        if args.json:
            args.json.write_text(json.dumps({"title": title, "results": results}, indent=1))
    print(title)
    print(table(results))
    if args.plot:
        plot(results, args.plot, title)


if __name__ == "__main__":
    main()
