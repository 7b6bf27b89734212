"""Writing the plugins' computed status to Kubernetes, through the status subresource.

:class:`StatusUpdater` receives every status the pipeline computed (:meth:`submit`, after each
rebuild: only what changed), and, while this replica leads, writes them with a bounded number of
concurrent requests (blocking client calls in a thread pool):

1. GET the object; gone meanwhile → nothing to do;
2. ``writer.merge(current status, computed)`` (default: replace); None or equal → a no-op;
3. PATCH ``.../<name>/status`` with a JSON merge patch from the current status to the merged
   one, carrying the object's resourceVersion as a precondition: when another writer changed the
   object in between, the API server answers 409 Conflict and the write starts again at 1
   (client-go's DefaultBackoff: 10, 50, 250 ms).

Writes are coalesced per object (a newer status replaces a queued one; one object is never
written by two workers at once).  The Gateway API merge keeps other controllers' entries: the
updater never writes a field the merge did not produce.  Metrics are Contour's
``contour_status_update_*{kind}``.

:func:`start_status_writing` wires it for ``cpx serve`` in Kubernetes mode: the leader election
(:mod:`cpx.status.leader`) switches the updater on (with a full rewrite) and off, and the Envoy
Service's address (:mod:`cpx.status.loadbalancer_watch`) goes into the computed status of the kinds
that opted in (``StatusWriterSpec.load_balancer``, which also decides which of their objects get it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from cpx.config import StatusWritingOptions
from cpx.objects import ObjectKey
from cpx.ops.metrics import Metrics
from cpx.records import StatusWriterSpec
from cpx.snapshot import ObjectStatus, SnapshotHandler
from cpx.sources.kube.rest import MERGE_PATCH, ApiException, object_path, request_json, status_code
from cpx.status.leader import LeaderElector
from cpx.status.loadbalancer_watch import ServiceLoadBalancerWatcher

log = logging.getLogger("cpx.status.updater")

# client-go's retry.DefaultBackoff (what Contour's RetryOnConflict uses): 4 tries, 10 ms x 5^n.
CONFLICT_BACKOFF = (0.01, 0.05, 0.25)

_NOOP, _SUCCESS, _FAILED, _RETRY, _GONE = "noop", "success", "failed", "retry", "gone"


def merge_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 JSON merge patch that turns ``current`` into ``desired`` (lists replaced)."""
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    for key, value in desired.items():
        if key in current:
            old = current[key]
            if old == value:
                continue
            if isinstance(old, Mapping) and isinstance(value, Mapping):
                patch[key] = merge_patch(old, value)
                continue
        patch[key] = value
    return patch


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    """JSON types only (a computed status may hold tuples), to compare with what the API returns."""
    out: dict[str, Any] = json.loads(json.dumps(value))
    return out


