"""Load-balancer status from the Envoy Service: its ``status.loadBalancer``, watched (Kubernetes mode).

Contour's loadBalancerStatusWriter copies the Envoy Service's load-balancer address (or
``--ingress-status-address``, which then wins and the Service is not watched) into the status of
the objects it serves.  In cpx the watcher here hands the Service's ``status.loadBalancer`` to
:meth:`cpx.status.updater.StatusUpdater.set_load_balancer`, which has each computed status of the
kinds whose ``StatusWriterSpec.load_balancer`` opted in put it in (the flag's side is
:mod:`cpx.status.loadbalancer`).

The Service is read, then watched (with a field selector on its name); the watch is re-opened
when the server ends it or the connection drops.  The blocking client runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cpx.objects import SERVICE
from cpx.sources.kube.rest import ApiException, collection_path, object_path, request_json, status_code

log = logging.getLogger("cpx.status.loadbalancer_watch")


def service_load_balancer(service: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The Service's ``status.loadBalancer`` ({} when it has none yet); None without a Service."""
    if service is None:
        return None
    status = service.get("status")
    lb = status.get("loadBalancer") if isinstance(status, Mapping) else None
    return dict(lb) if isinstance(lb, Mapping) else {}


class ServiceLoadBalancerWatcher:
    """Calls ``on_change(load_balancer)`` on the event loop whenever the Service's
    ``status.loadBalancer`` changes (None: the Service does not exist)."""

    def __init__(
        self,
        api_client: Any,
        name: str,
        namespace: str,
        on_change: Callable[[Mapping[str, Any] | None], None],
        *,
        watch_timeout: int = 300,
        retry_delay: float = 2.0,
    ) -> None:
        self.api_client = api_client
        self.name = name
        self.namespace = namespace
        self.on_change = on_change
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self._stop = threading.Event()
        self._response: Any = None
        self._last: Mapping[str, Any] | None = None
        self._seen = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._stop.clear()
        thread = asyncio.to_thread(self._run_blocking, loop)
        try:
            await thread
        finally:
            self.stop()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown()  # unblocks the watcher thread's read
            except Exception:
                response.close()

    # -- in the thread ---------------------------------------------------------------------------
    def _run_blocking(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self._stop.is_set():
            try:
                self._list_and_watch(loop)
            except Exception as err:
                if self._stop.is_set():
                    break
                log.warning("watching Service %s/%s: %s", self.namespace, self.name, err)
                self._stop.wait(self.retry_delay)

    def _list_and_watch(self, loop: asyncio.AbstractEventLoop) -> None:
        path = object_path(SERVICE, self.namespace, self.name)
        try:
            service = request_json(self.api_client, "GET", path, timeout=30)
        except ApiException as err:
            if status_code(err) != 404:
                raise
            service = None
        self._deliver(loop, service)
        query = [
            ("watch", "true"),
            ("fieldSelector", f"metadata.name={self.name}"),
            ("timeoutSeconds", str(self.watch_timeout)),
        ]
        version = ((service or {}).get("metadata") or {}).get("resourceVersion")
        if version:
            query.append(("resourceVersion", str(version)))
        method, url, headers, _body, _post = self.api_client.param_serialize(
            method="GET",
            resource_path=collection_path(SERVICE, self.namespace),
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(
            method, url, header_params=headers, _request_timeout=(10, self.watch_timeout + 30)
        )
        raw = response.response
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException(status=response.status, reason=str(response.reason))
        self._response = raw
        try:
            if self._stop.is_set():
                return
            for chunk in raw:
                if self._stop.is_set():
                    return
                line = chunk.strip()
                if not line:
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    log.debug("watch of Service %s/%s ended: %s", self.namespace, self.name, obj)
                    return
                meta = obj.get("metadata") or {}
                if (
                    meta.get("name") != self.name
                    or (meta.get("namespace") or self.namespace) != self.namespace
                ):
                    continue  # a server without field selectors (the test emulator) sends them all
                self._deliver(loop, None if event.get("type") == "DELETED" else obj)
        finally:
            self._response = None
            raw.release_conn()

    def _deliver(self, loop: asyncio.AbstractEventLoop, service: Mapping[str, Any] | None) -> None:
        lb = service_load_balancer(service)
        if self._seen and lb == self._last:
            return
        self._seen, self._last = True, lb
        if self._stop.is_set():
            return
        try:
            loop.call_soon_threadsafe(self.on_change, lb)
        except RuntimeError:  # the loop is closed: shutting down
            self._stop.set()
