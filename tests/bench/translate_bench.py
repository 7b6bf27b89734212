#!/usr/bin/env python3
"""Whole-process ``cpx translate`` of generated routes (issue #10: 10k Ingress routes in <= 1.0 s;
issue #11: HTTPRoutes within 1.5x of the same routes as HTTPProxies).

    .venv/bin/python tests/bench/translate_bench.py [--ingresses 1000] [--paths 10] [--services 1]
        [--kinds ingress,httpproxy,httproute] [--runs 7] [--baseline OTHER/core] [--json]

Not a test: it prints figures and never fails on them.  Per kind it writes ``--ingresses`` manifest
files to a temporary folder, each one object with its own host and ``--paths`` paths spread over
``--services`` Services of its own (each with one EndpointSlice): an Ingress, a root HTTPProxy
with one route per path, or an HTTPRoute with one rule per path attached to one Gateway (its
GatewayClass and Gateway in one more file).  Then it times ``--runs`` runs of
``python -m cpx translate <folder>`` (output to /dev/null) and of the floor: the same interpreter
starting (site packages included) and reading every input file.  Cases take turns; each row is the
median wall time and median CPU time (user + system) of its runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

NAMESPACE = "bench"
# The floor: start the same interpreter and read every manifest, as translate must at least do.
FLOOR_CODE = "import pathlib,sys\nfor p in sorted(pathlib.Path(sys.argv[1]).glob('*.yaml')): p.read_bytes()"


# As an installed cpx runs: with its modules' bytecode cached.  A shell that sets
# PYTHONDONTWRITEBYTECODE (as some development setups do) would make every run compile them anew.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def backend(name: str, port: int) -> list[dict[str, Any]]:
    """A Service (port 80 -> ``port``) and its EndpointSlice with one ready loopback address."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port, "protocol": "TCP"}]},
    }
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-1",
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": name},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }
    return [service, endpoints]


def ingress_file(i: int, paths: int, services: int) -> list[dict[str, Any]]:
    """Ingress ``ing-<i>`` for ``host-<i>.example.com`` with ``paths`` paths spread over ``services``
    Services of its own, plus those Services and their EndpointSlices."""
    docs: list[dict[str, Any]] = []
    for s in range(services):
        docs += backend(f"svc-{i}-{s}", 8080)
    rules = []
    for p in range(paths):
        name = f"svc-{i}-{p % services}"
        rules.append(
            {
                "path": f"/p-{p}",
                "pathType": "Prefix",
                "backend": {"service": {"name": name, "port": {"number": 80}}},
            }
        )
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": f"ing-{i}", "namespace": NAMESPACE},
        "spec": {"rules": [{"host": f"host-{i}.example.com", "http": {"paths": rules}}]},
    }
    return [ingress, *docs]


def httpproxy_file(i: int, paths: int, services: int) -> list[dict[str, Any]]:
    """:func:`ingress_file` as a root HTTPProxy: one route per path."""
    ingress, *docs = ingress_file(i, paths, services)
    routes = [
        {
            "conditions": [{"prefix": p["path"]}],
            "services": [_service_port(p)],
        }
        for p in ingress["spec"]["rules"][0]["http"]["paths"]
    ]
    spec = {"virtualhost": {"fqdn": f"host-{i}.example.com"}, "routes": routes}
    meta = {"name": f"proxy-{i}", "namespace": NAMESPACE}
    return [
        {"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxy", "metadata": meta, "spec": spec},
        *docs,
    ]


def _service_port(path: dict[str, Any]) -> dict[str, Any]:
    return {"name": path["backend"]["service"]["name"], "port": 80}


GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY = [
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
        "spec": {
            "gatewayClassName": "contour",
            "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
        },
    },
]


def httproute_file(i: int, paths: int, services: int) -> list[dict[str, Any]]:
    """:func:`ingress_file` as an HTTPRoute of the Gateway ``bench``: one rule per path."""
    ingress, *docs = ingress_file(i, paths, services)
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": p["path"]}}],
            "backendRefs": [_service_port(p)],
        }
        for p in ingress["spec"]["rules"][0]["http"]["paths"]
    ]
    spec = {"parentRefs": [{"name": "bench"}], "hostnames": [f"host-{i}.example.com"], "rules": rules}
    meta = {"name": f"route-{i}", "namespace": NAMESPACE, "creationTimestamp": "2026-01-01T00:00:00Z"}
    return [{"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": meta, "spec": spec}, *docs]


