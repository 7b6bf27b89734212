#!/usr/bin/env python3
"""How long cpx.xds.constraints.validate takes: a 10k-route RouteConfiguration whole and per route, and one of
each other resource kind cpx publishes.

    .venv/bin/python tests/bench/validate_bench.py [--routes 10000] [--runs 5] [--json]

Not a test: it prints figures and never fails on them (see tests/bench/README.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from typing import Any

from envoy.config.route.v3 import route_pb2

from cpx.builtin.filters import builtin_contributions
from cpx.dag.nodes import (
    Cluster,
    Duration,
    HeaderMatch,
    HeaderMatchKind,
    HeadersPolicy,
    HeaderValue,
    HealthCheck,
    LocalRateLimit,
    PathKind,
    PathMatch,
    Route,
    Secret,
    ServicePort,
    TimeoutPolicy,
)
from cpx.ops import certgen
from cpx.xds.caches.clusters import cluster
from cpx.xds.caches.endpoints import cluster_load_assignment
from cpx.xds.caches.secrets import envoy_secret
from cpx.xds.constraints.validate import Checker
from cpx.xds.envoy.route import build_route


def route(i: int) -> Route:
    """A typical HTTPProxy route; every 10th has a regex, a header match and a rate limit."""
    backend = Cluster(upstream=ServicePort(namespace="bench", name=f"svc-{i}", port=80))
    special = i % 10 == 0
    return Route(
        path=PathMatch(kind=PathKind.REGEX, value=f"/r{i}/[a-z]+")
        if special
        else PathMatch(kind=PathKind.PREFIX, value=f"/p-{i}"),
        headers=(HeaderMatch(name="x-tenant", kind=HeaderMatchKind.EXACT, value=f"t{i}"),) if special else (),
        clusters=(backend,),
        timeout_policy=TimeoutPolicy(response=Duration(seconds=30.0)),
        request_headers=HeadersPolicy(
            set=(HeaderValue(name="x-route", value=f"route-{i}"),), remove=("x-debug",)
        ),
        local_rate_limit=LocalRateLimit(requests=100, unit_seconds=1) if special else None,
    )


def timed(run: Callable[[], Any], runs: int) -> float:
    """The best of ``runs`` in CPU seconds: on a shared machine the least disturbed run."""
    samples = []
    for _ in range(runs):
        start = time.process_time()
        run()
        samples.append(time.process_time() - start)
    return min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    filters = builtin_contributions().http_filters
    routes = [
        build_route(route(i), secure=False, fqdn="bench.example.com", filters=filters)
        for i in range(args.routes)
    ]
    config = route_pb2.RouteConfiguration(name="bench")
    config.virtual_hosts.add(name="bench", domains=["bench.example.com"]).routes.extend(routes)

    cold = Checker()
    start = time.process_time()
    assert cold.violations(routes[0]) == []
    first = time.process_time() - start

    # Repeated parts are walked once (validate._walk): each run would find the last run's, so the
    # figures are for parts never seen before (an Any payload is still decoded once per bytes).
    checker = Checker(remember=False)
    checker.violations(config)  # compile the plans once
    whole = timed(lambda: checker.violations(config), args.runs)
    each = timed(lambda: [checker.violations(r) for r in routes], args.runs)
    plain, special = routes[1], routes[0]
    per_plain = timed(lambda: [checker.violations(plain) for _ in range(1000)], args.runs) / 1000
    per_special = timed(lambda: [checker.violations(special) for _ in range(1000)], args.runs) / 1000

    ca = certgen.new_ca()
    pair = certgen.issue(ca, "bench.example.com", dns_names=["bench.example.com"])
    health = HealthCheck(path="/healthz")
    others: dict[str, Any] = {
        "Cluster (EDS, health check)": cluster(
            Cluster(upstream=ServicePort(namespace="bench", name="svc", port=80), health_check=health)
        ),
        "ClusterLoadAssignment (100 endpoints)": cluster_load_assignment(
            "bench", [(tuple((f"10.0.{i // 250}.{i % 250}", 8080) for i in range(100)), 0)]
        ),
        "Secret (RSA 2048 key pair)": envoy_secret(
            Secret(namespace="bench", name="tls", cert_pem=pair.cert_pem, key_pem=pair.key_pem)
        ),
        "routes x 10 per serialise (reference)": None,
    }
    figures: dict[str, float] = {
        "first check of a Route, plans compiled (ms)": first * 1e3,
        f"RouteConfiguration of {args.routes} routes, whole (ms)": whole * 1e3,
        f"{args.routes} routes one by one (ms)": each * 1e3,
        "one plain Route (us)": per_plain * 1e6,
        "one Route with regex, header match, rate limit (us)": per_special * 1e6,
    }
    for label, message in others.items():
        if message is None:
            figures["serialising one plain Route, for scale (us)"] = (
                timed(lambda: [plain.SerializeToString() for _ in range(1000)], args.runs) / 1000 * 1e6
            )
            continue
        assert checker.violations(message) == [], label
        figures[f"one {label} (us)"] = (
            timed(functools.partial(checker.violations, message), args.runs * 20) * 1e6
        )
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for label, value in figures.items():
            print(f"{label:60} {value:10.1f}")


if __name__ == "__main__":
    main()
