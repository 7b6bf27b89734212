"""An emulated Kubernetes API server for tests: kmock's KubernetesEmulator on a thread of its own.

``cpx serve --kubeconfig`` (a subprocess) talks to it through a kubeconfig file
(:meth:`KubeAPI.write_kubeconfig`); the test changes objects through the API, so watches see the
changes, with the blocking helpers :meth:`create`, :meth:`patch`, :meth:`delete`.

What the emulator does not do like a real API server (cpx copes with all of it):

- no resourceVersions on objects, and ``"..."`` as a list's resourceVersion;
- every watch first replays every existing object as ADDED, ignores ``resourceVersion`` and
  ``timeoutSeconds`` (never ends by itself), sends no bookmarks;
- field selectors, label selectors and ``limit`` are ignored;
- a kind is served only once declared (:meth:`declare`) or once it holds an object; others 404;
- PATCH merges dicts recursively and replaces lists (no strategic merge), ``None`` deletes a key;
- ``/api/v1/namespaces`` itself fails to parse (500): :func:`fix_kmock_paths` patches that.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from cpx.objects import GroupVersionKind, ObjectKey

_fixed = False


def fix_kmock_paths() -> None:
    """Teach kmock (0.8) that ``/api/v1/namespaces[/name]`` is the Namespace kind (idempotent).

    Its path parser reads ``namespaces`` as the start of a namespaced path and fails on the
    collection (500), which leaves the core's Namespace watch unusable.
    """
    global _fixed  # noqa: PLW0603
    if _fixed:
        return
    from kmock._internal import parsing  # noqa: PLC0415

    original = parsing.parse_path

    def parse_path(path: str) -> parsing.ParsedPath:
        parts = path.strip("/").split("/")
        if len(parts) in (3, 4) and parts[0] == "api" and parts[2] == "namespaces":
            name = parts[3] if len(parts) == 4 else None
            return parsing.ParsedPath(group="", version=parts[1], plural="namespaces", name=name)
        return original(path)

    parsing.parse_path = parse_path
    _fixed = True


def _path(api_version: str, plural: str, namespace: str | None, name: str | None = None) -> str:
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    return f"{base}/{name}" if name else base


def _resource_key(resource: GroupVersionKind | str) -> str:
    """kmock's name of a kind: ``v1/services``, ``networking.k8s.io/v1/ingresses``."""
    return resource if isinstance(resource, str) else f"{resource.api_version}/{resource.plural}"


class KubeAPIError(RuntimeError):
    """The emulator answered a request with an error status."""


class _Plurals(dict[str, str]):
    def __missing__(self, kind: str) -> str:
        lower = kind.lower()
        if lower.endswith("s"):
            return lower + "es"
        return lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