FILES = {"ingress": ingress_file, "httpproxy": httpproxy_file, "httproute": httproute_file}


def generate(folder: Path, ingresses: int, paths: int, services: int, kind: str = "ingress") -> None:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "httproute":
        (folder / "gateway.yaml").write_text(yaml.dump_all(GATEWAY, Dumper=dumper), encoding="utf-8")
    for i in range(ingresses):
        text = yaml.dump_all(FILES[kind](i, paths, services), Dumper=dumper, sort_keys=False)
        (folder / f"{kind}-{i:05d}.yaml").write_text(text, encoding="utf-8")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds from spawning ``argv`` to its exit, and the CPU seconds (user + system) it used;
    raises if it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if code := os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(argv)} exited with {code}")
    return elapsed, usage.ru_utime + usage.ru_stime


def medians(cases: dict[str, tuple[list[str], dict[str, str]]], runs: int) -> dict[str, dict[str, float]]:
    """Each case's medians over ``runs``, the cases taking turns (a busy spell hits them alike)."""
    for argv, env in cases.values():
        timed(argv, env)  # warm the page cache and .pyc files; not counted
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
    for _ in range(runs):
        for label, (argv, env) in cases.items():
            samples[label].append(timed(argv, env))
    out = {}
    for label, pairs in samples.items():
        walls, cpus = zip(*pairs, strict=True)
        out[label] = {
            "median_s": statistics.median(walls),
            "min_s": min(walls),
            "max_s": max(walls),
            "cpu_median_s": statistics.median(cpus),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ingresses", type=int, default=1000)
    parser.add_argument("--paths", type=int, default=10, help="paths (routes) per Ingress")
    parser.add_argument("--services", type=int, default=1, help="Services per Ingress (its paths share them)")
    parser.add_argument("--kinds", default="ingress", help="ingress, httpproxy and/or httproute")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--format", choices=["yaml", "json"], default="yaml", help="translate's -o")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also time the cpx package under DIR (e.g. another revision's core/ folder) first on PYTHONPATH",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable results")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if unknown := set(kinds) - FILES.keys():
        parser.error(f"unknown kinds {sorted(unknown)} (ingress, httpproxy, httproute)")
    with tempfile.TemporaryDirectory(prefix="cpx-translate-bench-") as tmp:
        cases = {}
        for kind in kinds:
            folder = Path(tmp) / kind
            generate(folder, args.ingresses, args.paths, args.services, kind)
            size = sum(p.stat().st_size for p in folder.iterdir())
            translate = [sys.executable, "-m", "cpx", "translate", "-o", args.format, str(folder)]
            label = "cpx translate" if kinds == ["ingress"] else f"cpx translate {kind}"
            cases[label] = (translate, ENV)
            if args.baseline:
                baseline_env = {**ENV, "PYTHONPATH": str(Path(args.baseline).resolve())}
                cases["baseline" if kinds == ["ingress"] else f"baseline {kind}"] = (translate, baseline_env)
        cases["floor (start + read)"] = ([sys.executable, "-c", FLOOR_CODE, str(folder)], ENV)
        results: dict[str, Any] = {
            "routes": args.ingresses * args.paths,
            "files": args.ingresses,
            "input_bytes": size,
            "runs": args.runs,
            "medians": medians(cases, args.runs),
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{results['routes']} routes in {results['files']} files ({size / 1e6:.1f} MB), "
        f"median of {args.runs} whole-process runs:"
    )
    for label, r in results["medians"].items():
        print(
            f"  {label:22} {r['median_s']:.3f} s wall (min {r['min_s']:.3f}, max {r['max_s']:.3f}), "
            f"{r['cpu_median_s']:.3f} s CPU"
        )


if __name__ == "__main__":
    main()
