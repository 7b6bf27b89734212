"""Kubernetes mode's object source: list and watch every kind the enabled plugins declare.

One watcher per (kind, namespace) — a single cluster-wide one per kind unless namespaces are
given, and always one for cluster-scoped kinds — runs in its own thread with the synchronous
``kubernetes`` client (a thread each: long-lived watches would exhaust asyncio's default
executor, which the DAG rebuild also needs).  Each watcher:

1. lists the kind (pages of ``page_size``), hands the changes since its last list to the event
   handler (upserts for new or changed objects, deletes for vanished ones) and, the first time,
   reports its source as synced: the handler builds nothing before every watcher did;
2. watches from the list's resourceVersion with ``timeoutSeconds``; a watch the server ends
   cleanly resumes from the last resourceVersion seen, while 410 Gone, a dropped or stalled
   stream, or an error leads back to 1 (after an exponential backoff for errors).

Events reach the handler on the event loop's thread (``call_soon_threadsafe``), in order.  Nothing
is deleted until a list succeeds, so an unreachable API server leaves the last good
configuration in place.  Objects are slimmed before they are kept: ``managedFields`` are dropped,
and so is the data of Secrets that hold neither a TLS key pair nor CA material.

A kind the API server does not serve (its CRD is not installed: 404 on the list) is reported once;
by default its watcher then only re-checks now and then (and starts when the CRD appears), or,
with ``on_missing_crd="fail"``, :meth:`KubeSource.run` raises :class:`MissingKindError`.

Servers that give no resourceVersions (test emulators) are handled by comparing content and by
relisting whenever a watch ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs
import urllib3
from kubernetes.client import ApiClient

from cpx import objects as k8s
from cpx.errors import CpxError
from cpx.events import EventHandler
from cpx.objects import KubeObject
from cpx.records import WatchSpec
from cpx.sources.kube.rest import collection_path

log = logging.getLogger("cpx.sources.kube")

SOURCE_PREFIX = "kube"
TLS_SECRET_TYPE = "kubernetes.io/tls"
# Secret keys that make a Secret worth keeping whole whatever its type (CA bundles, CRLs).
KEPT_SECRET_KEYS = ("ca.crt", "crl.pem")
MissingCrdPolicy = Literal["skip", "fail"]

_Change = tuple[Literal["upsert", "delete"], KubeObject]


class MissingKindError(CpxError):
    """A watched kind is not served by the API server (its CRD is not installed)."""


class ApiError(Exception):
    """The API server answered a request (or a watch stream) with an error status."""

    def __init__(self, status: int, reason: str, message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message


class _Stopped(Exception):
    """The watcher was asked to stop."""


# -- objects -----------------------------------------------------------------------------------


def slim(obj: KubeObject, gvk: k8s.GroupVersionKind) -> KubeObject:
    """What cpx keeps of an object it read: no managedFields; no data of non-TLS, non-CA Secrets.

    List items carry no apiVersion/kind on a real API server: they are set from ``gvk``.
    """
    obj["apiVersion"] = gvk.api_version
    obj["kind"] = gvk.kind
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    if gvk.group_kind == k8s.SECRET.group_kind:
        data = obj.get("data")
        if data and obj.get("type") != TLS_SECRET_TYPE and not any(k in data for k in KEPT_SECRET_KEYS):
            del obj["data"]
        obj.pop("stringData", None)
    return obj


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def field_selector_matches(obj: Mapping[str, Any], selector: str | None) -> bool:
    """Whether ``obj`` passes a field selector (``a=b``, ``a==b``, ``a!=b``, comma-separated).

    The API server applies the selector already; this guards against servers that ignore it.
    """
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            path, _, want = term.partition("!=")
            if _field_value(obj, path.strip()) == want.strip():
                return False
        elif "=" in term:
            path, _, want = term.partition("==" if "==" in term else "=")
            if _field_value(obj, path.strip()) != want.strip():
                return False
    return True


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (k8s.namespace_of(obj), k8s.name_of(obj))


def _version(obj: Mapping[str, Any]) -> str:
    return str(k8s.meta(obj).get("resourceVersion") or "")


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` is no news: the same resourceVersion, or (without one) the same content."""
    version = _version(new)
    if version:
        return version == _version(old)
    return old == new


