"""Long fuzz run: ``python tests/fuzz/run.py --cases 20000 [--envoy-validate]``.

Generates sets of objects with :mod:`cpx.testing.strategies` (every kind the enabled plugins
declare), runs each through the pipeline (:func:`cpx.testing.fuzz.run_case`) and reports cases/s,
crashes (each with a minimal failing set of objects) and, with ``--envoy-validate``, the
configurations Envoy rejects.  Unlike the CI-sized properties it keeps going after a failure.

The Envoy check is a batch checker, ``check_batch(list[Snapshot]) -> list[str | None]`` (an error
per snapshot, None when Envoy accepts it), imported lazily from ``--checker module:function``;
snapshots are checked ``--batch`` at a time to keep Envoy start-ups few.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from hypothesis import HealthCheck, Phase, given, seed, settings

from cpx.plugins import PluginHost
from cpx.testing import strategies
from cpx.testing.fuzz import run_case
from cpx.xds.resource import Snapshot

BatchChecker = Callable[[list[Snapshot]], list[str | None]]
DEFAULT_CHECKER = "cpx.xds.constraints.envoycheck"
SHOWN_CHARS = 3000


@attrs.define
class Finding:
    what: str  # "crash" or "rejected"
    detail: str
    objects: list[Any]


@attrs.define
class Run:
    host: PluginHost
    checker: BatchChecker | None
    batch_size: int
    cases: int = 0
    findings: list[Finding] = attrs.field(factory=list)
    crash_sites: set[str] = attrs.field(factory=set)
    pending: list[tuple[Snapshot, list[Any]]] = attrs.field(factory=list)

    def case(self, objects: list[Any]) -> None:
        self.cases += 1
        try:
            snapshots = run_case(self.host, objects)
        except Exception as err:
            site = _site(err)
            if site not in self.crash_sites:  # one report per place in the code
                self.crash_sites.add(site)
                minimal = minimise(objects, lambda objs: _crash_site(self.host, objs) == site)
                self.findings.append(Finding("crash", _short_traceback(err), minimal))
            return
        if self.checker is not None:
            self.pending += [(s, objects) for s in snapshots]
            if len(self.pending) >= self.batch_size:
                self.flush()

    def flush(self) -> None:
        if self.checker is None or not self.pending:
            return
        batch, self.pending = self.pending, []
        for (_snapshot, objects), error in zip(batch, self.checker([s for s, _ in batch]), strict=True):
            if error is not None:
                self.findings.append(Finding("rejected", error, objects))


def _site(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    last = frames[-1] if frames else None
    return f"{type(err).__name__} at {last.filename}:{last.lineno}" if last else type(err).__name__


def _crash_site(host: PluginHost, objects: list[Any]) -> str | None:
    try:
        run_case(host, objects)
    except Exception as err:
        return _site(err)
    return None


def _short_traceback(err: BaseException) -> str:
    return "".join(traceback.format_exception(err, limit=-6))[-SHOWN_CHARS:]


def minimise(objects: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
    """Drop objects one at a time while the failure persists (objects are re-generated copies:
    the pipeline may have edited them, so each try gets fresh deep copies)."""

    current = copy.deepcopy(objects) if _copyable(objects) else objects
    i = 0
    while i < len(current) and len(current) > 1:
        candidate = current[:i] + current[i + 1 :]
        if fails(copy.deepcopy(candidate) if _copyable(candidate) else candidate):
            current = candidate
        else:
            i += 1
    return current


def _copyable(objects: list[Any]) -> bool:
    try:
        copy.deepcopy(objects)
    except RecursionError:
        return False
    return True


def printable(value: Any, depth: int = 0) -> Any:
    """A JSON-writable stand-in: huge ints, deep nesting and long lists abbreviated."""
    if depth > 40:
        return "<nested deeper>"
    if isinstance(value, dict):
        return {str(k): printable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        items = [printable(v, depth + 1) for v in value[:20]]
        return [*items, f"<{len(value) - 20} more items>"] if len(value) > 20 else items
    if isinstance(value, int) and not -(10**18) < value < 10**18:
        return f"<{value.bit_length()}-bit integer>"
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + f"<{len(value) - 200} more characters>"
    return value


def shown(objects: list[Any]) -> str:
    text = json.dumps(printable(objects), default=repr, ensure_ascii=True, indent=1)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"... ({len(text)} chars)"


def load_checker(spec: str) -> BatchChecker:
    module_name, _, function = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise SystemExit(
            f"--envoy-validate is unavailable: cannot import {module_name} ({err}); "
            "pass --checker module:function naming a check_batch(list[Snapshot]) -> list[str | None]"
        ) from None
    if not function:
        # The default: cpx's own validator, one Envoy run per batch of snapshots.
        validator = module.EnvoyValidator.tested(None)
        default: BatchChecker = validator.check_batch
        return default
    checker: BatchChecker = getattr(module, function)
    return checker


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--plugins", default="ingress,httpproxy,gatewayapi,extsvc,tlsdelegation")
    parser.add_argument("--seed", type=int, default=None, help="reproduce a run")
    parser.add_argument("--confused", type=float, default=0.3, help="share of type-confused objects")
    parser.add_argument("--envoy-validate", action="store_true", help="check published snapshots with Envoy")
    parser.add_argument(
        "--checker", default=DEFAULT_CHECKER, help=f"batch checker (default {DEFAULT_CHECKER})"
    )
    parser.add_argument("--batch", type=int, default=100, help="snapshots per Envoy check")
    args = parser.parse_args(argv)

    host = PluginHost.load([p for p in args.plugins.split(",") if p])
    kinds = strategies.kind_strategies(host)
    checker = load_checker(args.checker) if args.envoy_validate else None
    run = Run(host, checker, args.batch)

    @settings(
        max_examples=args.cases,
        deadline=None,
        database=None,
        phases=[Phase.generate],  # failures are collected and minimised here, not by Hypothesis
        suppress_health_check=list(HealthCheck),
    )
    @given(strategies.object_sets(kinds, confused=args.confused))
    def fuzz(objects: list[Any]) -> None:
        run.case(objects)

    if args.seed is not None:
        fuzz = seed(args.seed)(fuzz)
    print(f"fuzzing {', '.join(k.gvk.kind for k in kinds)}: {args.cases} cases", file=sys.stderr)
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fuzz()
        except Exception as err:  # a strategy failed: the run ends, with what it found so far
            run.findings.append(Finding("generator error", _short_traceback(err), []))
    run.flush()
    elapsed = time.monotonic() - started
    crashes = [f for f in run.findings if f.what == "crash"]
    rejected = [f for f in run.findings if f.what == "rejected"]
    for finding in run.findings:
        label = "minimal objects" if finding.what == "crash" else "objects"
        print(f"\n=== {finding.what}\n{finding.detail}\n{label}:\n{shown(finding.objects)}")
    envoy = f", {len(rejected)} configurations Envoy rejects" if checker is not None else ""
    print(
        f"\n{run.cases} cases in {elapsed:.1f}s ({run.cases / elapsed:.1f} cases/s): "
        f"{len(crashes)} crashes{envoy}"
    )
    return 1 if run.findings else 0


if __name__ == "__main__":
    sys.exit(main())
