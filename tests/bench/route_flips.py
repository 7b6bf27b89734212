#!/usr/bin/env python3
"""Route-flip benchmark (issue #10): does traffic survive an Ingress moving between Services?

    .venv/bin/python tests/bench/route_flips.py [--routes 1000] [--flips 100] [--interval 0.2]
        [--clients 3] [--apis sotw,delta]

Not a test: it prints figures and never fails on them.  Per xDS flavour: ``cpx serve`` and a real
Envoy on loopback, ``--routes`` background Ingresses (one host and one Service each), and one
Ingress for ``flip.example`` rewritten every ``--interval`` seconds so that ``/`` points at Service
A, then B (the one it leaves is no longer referenced), while ``--clients`` keep-alive clients send
GETs.  Prints requests, failures (any answer but 200) and how the failures answered.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cpx.testing import EchoServer, EnvoyProcess, http_get
from cpx.testing.churn import ChurnResult, flip_routes
from cpx.testing.cpxproc import CpxProcess, backend, write_manifest
from cpx_ingress.testing import simple_ingress as ingress

HOST = "flip.example"


def flip_to(service: str) -> list[dict[str, Any]]:
    return [ingress("flip", [(HOST, "/", service)])]


def background(count: int, port: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for i in range(count):
        docs.extend(backend(f"bg-{i}", port))
        docs.append(ingress(f"bg-{i}", [(f"host-{i}.example.com", "/", f"bg-{i}")]))
    return docs


def wait_served(port: int, api: str) -> None:
    """Until the flip host answers 200 (Envoy's admin is too busy to ask while 10k clusters warm)."""
    deadline = time.monotonic() + 300.0
    while time.monotonic() < deadline:
        try:
            if http_get(f"http://127.0.0.1:{port}/", host_header=HOST, timeout=5.0).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{api}: {HOST} never answered 200")


def run(api: str, args: argparse.Namespace, workdir: Path) -> ChurnResult:
    manifests = workdir / "manifests"
    with EchoServer("a") as a, EchoServer("b") as b, EchoServer("bg") as bg:
        write_manifest(manifests, "background.yaml", background(args.routes, bg.port))
        write_manifest(manifests, "services.yaml", [*backend("svc-a", a.port), *backend("svc-b", b.port)])
        write_manifest(manifests, "flip.yaml", flip_to("svc-a"))
        cpx = CpxProcess(manifests, workdir)
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy", xds_api=api)
        try:
            cpx.start()
            envoy.start()
            wait_served(cpx.http_port, api)
            return flip_routes(
                manifests=manifests,
                file_name="flip.yaml",
                documents=flip_to,
                targets=("svc-a", "svc-b"),
                flips=args.flips,
                interval=args.interval,
                http_port=cpx.http_port,
                host=HOST,
                clients=args.clients,
            )
        finally:
            envoy.stop()
            cpx.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--routes", type=int, default=1000)
    parser.add_argument("--flips", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--apis", default="sotw,delta")
    args = parser.parse_args()
    print(f"{args.routes} background routes, {args.flips} flips every {args.interval * 1000:.0f} ms")
    print(f"{'xDS':<6} {'requests':>9} {'failures':>9}  failures by status")
    for api in args.apis.split(","):
        print(f"{api}: starting cpx and Envoy", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix=f"route-flips-{api}-") as workdir:
            result = run(api, args, Path(workdir))
        failed = {s: n for s, n in sorted(result.statuses.items()) if s != 200}
        print(f"{api:<6} {result.requests:>9} {result.failures:>9}  {failed or '-'}", flush=True)


if __name__ == "__main__":
    main()