# -- one watcher -------------------------------------------------------------------------------


@attrs.frozen
class Target:
    """What one watcher watches: a kind, in one namespace or cluster-wide."""

    spec: WatchSpec
    namespace: str | None
    plugin: str = ""

    @property
    def gvk(self) -> k8s.GroupVersionKind:
        return self.spec.gvk

    @property
    def source_name(self) -> str:
        where = f"@{self.namespace}" if self.namespace else ""
        return f"{SOURCE_PREFIX}:{self.gvk}{where}"

    @property
    def path(self) -> str:
        return collection_path(self.gvk, self.namespace)

    def describe(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        owner = f" (plugin {self.plugin!r})" if self.plugin else ""
        return f"{self.gvk.api_version}/{self.gvk.kind}{where}{owner}"


@attrs.define(eq=False)
class Backoff:
    """Exponential backoff with jitter: ``base``, doubling up to ``cap``."""

    base: float = 0.5
    cap: float = 30.0
    failures: int = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.base * 2.0**self.failures)
        self.failures += 1
        return delay * random.uniform(0.8, 1.0)

    def reset(self) -> None:
        self.failures = 0


@attrs.define(eq=False)
class Watcher:
    """Lists and watches one :class:`Target` in a thread of its own (see the module docstring)."""

    source: KubeSource
    target: Target
    known: dict[tuple[str, str], KubeObject] = attrs.field(factory=dict)
    synced: bool = False
    missing: bool = False  # the last list answered 404
    # Whether the server versions objects; without resourceVersions a watch cannot resume.
    versioned: bool = True
    backoff: Backoff = attrs.field(init=False)
    thread: threading.Thread | None = None
    _stop: threading.Event = attrs.field(factory=threading.Event)
    _response: Any = None
    _failing: str = ""  # the kind of error being retried, to log each streak once

    def __attrs_post_init__(self) -> None:
        self.backoff = Backoff(self.source.backoff_base, self.source.backoff_cap)

    # -- lifecycle (any thread) ----------------------------------------------------------------
    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=self.target.source_name, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()  # unblocks a read in progress (urllib3 >= 2.3)

    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- the loop (the watcher's thread) ---------------------------------------------------------
    def run(self) -> None:
        try:
            self._run_forever()
        except _Stopped:
            pass
        except Exception as err:  # a bug: say so, and do not take the process down silently
            log.exception("watcher for %s died", self.target.describe())
            self.source.fail(err)

    def _run_forever(self) -> None:
        relist = True
        version = ""
        while not self.stopping():
            try:
                if relist:
                    version = self.relist()
                    relist = False
                version, clean = self.watch(version)
                # A watch that ended cleanly resumes where it stopped; anything else relists.
                relist = not (clean and version and self.versioned)
            except ApiError as err:
                if self.stopping():
                    return
                relist = True
                if err.status == 410:
                    log.debug("%s: resourceVersion expired (410 Gone); relisting", self.target.describe())
                    # At once the first time; a 410 again before any event backs off.
                    delay = self.backoff.next_delay()
                    if self.backoff.failures > 1:
                        self._sleep(delay)
                    continue
                if err.status == 404:
                    self._missing(err)
                    continue
                self._retry(f"HTTP {err.status}", f"the API server answered {err}")
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
                if self.stopping():
                    return
                relist = True
                self._retry("unreachable", f"{type(err).__name__}: {err}")

    def _retry(self, kind: str, problem: str) -> None:
        """Back off; the first error of a streak (by ``kind``) is logged, repeats only at debug."""
        delay = self.backoff.next_delay()
        if kind != self._failing:
            log.warning(
                "cannot list/watch %s: %s; retrying with backoff (up to %.0fs), still serving the "
                "last good configuration",
                self.target.describe(),
                problem,
                self.backoff.cap,
            )
            self._failing = kind
        else:
            log.debug("%s: still failing (%s); next try in %.1fs", self.target.describe(), problem, delay)
        self._sleep(delay)

    def _missing(self, err: ApiError) -> None:
        target = self.target
        if not self.missing:
            self.missing = True
            if not self.synced and self.source.on_missing_crd == "fail":
                self.source.fail(
                    MissingKindError(
                        f"the API server does not serve {target.describe()} ({target.path}: {err.reason}); "
                        "is its CRD installed? Install it, disable the plugin (--plugins), or "
                        "start with --on-missing-crd=skip"
                    )
                )
                raise _Stopped
            log.error(
                "the API server does not serve %s (%s: %s): is its CRD installed? Skipping this kind "
                "(cpx treats it as having no objects) and re-checking every %.0fs; install the CRD, "
                "or disable the plugin (--plugins); --on-missing-crd=fail makes this fatal",
                target.describe(),
                target.path,
                err.reason,
                self.source.missing_recheck,
            )
        self._mark_synced()
        self._sleep(self.source.missing_recheck)

    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise _Stopped

    def _mark_synced(self) -> None:
        if not self.synced:
            self.synced = True
            self.source.emit(self.target.source_name, [], synced=True)

    # -- list ------------------------------------------------------------------------------------
    def relist(self) -> str:
        """List every object (in pages), hand the differences to the handler; the resourceVersion."""
        items: dict[tuple[str, str], KubeObject] = {}
        version = ""
        token = ""
        while True:
            query: list[tuple[str, Any]] = [("limit", self.source.page_size)]
            if token:
                query.append(("continue", token))
            page = self._get_json(self._query(query), self.source.request_timeout)
            if self.stopping():
                raise _Stopped
            meta = page.get("metadata") or {}
            for item in page.get("items") or ():
                obj = self._admit(item)
                if obj is not None:
                    items[_key(obj)] = obj
            version = str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            if not token:
                break
        if self.missing:
            log.info("%s is served now: watching it", self.target.describe())
            self.missing = False
        if self._failing:
            log.info("%s: listed again", self.target.describe())
            self._failing = ""
        self._reconcile(items)
        return version

    def _reconcile(self, items: dict[tuple[str, str], KubeObject]) -> None:
        changes: list[_Change] = []
        for key, obj in self.known.items():
            if key not in items:
                changes.append(("delete", obj))
        for key, obj in items.items():
            old = self.known.get(key)
            if old is None or not _same(old, obj):
                changes.append(("upsert", obj))
            else:
                items[key] = old  # keep the instance the handler holds
        self.known = items
        if changes and self.synced:
            log.info("%s: relisted; %d change(s) missed meanwhile", self.target.describe(), len(changes))
        first = not self.synced
        self.synced = True
        self.source.emit(self.target.source_name, changes, synced=first)

    def _admit(self, item: Any) -> KubeObject | None:
        """The slimmed object, or None when it is not one or the field selector excludes it."""
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            return None
        if not _version(item):
            self.versioned = False
        if not field_selector_matches(item, self.target.spec.field_selector):
            return None
        return slim(item, self.target.gvk)

    # -- watch -----------------------------------------------------------------------------------
    def watch(self, version: str) -> tuple[str, bool]:
        """Watch from ``version`` until the stream ends: (last resourceVersion, ended cleanly)."""
        # Spread over 1-1.5 times watch_timeout so that watchers do not all re-watch at once.
        seconds = self.source.watch_timeout * random.uniform(1.0, 1.5)
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", max(1, math.ceil(seconds))),
        ]
        if version:
            query.append(("resourceVersion", version))
        # The server ends the watch after timeoutSeconds: silence well beyond that is a stall.
        read_timeout = seconds + self.source.stall_grace
        response = self._request(self._query(query), (self.source.connect_timeout, read_timeout))
        self._response = response
        try:
            if self.stopping():
                raise _Stopped
            for line in _lines(response):
                version = self._on_event(line, version)
            if self.stopping():
                raise _Stopped
            self.backoff.reset()
            return version, True
        except urllib3.exceptions.ReadTimeoutError:
            if self.stopping():
                raise _Stopped from None
            log.debug("%s: watch stalled; relisting", self.target.describe())
            return version, False
        finally:
            self._response = None
            # Close before releasing: a half-read stream must not go back into the pool (the
            # server would keep it open, and the next request on it would read stale events).
            response.close()
            response.release_conn()

    def _on_event(self, line: bytes, version: str) -> str:
        try:
            event = json.loads(line)
        except ValueError:
            raise ValueError(f"malformed watch event: {line[:200]!r}") from None
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"malformed watch event: {line[:200]!r}")
        if kind == "ERROR":
            raise ApiError(
                int(obj.get("code") or 500), str(obj.get("reason") or "Error"), str(obj.get("message") or "")
            )
        new_version = _version(obj) if isinstance(obj.get("metadata"), dict) else ""
        if kind == "BOOKMARK":
            return new_version or version
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.debug("%s: ignoring watch event %r", self.target.describe(), kind)
            return version
        self.backoff.reset()
        admitted = self._admit(obj)
        key = _key(obj)
        old = self.known.get(key)
        if kind == "DELETED" or admitted is None:
            if old is not None:
                del self.known[key]
                self.source.emit(self.target.source_name, [("delete", old)])
        elif old is None or not _same(old, admitted):
            self.known[key] = admitted
            self.source.emit(self.target.source_name, [("upsert", admitted)])
        return new_version or version

    # -- HTTP ------------------------------------------------------------------------------------
    def _query(self, query: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        selector = self.target.spec.field_selector
        return [*query, ("fieldSelector", selector)] if selector else query

    def _request(self, query: list[tuple[str, Any]], timeout: tuple[float, float]) -> Any:
        """GET ``target.path`` with ``query``: the unread urllib3 response; ApiError unless 2xx."""
        api = self.source.api_client
        serialized = api.param_serialize(
            method="GET",
            resource_path=self.target.path,
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        response = api.call_api(*serialized, _request_timeout=timeout).response
        if not 200 <= response.status < 300:
            body = response.data
            response.release_conn()
            raise _api_error(response.status, response.reason or "", body)
        return response

    def _get_json(self, query: list[tuple[str, Any]], timeout: tuple[float, float]) -> dict[str, Any]:
        response = self._request(query, timeout)
        try:
            doc = json.loads(response.data)
        finally:
            response.release_conn()
        if not isinstance(doc, dict):
            raise ValueError(f"{self.target.path}: expected a list object, got {type(doc).__name__}")
        return doc


def _api_error(status: int, reason: str, body: bytes | None) -> ApiError:
    message = ""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        doc = json.loads(body or b"")
        reason = str(doc.get("reason") or reason)
        message = str(doc.get("message") or "")
    return ApiError(status, reason, message[:300])


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-separated JSON documents of a watch stream, as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                break
            line, buffer = buffer[:end].strip(), buffer[end + 1 :]
            if line:
                yield line
    if buffer.strip():
        yield buffer.strip()


# -- the source --------------------------------------------------------------------------------


@attrs.define(eq=False)
class KubeSource:
    """Every watched kind, listed and watched; feeds an :class:`EventHandler` (see the module doc).

    ``watches`` are the plugins' :class:`WatchSpec` records, or ``(plugin name, WatchSpec)`` pairs
    (the plugin is named in messages); ``namespaces`` limits namespaced kinds (empty: all).
    """

    api_client: ApiClient
    watches: Sequence[WatchSpec | tuple[str, WatchSpec]]
    namespaces: Sequence[str] = ()
    on_missing_crd: MissingCrdPolicy = attrs.field(default="skip", kw_only=True)
    watch_timeout: float = attrs.field(default=300.0, kw_only=True)  # server-side timeoutSeconds
    # How long past the watch's timeoutSeconds a silent stream counts as stalled (then: relist).
    stall_grace: float = attrs.field(default=10.0, kw_only=True)
    connect_timeout: float = attrs.field(default=10.0, kw_only=True)
    request_timeout: tuple[float, float] = attrs.field(default=(10.0, 60.0), kw_only=True)
    page_size: int = attrs.field(default=500, kw_only=True)
    backoff_base: float = attrs.field(default=0.5, kw_only=True)
    backoff_cap: float = attrs.field(default=30.0, kw_only=True)
    missing_recheck: float = attrs.field(default=60.0, kw_only=True)
    watchers: list[Watcher] = attrs.field(init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _handler: EventHandler | None = attrs.field(default=None, init=False)
    _failed: asyncio.Future[None] | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.on_missing_crd not in ("skip", "fail"):
            raise ValueError(f"on_missing_crd must be 'skip' or 'fail', not {self.on_missing_crd!r}")
        self.watchers = [Watcher(self, target) for target in self.targets()]

    def targets(self) -> list[Target]:
        namespaces = list(dict.fromkeys(self.namespaces))
        out: list[Target] = []
        for item in self.watches:
            plugin, spec = item if isinstance(item, tuple) else ("", item)
            if spec.gvk.namespaced and namespaces:
                out += [Target(spec, namespace, plugin) for namespace in namespaces]
            else:
                out.append(Target(spec, None, plugin))
        return out

    @property
    def source_names(self) -> set[str]:
        """The names each watcher reports its initial sync under."""
        return {w.target.source_name for w in self.watchers}

    async def run(self, handler: EventHandler) -> None:
        """List and watch until cancelled; raises MissingKindError (``on_missing_crd="fail"``)."""
        loop = asyncio.get_running_loop()
        self._loop, self._handler = loop, handler
        self._failed = loop.create_future()
        # Before any watcher starts: nothing is built until each has listed its kind.
        handler.pending_sources.update(self.source_names)
        scope = ", ".join(self.namespaces) if self.namespaces else "all namespaces"
        log.info(
            "watching %d kind(s) in %s on %s",
            len(self.watches),
            scope,
            self.api_client.configuration.host,
        )
        for watcher in self.watchers:
            watcher.start()
        try:
            await self._failed
        finally:
            await self.stop()

    async def stop(self, timeout: float = 2.0) -> None:
        """Stop every watcher; one stuck in a request is left behind (a daemon thread, silenced)."""
        self._handler = None  # nothing more reaches the handler, even from a late thread
        for watcher in self.watchers:
            watcher.stop()
        threads = [w.thread for w in self.watchers if w.thread is not None]
        await asyncio.to_thread(_join_all, threads, timeout)

    # -- called from watcher threads -------------------------------------------------------------
    def emit(self, source: str, changes: list[_Change], *, synced: bool = False) -> None:
        """Hand changes (then, with ``synced``, the end of the initial list) to the handler.

        Called from watcher threads; the handler is called on the event loop's thread.
        """
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: shutting down
            loop.call_soon_threadsafe(self._deliver, source, changes, synced)

    def fail(self, err: BaseException) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._set_failed, err)

    # -- on the loop -----------------------------------------------------------------------------
    def _deliver(self, source: str, changes: Iterable[_Change], synced: bool) -> None:
        handler = self._handler
        if handler is None:
            return
        for op, obj in changes:
            if op == "upsert":
                handler.upsert(obj, source)
            else:
                handler.delete(obj, source)
        if synced:
            handler.synced(source)

    def _set_failed(self, err: BaseException) -> None:
        if self._failed is not None and not self._failed.done():
            self._failed.set_exception(err)


def _join_all(threads: Iterable[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def parse_namespaces(values: Iterable[str]) -> list[str]:
    """``--watch-namespaces`` values (comma-separated, repeatable) as a list, in order."""
    return list(dict.fromkeys(p.strip() for v in values for p in v.split(",") if p.strip()))