def _with_load_balancer(
    spec: StatusWriterSpec, computed: Mapping[str, Any], load_balancer: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """The computed status with the Envoy Service's address, for the kinds that opted in."""
    if spec.load_balancer is None or load_balancer is None:
        return computed
    return spec.load_balancer(load_balancer, computed)


class StatusUpdater:
    """Writes computed statuses while active (the leader); see the module docstring.

    ``submit`` / ``rewrite_all`` / ``start_writing`` / ``stop_writing`` / ``set_load_balancer``
    are called on the event loop; :meth:`run` runs the workers until cancelled.
    """

    def __init__(
        self,
        api_client: Any,
        writers: Mapping[tuple[str, str], StatusWriterSpec],
        metrics: Metrics,
        *,
        concurrency: int = StatusWritingOptions().concurrency,
        # Short: a status write is small, and Python joins in-flight pool threads at exit, so this
        # bounds how long a SIGTERM can wait for them.
        request_timeout: float = 4.0,
        retry_delay: float = 5.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.api_client = api_client
        # Kinds reported but never written (StatusWriterSpec.writes) are not this updater's.
        self.writers = {kind: spec for kind, spec in writers.items() if spec.writes}
        self.metrics = metrics
        self.concurrency = concurrency
        self.request_timeout = request_timeout
        self.retry_delay = retry_delay
        self._active = False
        # The last computed status of every object of a kind with a writer (kept by followers too,
        # for the full rewrite when they become leader).
        self._latest: dict[ObjectKey, Mapping[str, Any]] = {}
        self._load_balancer: Mapping[str, Any] | None = None
        self._pending: dict[ObjectKey, None] = {}  # insertion-ordered set
        self._inflight: set[ObjectKey] = set()
        self._again: set[ObjectKey] = set()  # resubmitted while being written
        self._retries: dict[ObjectKey, asyncio.TimerHandle] = {}
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._pool: ThreadPoolExecutor | None = None

    # -- control (event loop) --------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self._active

    def submit(self, statuses: Mapping[ObjectKey, ObjectStatus | None]) -> None:
        """Record newly computed statuses (None: the object is gone) and queue their writes."""
        for key, status in statuses.items():
            if key.group_kind not in self.writers:
                continue
            if status is None:
                self._latest.pop(key, None)
                self._pending.pop(key, None)
                continue
            computed = status.status
            if self._latest.get(key) == computed:
                continue
            self._latest[key] = computed
            self._enqueue(key)

    def rewrite_all(self) -> None:
        """Queue every known object (the GET then skips those already right)."""
        for key in self._latest:
            self._enqueue(key)

    def start_writing(self) -> None:
        """Become the writer (this replica leads): rewrite every status."""
        if self._active:
            return
        self._active = True
        log.info("writing status (%d objects known)", len(self._latest))
        self.rewrite_all()

    def stop_writing(self) -> None:
        """Stop writing (no longer leader): queued writes are dropped, in-flight ones finish."""
        if not self._active:
            return
        self._active = False
        self._pending.clear()
        self._again.clear()
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        self._check_idle()
        log.info("stopped writing status")

    def set_load_balancer(self, load_balancer: Mapping[str, Any] | None) -> None:
        """The Envoy Service's ``status.loadBalancer`` (None: unknown, nothing is overlaid).

        Put into the computed status of every object of the kinds that opted in by their
        ``StatusWriterSpec.load_balancer``; a change rewrites them all.
        """
        if load_balancer == self._load_balancer:
            return
        self._load_balancer = None if load_balancer is None else dict(load_balancer)
        log.info("Envoy load-balancer status: %s", load_balancer)
        for key in self._latest:
            if self.writers[key.group_kind].load_balancer is not None:
                self._enqueue(key)

    async def idle(self) -> None:
        """Wait until nothing is queued or being written (for tests and benchmarks)."""
        while True:
            await self._idle.wait()
            await asyncio.sleep(0)
            if self._idle.is_set():
                return

    def computed(self, key: ObjectKey) -> Mapping[str, Any] | None:
        """What would be merged into the object's status now: the computed status with, for
        kinds that opted in, the Envoy Service's address (``StatusWriterSpec.load_balancer``)."""
        computed = self._latest.get(key)
        if computed is None:
            return None
        return _with_load_balancer(self.writers[key.group_kind], computed, self._load_balancer)

    def _enqueue(self, key: ObjectKey) -> None:
        if not self._active:
            return
        handle = self._retries.pop(key, None)
        if handle is not None:
            handle.cancel()
        self._pending[key] = None
        self._idle.clear()
        self._wakeup.set()

    def _check_idle(self) -> None:
        if (not self._pending or not self._active) and not self._inflight and not self._retries:
            self._idle.set()

    # -- workers ---------------------------------------------------------------------------------
    async def run(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="cpx-status")
        workers = [asyncio.create_task(self._worker(), name=f"status-{i}") for i in range(self.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _take(self) -> ObjectKey:
        while True:
            if self._active and self._pending:
                key = next(iter(self._pending))
                del self._pending[key]
                if key in self._inflight:
                    self._again.add(key)
                    continue
                return key
            self._wakeup.clear()
            self._check_idle()
            await self._wakeup.wait()

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._pool is not None
        while True:
            key = await self._take()
            computed = self._latest.get(key)
            if computed is None:
                continue
            spec = self.writers[key.group_kind]
            self._inflight.add(key)
            outcome = _FAILED
            try:
                outcome = await loop.run_in_executor(
                    self._pool, self._write, key, spec, computed, self._load_balancer
                )
            finally:
                self._inflight.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self._enqueue(key)
                elif outcome == _RETRY and self._active:
                    self._retries[key] = loop.call_later(self.retry_delay, self._retry, key)
                self._check_idle()

    def _retry(self, key: ObjectKey) -> None:
        self._retries.pop(key, None)
        self._enqueue(key)

    # -- one write (in a pool thread) ------------------------------------------------------------
    def _write(
        self,
        key: ObjectKey,
        spec: StatusWriterSpec,
        computed: Mapping[str, Any],
        load_balancer: Mapping[str, Any] | None,
    ) -> str:
        kind = key.kind
        self.metrics.status_update_total.labels(kind=kind).inc()
        started = time.perf_counter()
        outcome = _FAILED
        try:
            status = _with_load_balancer(spec, computed, load_balancer)
            outcome = self._write_with_retries(key, spec, _plain(status))
        except ApiException as err:
            code = status_code(err)
            # Throttled or a server-side problem: try again later; anything else (e.g. a status
            # the schema refuses) would fail the same way again.
            outcome = _RETRY if code is None or code == 429 or code >= 500 else _FAILED
            log.warning("%s: writing status failed: %s %s", key, err.status, err.reason)
        except Exception as err:  # connection errors, a plugin's merge or overlay raising
            outcome = _RETRY
            log.warning("%s: writing status failed: %r", key, err)
        finally:
            failed = outcome in (_FAILED, _RETRY)
            if outcome in (_SUCCESS, _NOOP):
                self.metrics.status_update_success.labels(kind=kind).inc()
            if outcome == _NOOP:
                self.metrics.status_update_noop.labels(kind=kind).inc()
            if failed:
                self.metrics.status_update_failed.labels(kind=kind).inc()
            self.metrics.status_update_duration.labels(kind=kind, error=str(failed).lower()).observe(
                time.perf_counter() - started
            )
        return outcome

    def _write_with_retries(self, key: ObjectKey, spec: StatusWriterSpec, computed: dict[str, Any]) -> str:
        path = object_path(spec.gvk, key.namespace or None, key.name)
        for attempt in range(len(CONFLICT_BACKOFF) + 1):
            try:
                obj = request_json(self.api_client, "GET", path, timeout=self.request_timeout)
            except ApiException as err:
                if status_code(err) == 404:
                    return _GONE
                raise
            current = obj.get("status")
            current = current if isinstance(current, Mapping) else {}
            desired = spec.merge(current, computed) if spec.merge is not None else computed
            if desired is None or dict(desired) == current:
                return _NOOP
            body: dict[str, Any] = {"status": merge_patch(current, _plain(desired))}
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                body["metadata"] = {"resourceVersion": version}
            try:
                request_json(
                    self.api_client,
                    "PATCH",
                    path + "/status",
                    body=body,
                    content_type=MERGE_PATCH,
                    timeout=self.request_timeout,
                )
            except ApiException as err:
                code = status_code(err)
                if code == 404:
                    return _GONE
                if code != 409:
                    raise
                self.metrics.status_update_conflict.labels(kind=key.kind).inc()
                if attempt < len(CONFLICT_BACKOFF):
                    time.sleep(CONFLICT_BACKOFF[attempt])
                continue
            return _SUCCESS
        log.warning("%s: status not written: it kept changing (conflicts)", key)
        return _RETRY


# -- wiring for `cpx serve` ----------------------------------------------------------------------


@attrs.define(eq=False)
class StatusWriting:
    """The running status writer of ``cpx serve``: feed it each rebuild's changed statuses."""

    updater: StatusUpdater
    elector: LeaderElector | None = None  # None with --disable-leader-election
    lb_watcher: ServiceLoadBalancerWatcher | None = None  # None with --ingress-status-address
    tasks: list[asyncio.Task[None]] = attrs.field(factory=list)

    def submit(self, statuses: Mapping[ObjectKey, ObjectStatus | None]) -> None:
        self.updater.submit(statuses)

    async def stop(self) -> None:
        """Stop writing and release the Lease (so that a follower takes over at once)."""
        for task in reversed(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def start_status_writing(
    api_client: Any, pipeline: SnapshotHandler, options: StatusWritingOptions, metrics: Metrics
) -> StatusWriting:
    """Start the updater, the leader election and the Envoy Service watcher (on the running loop).

    Feed ``StatusWriting.submit`` with ``pipeline.changed_statuses()`` after every rebuild (the
    :class:`cpx.status.reporter.StatusReporter` does, given it as ``sink``); ``await stop()`` on shutdown.
    """
    updater = StatusUpdater(api_client, pipeline.status_writers, metrics, concurrency=options.concurrency)
    writing = StatusWriting(updater)
    writing.tasks.append(asyncio.create_task(updater.run(), name="status-updater"))
    if not options.ingress_status_address:
        writing.lb_watcher = ServiceLoadBalancerWatcher(
            api_client, options.envoy_service_name, options.envoy_service_namespace, updater.set_load_balancer
        )
        writing.tasks.append(asyncio.create_task(writing.lb_watcher.run(), name="envoy-service-watch"))
    if options.disable_leader_election:
        log.info("leader election disabled: this replica writes status")
        updater.start_writing()
    else:
        writing.elector = LeaderElector(
            api_client,
            options.leader_election_resource_name,
            options.leader_election_resource_namespace,
            options.identity,
            lease_duration=options.leader_election_lease_duration,
            renew_deadline=options.leader_election_renew_deadline,
            retry_period=options.leader_election_retry_period,
            on_started_leading=updater.start_writing,
            on_stopped_leading=updater.stop_writing,
            metrics=metrics,
        )
        # Last in the list: stopped first, so the Lease is released while the rest winds down.
        writing.tasks.append(asyncio.create_task(writing.elector.run(), name="leader-election"))
    return writing
