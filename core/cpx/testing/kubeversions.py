"""kmock's emulated API server plus optimistic concurrency, for status and leader-election tests.

kmock's ``KubernetesEmulator`` sets no ``metadata.resourceVersion`` and so never answers 409
Conflict to a stale write (see :mod:`cpx.testing.kubeapi` for its other differences).
:class:`VersionedKubernetesEmulator` stamps a fresh resourceVersion on every create and patch
and refuses a patch whose body carries a stale one, as the API server does with a merge patch
that includes ``metadata.resourceVersion``.  Use it with ``@pytest.mark.kmock(cls=...)``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import rendering  # kmock exports no name for its request type


def api_client_for(emulator: kmock.RawHandler, *, user_agent: str | None = None) -> Any:
    """A ``kubernetes`` ApiClient talking to the running emulator (plain HTTP, no auth)."""
    from kubernetes import client  # noqa: PLC0415

    api = client.ApiClient(client.Configuration(host=str(emulator.url).rstrip("/")))
    if user_agent is not None:
        api.user_agent = user_agent
    return api


@attrs.define(kw_only=True)
class VersionedKubernetesEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with resourceVersions and 409 Conflict on a stale patch."""

    _version: int = attrs.field(default=0, init=False)
    _write_lock: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        writes = (kmock.action.CREATE, kmock.action.UPDATE)
        if request.resource is None or request.action not in writes or not isinstance(request.data, dict):
            return await super()._handle(request)
        async with self._write_lock:  # the check and the write as one step
            meta = request.data.setdefault("metadata", {})
            if request.action == kmock.action.UPDATE and request.name is not None:
                wanted = meta.get("resourceVersion")
                key = (request.resource, request.namespace, request.name)
                if wanted is not None and key in self.objects and not self.objects[key].deleted:
                    have = (self.objects[key].get("metadata") or {}).get("resourceVersion")
                    if have != wanted:
                        raise kmock.KubernetesError(
                            status=409,
                            reason="Conflict",
                            message="the object has been modified; please apply your changes to the "
                            "latest version and try again",
                        )
            self._version += 1
            meta["resourceVersion"] = str(self._version)
            return await super()._handle(request)