class KubeAPI:
    """A KubernetesEmulator served on 127.0.0.1 from a background thread (its own event loop).

    Kinds are found by their plural: the ``plural`` of a :class:`GroupVersionKind` in ``kinds``,
    else ``plurals`` (kind -> plural), else the English rule Kubernetes' kinds follow
    (``Service`` -> ``services``, ``...Proxy`` -> ``...proxies``, ``...ss`` -> ``...sses``).
    Namespace and the kinds in ``kinds`` whose GroupVersionKind is not ``namespaced`` are
    cluster-scoped.
    """

    CLUSTER_SCOPED = frozenset({"Namespace"})

    def __init__(
        self,
        plurals: Mapping[str, str] | None = None,
        *,
        port: int | None = None,
        kinds: Iterable[GroupVersionKind | str] = (),
        objects: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        kinds = list(kinds)
        given = {k.kind: k.plural for k in kinds if isinstance(k, GroupVersionKind)}
        self.plurals = _Plurals({**given, **(plurals or {})})
        self.cluster_scoped = self.CLUSTER_SCOPED | {
            k.kind for k in kinds if isinstance(k, GroupVersionKind) and not k.namespaced
        }
        self.port = port
        # Served from the start (a restart on the same port can bring back a known state).
        self.kinds = [_resource_key(k) for k in kinds]
        self.objects = [dict(obj) for obj in objects]
        self.emulator: Any = None
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 10.0) -> KubeAPI:
        fix_kmock_paths()
        ready = self._ready = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            import kmock  # noqa: PLC0415 (a test dependency)

            try:
                async with kmock.KubernetesEmulator() as emulator:
                    for kind in self.kinds:
                        emulator.resources[kind] = kmock.ResourceInfo()
                    for obj in self.objects:
                        emulator.objects[self._store_key(obj)] = obj
                    async with kmock.Server(emulator, port=self.port) as server:
                        await self._serve(emulator, server)
            except BaseException as err:
                failure.append(err)
                ready.set()
                raise

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), name="kube-api", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failure:
            raise KubeAPIError(f"the emulated API server did not start: {failure}")
        return self

    async def _serve(self, emulator: Any, server: Any) -> None:
        self.emulator = emulator
        self.url = str(server.url).rstrip("/")
        self.port = server.port
        # Do not wait (aiohttp's default: 60 s) for the endless watch streams on the way out.
        runner = server.server.runner
        if runner is not None:
            runner._shutdown_timeout = 0.5
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()

    def stop(self, timeout: float = 5.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
        self._loop = self._stop = self._thread = None

    def __enter__(self) -> KubeAPI:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | Path) -> Path:
        """A kubeconfig (no credentials) for the emulator; returns its path."""
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kmock", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {}}],
            "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "test"}}],
            "current-context": "kmock",
        }
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(doc))
        return target

    # -- the store -------------------------------------------------------------------------------
    def declare(self, *resources: GroupVersionKind | str) -> None:
        """Serve these kinds (lists answer 404 until a kind is declared or holds an object)."""
        for resource in resources:
            key = _resource_key(resource)
            self._call(lambda key=key: self.emulator.resources.__setitem__(key, {}))

    def _store_key(self, obj: Mapping[str, Any]) -> tuple[str, str | None, str]:
        key = ObjectKey.of(obj)
        resource = f"{obj.get('apiVersion', '')}/{self.plurals[key.kind]}"
        namespace = None if key.kind in self.cluster_scoped else (key.namespace or "default")
        return (resource, namespace, key.name)

    def requests(self) -> list[Any]:
        """Every request the emulator has served (kmock ``Request`` objects)."""
        return list(self._call(lambda: list(self.emulator)))

    def _call(self, fn: Any) -> Any:
        """Run ``fn`` on the emulator's loop (its state is not thread-safe)."""
        loop = self._loop
        if loop is None:
            raise KubeAPIError("the emulated API server is not running")

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(10)

    # -- the API ---------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            raise KubeAPIError(f"{method} {path}: {err.code} {err.read()[:300]!r}") from None
        return json.loads(raw) if raw else None

    def _object_path(self, obj: Mapping[str, Any], with_name: bool) -> str:
        key = ObjectKey.of(obj)
        api_version = str(obj.get("apiVersion", ""))
        plural = self.plurals[key.kind]
        namespace = None if key.kind in self.cluster_scoped else (key.namespace or "default")
        return _path(api_version, plural, namespace, key.name if with_name else None)

    def create(self, *objs: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> None:
        """POST each object (lists of objects are flattened)."""
        for item in objs:
            for obj in [item] if isinstance(item, Mapping) else item:
                self.request("POST", self._object_path(obj, with_name=False), obj)

    def patch(self, obj: Mapping[str, Any], changes: Mapping[str, Any]) -> None:
        """Merge ``changes`` into the object ``obj`` names (dicts merge, lists are replaced)."""
        self.request("PATCH", self._object_path(obj, with_name=True), changes)

    def delete(self, obj: Mapping[str, Any]) -> None:
        self.request("DELETE", self._object_path(obj, with_name=True))
