"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Every replica builds DAGs and serves xDS; only the one holding the Lease writes status.  As in
client-go's ``leaderelection`` package (which Contour uses through controller-runtime):

- a candidate reads the Lease every ``retry_period`` (jittered); it takes the Lease when nobody
  holds it, or when the holder has not renewed it for ``leaseDurationSeconds`` *as observed on
  this replica's clock* (renewTime is never compared across clocks);
- the leader renews every ``retry_period`` and gives up when it could not renew for
  ``renew_deadline`` (or sees another holder);
- on stop the leader releases the Lease (empty holderIdentity), so a follower takes over at its
  next try instead of waiting for the lease to expire;
- writes carry the Lease's resourceVersion, so two candidates racing for it cannot both win
  (the API server answers 409 Conflict to the slower one).

Unlike client-go's default, losing the Lease does not end the process: the replica goes back to
being a candidate (``on_stopped_leading`` has stopped its status writing by then).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from cpx.config import StatusWritingOptions
from cpx.objects import GroupVersionKind
from cpx.ops.metrics import Metrics
from cpx.sources.kube.rest import (
    MERGE_PATCH,
    ApiException,
    collection_path,
    object_path,
    request_json,
    status_code,
)

log = logging.getLogger("cpx.status.leader")

LEASE = GroupVersionKind(group="coordination.k8s.io", version="v1", kind="Lease", plural="leases")
JITTER_FACTOR = 1.2  # client-go's JitterFactor: the acquire retry waits retry_period * [1, 1.2)
RELEASE_ATTEMPTS = 3  # a conflicting write (a renewal still in flight) is retried this often
_DEFAULTS = StatusWritingOptions()


