"""What the HTTPProxy processor keeps between builds, so that one change re-processes only the roots
whose result can change.

Per root (a proxy with ``spec.virtualhost`` whose FQDN no other root claims) a
:class:`~cpx_httpproxy.replay.RootResult` holds everything its build did: what it serves, the
errors and warnings it recorded on itself and on the proxies it included, the proxies it reached
(no orphans), the proxies it looked up by name (found or not) and what it read from the source.
A root is built again when one of those proxies or source objects changed; every other root's
result is replayed into a fresh set of statuses and the new DAG
(:class:`~cpx_httpproxy.replay.Replay`).  Which roots are unique and which FQDNs are claimed
twice is kept up to date proxy by proxy (:class:`~cpx_httpproxy.claims.Claims`); DuplicateVhost,
orphans and the statuses of the proxies that may have a new one are worked out every build.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from cpx import ObjectKey, ReadIndex, SourceView, blame

from cpx_httpproxy.claims import Claims
from cpx_httpproxy.kinds import HTTPPROXY
from cpx_httpproxy.proxies import Name, Proxy, ProxyRegistry, parse
from cpx_httpproxy.replay import Replay, RootResult
from cpx_httpproxy.roots import RootBuilder
from cpx_httpproxy.status import ProxyStatus

_PROXY_KIND = HTTPPROXY.group_kind


@attrs.define(eq=False)
class RootScope(ProxyRegistry):
    """The build's proxies as one root's walk sees them: records the names it looks up and the
    proxies it reaches, and collects the statuses it writes in private, empty ones."""

    looked_up: set[Name] = attrs.field(factory=set)
    reached_names: list[Name] = attrs.field(factory=list)

    def start(self) -> None:
        """Forget the previous root's walk (one scope serves every root built in a build)."""
        self.statuses, self.looked_up, self.reached_names = {}, set(), []

    def get(self, name: Name) -> Proxy | None:
        self.looked_up.add(name)
        return self.proxies.get(name)

    def status_of(self, proxy: Proxy) -> ProxyStatus:
        status = self.statuses.get(proxy.name)
        if status is None:
            status = self.statuses[proxy.name] = ProxyStatus()
        return status

    def reached(self, name: Name) -> None:
        self.reached_names.append(name)


def build_root(builder: RootBuilder, root: Proxy, source: SourceView) -> RootResult:
    """Build ``root`` through ``builder`` (whose walker's registry is a fresh :class:`RootScope`)."""
    scope = builder.walker.proxies
    assert isinstance(scope, RootScope)
    scope.start()
    with source.recording() as lookups, blame(root.key):
        served = builder.plan(root)
    return RootResult(
        key=root.key,
        served=served,
        statuses=tuple(
            (name, tuple(s.errors), tuple(s.warnings))
            for name, s in scope.statuses.items()
            if s.errors or s.warnings
        ),
        reached=tuple(scope.reached_names),
        looked_up=frozenset((root.name, *scope.looked_up)),
        lookups=lookups,
    )


@attrs.define(eq=False)
class Memo:
    """The parsed proxies and root results of the last build, and how to tell which are stale."""

    _source: weakref.ref[SourceView] | None = None
    _revision: int = -1
    _listeners: bool = False
    proxies: dict[Name, Proxy] = attrs.field(factory=dict)
    claims: Claims = attrs.field(factory=Claims)
    replay: Replay = attrs.field(factory=Replay)
    # The proxies that changed in the last update; None when it started from scratch.
    changed: set[Name] | None = None
    results: dict[Name, RootResult] = attrs.field(factory=dict)
    # What each result read from the source (by root key), and proxy name -> roots that looked it up.
    reads: ReadIndex = attrs.field(factory=ReadIndex)
    _proxy_readers: dict[Name, set[Name]] = attrs.field(factory=dict)

    def reset(self) -> None:
        self._source, self._revision, self.changed = None, -1, None
        self.proxies.clear()
        self.claims.clear()
        self.replay.clear()
        self.results.clear()
        self.reads.clear()
        self._proxy_readers.clear()

    def update(self, source: SourceView, listeners: bool) -> list[Name]:
        """Bring the parsed proxies and the claims up to date, and forget the results that are
        stale: those of roots whose inputs changed and of proxies that are no unique roots now.
        Returns the unique roots without a result, in order: the ones to build."""
        changes = None
        if self._source is not None and self._source() is source and listeners == self._listeners:
            changes = source.changes_since(self._revision)
        revision = source.revision
        if changes is None:
            self.reset()
            self._load(source)
            stale: set[Name] = set()
        else:
            stale = self._apply(source, changes)
        left, joined = self.claims.settle()
        for name in stale | left:
            self.forget(name)
        self._source, self._revision, self._listeners = weakref.ref(source), revision, listeners
        roots = self.claims.roots
        if changes is None:
            return list(roots)
        return sorted(name for name in stale | joined if name in roots and name not in self.results)

    def _load(self, source: SourceView) -> None:
        for obj in source.list(HTTPPROXY):
            self._parse(obj)

    def _parse(self, obj: Mapping[str, Any]) -> None:
        proxy = parse(obj)
        self.claims.replace(proxy.name, self.proxies.get(proxy.name), proxy)
        self.proxies[proxy.name] = proxy

    def _apply(self, source: SourceView, changes: Iterable[ObjectKey]) -> set[Name]:
        stale = {(key.namespace, key.name) for key in self.reads.volatile}
        changed: dict[Name, ObjectKey] = {}
        for change in changes:
            if change.group_kind == _PROXY_KIND:
                changed[(change.namespace, change.name)] = change
            stale.update((key.namespace, key.name) for key in self.reads.referencing(change))
        added = False
        for name, key in changed.items():
            stale.update(self._proxy_readers.get(name, ()))
            stale.add(name)
            obj = source.get(key)
            if obj is None:
                self.claims.replace(name, self.proxies.pop(name, None), None)
                continue
            added = added or name not in self.proxies
            self._parse(obj)
        if added:  # keep (namespace, name) order, as a fresh listing has it
            self.proxies = dict(sorted(self.proxies.items()))
        self.changed = set(changed)
        return stale

    # -- root results ----------------------------------------------------------------------------
    def keep(self, name: Name, result: RootResult) -> None:
        self.forget(name)
        self.results[name] = result
        self.replay.add(name, result)
        self.reads.add(result.key, result.lookups)
        for read in result.looked_up:
            self._proxy_readers.setdefault(read, set()).add(name)

    def forget(self, name: Name) -> None:
        old = self.results.pop(name, None)
        if old is None:
            return
        self.replay.remove(name, old)
        self.reads.discard(old.key)
        for read in old.looked_up:
            readers = self._proxy_readers.get(read)
            if readers is not None:
                readers.discard(name)
                if not readers:
                    del self._proxy_readers[read]