def default_identity() -> str:
    """controller-runtime's: the host (pod) name and a unique suffix."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(when: dt.datetime) -> str:
    """A metav1.MicroTime."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` until cancelled; see the module docstring.

    ``on_started_leading`` / ``on_stopped_leading`` are called on the event loop.
    """

    def __init__(  # noqa: PLR0913  (why: Lease timings are separate knobs, as in Contour)
        self,
        api_client: Any,
        name: str,
        namespace: str,
        identity: str | None = None,
        *,
        lease_duration: float = _DEFAULTS.leader_election_lease_duration,
        renew_deadline: float = _DEFAULTS.leader_election_renew_deadline,
        retry_period: float = _DEFAULTS.leader_election_retry_period,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("the lease duration must be greater than the renew deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(f"the renew deadline must be greater than {JITTER_FACTOR} x the retry period")
        if retry_period <= 0:
            raise ValueError("the retry period must be positive")
        self.api_client = api_client
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.metrics = metrics
        self._leader = False
        # The last Lease spec seen, and when (monotonic) it was first seen: client-go's
        # observedRecord / observedTime.
        self._observed: Mapping[str, Any] | None = None
        self._observed_at = 0.0
        self._request_timeout = max(1.0, renew_deadline / 2)
        self.leading = asyncio.Event()  # set while leading (for tests and callers that wait)

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def holder(self) -> str:
        """The holder in the last observed Lease ("" when none)."""
        return str((self._observed or {}).get("holderIdentity") or "")

    # -- the campaign ----------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            while True:
                await self._acquire()
                self._set_leader(True)
                await self._renew()
                self._set_leader(False)
        finally:
            if self._leader:
                self._set_leader(False)
                try:
                    await asyncio.wait_for(asyncio.to_thread(self._release), self._request_timeout)
                except Exception as err:  # the lease then expires on its own
                    log.warning("could not release the lease %s/%s: %s", self.namespace, self.name, err)

    async def _acquire(self) -> None:
        logged = False
        while True:
            if await self._try() is True:
                log.info("%s acquired the lease %s/%s", self.identity, self.namespace, self.name)
                return
            if not logged:
                log.info(
                    "waiting for the lease %s/%s (held by %s)",
                    self.namespace,
                    self.name,
                    self.holder or "nobody",
                )
                logged = True
            await asyncio.sleep(self.retry_period * random.uniform(1.0, JITTER_FACTOR))

    async def _renew(self) -> None:
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self.retry_period)
            result = await self._try()
            if result is True:
                renewed = time.monotonic()
                continue
            if result is None:
                log.warning("lost the lease %s/%s to %s", self.namespace, self.name, self.holder)
                return
            if time.monotonic() - renewed >= self.renew_deadline:
                log.warning(
                    "could not renew the lease %s/%s for %.1f s: no longer leader",
                    self.namespace,
                    self.name,
                    self.renew_deadline,
                )
                return

    async def _try(self) -> bool | None:
        """True: holding the lease; False: not now (an error, a conflict); None: another holds it."""
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self._try_acquire_or_renew), self._request_timeout
            )
        except (TimeoutError, ApiException, OSError, ValueError) as err:
            log.debug("lease %s/%s: %s", self.namespace, self.name, err)
            return False
        except Exception as err:  # urllib3 errors and the like: never end the campaign
            log.warning("lease %s/%s: %s", self.namespace, self.name, err)
            return False

    def _set_leader(self, leader: bool) -> None:
        self._leader = leader
        if self.metrics is not None:
            self.metrics.leader_election_master_status.labels(name=self.name).set(1 if leader else 0)
        callback = self.on_started_leading if leader else self.on_stopped_leading
        if leader:
            self.leading.set()
        else:
            self.leading.clear()
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("leader-election callback failed")

    # -- Lease requests (blocking, in a thread) --------------------------------------------------
    def _observe(self, spec: Mapping[str, Any]) -> None:
        if spec != self._observed:
            self._observed = dict(spec)
            self._observed_at = time.monotonic()

    def _try_acquire_or_renew(self) -> bool | None:
        now = micro_time(dt.datetime.now(dt.UTC))
        path = object_path(LEASE, self.namespace, self.name)
        try:
            lease = request_json(self.api_client, "GET", path, timeout=self._request_timeout)
        except ApiException as err:
            if status_code(err) != 404:
                raise
            return self._create(now)
        meta = lease.get("metadata") or {}
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = str(spec.get("holderIdentity") or "")
        duration = spec.get("leaseDurationSeconds")
        duration = duration if isinstance(duration, int) and duration > 0 else self.lease_duration
        if holder and holder != self.identity and time.monotonic() < self._observed_at + duration:
            return None
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        ours = holder == self.identity
        new_spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": math.ceil(self.lease_duration),
            "acquireTime": spec.get("acquireTime") if ours and spec.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours else transitions + 1,
        }
        if not self._update(meta, new_spec):
            return False
        self._observe(new_spec)
        return True

    def _create(self, now: str) -> bool:
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": math.ceil(self.lease_duration),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
        try:
            request_json(
                self.api_client,
                "POST",
                collection_path(LEASE, self.namespace),
                body=body,
                timeout=self._request_timeout,
            )
        except ApiException as err:
            if status_code(err) == 409:  # another candidate created it first
                return False
            raise
        self._observe(spec)
        return True

    def _update(self, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
        body: dict[str, Any] = {"spec": dict(spec)}
        if meta.get("resourceVersion"):
            # A precondition: the API server refuses (409) the patch if the Lease changed since.
            body["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        try:
            request_json(
                self.api_client,
                "PATCH",
                object_path(LEASE, self.namespace, self.name),
                body=body,
                content_type=MERGE_PATCH,
                timeout=self._request_timeout,
            )
        except ApiException as err:
            if status_code(err) == 409:
                return False
            raise
        return True

    def _release(self) -> None:
        """Give the lease up (client-go's release): an empty holder, lease duration 1 s.

        A renewal still in flight when the campaign was cancelled (its thread cannot be) may
        land between the read and the write: the conflict is retried, or the follower would
        wait for the lease to expire."""
        path = object_path(LEASE, self.namespace, self.name)
        for _attempt in range(RELEASE_ATTEMPTS):
            lease = request_json(self.api_client, "GET", path, timeout=self._request_timeout)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = micro_time(dt.datetime.now(dt.UTC))
            released = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": spec.get("leaseTransitions") or 0,
            }
            if self._update(lease.get("metadata") or {}, released):
                log.info("%s released the lease %s/%s", self.identity, self.namespace, self.name)
                return
