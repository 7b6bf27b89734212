"""Root results, and replaying all of them into a build at the cost of the few that need it.

A build replays every unique root's result.  Most results of a large configuration add one plain
virtual host and nothing else: no error or warning, no included proxy, no TLS.  :class:`Replay`
indexes the results by what replaying them does, so a build walks only the results with statuses,
includes or TLS one by one, and adds every plain virtual host at once: each is kept frozen
(:meth:`cpx.dag.VirtualHost.freeze`), so an unchanged one is the same object in every build.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import attrs
from cpx import Lookups, ObjectKey, SubCondition
from cpx.dag import DAG, VirtualHost

from cpx_httpproxy.kinds import HTTP_LISTENER
from cpx_httpproxy.proxies import Name, ProxyRegistry
from cpx_httpproxy.roots import Served, add_plain, new_plain, serve_secure


@attrs.frozen(eq=False)
class RootResult:
    """One root's build, replayable into later builds while its inputs do not change."""

    key: ObjectKey
    served: Served | None
    # Per proxy touched: (errors, warnings) the walk recorded, in order.
    statuses: tuple[tuple[Name, tuple[SubCondition, ...], tuple[SubCondition, ...]], ...]
    reached: tuple[Name, ...]
    looked_up: frozenset[Name]  # the root itself and every proxy looked up by name
    lookups: Lookups  # what the build read from the source

    def replay_statuses(self, registry: ProxyRegistry) -> None:
        for name, errors, warnings in self.statuses:
            status = registry.status_named(name)
            status.errors += errors
            status.warnings += warnings


@attrs.define(eq=False)
class Replay:
    """The kept results by what replaying them does (see the module's docstring)."""

    plain: dict[Name, Served] = attrs.field(factory=dict)
    # Their plain virtual hosts, frozen, by root and by host name.
    vhosts: dict[Name, VirtualHost] = attrs.field(factory=dict)
    by_host: dict[str, VirtualHost] = attrs.field(factory=dict)
    by_host_sorted: bool = True  # by_host in name order, the DAG's (its sort is then linear)
    # Hosts whose root went, dropped from by_host at the next apply unless added again meanwhile
    # (a changed root is removed, then added: its host keeps its place).
    gone: set[str] = attrs.field(factory=set)
    secure: set[Name] = attrs.field(factory=set)  # results that serve over TLS
    with_statuses: set[Name] = attrs.field(factory=set)
    reached: Counter[Name] = attrs.field(factory=Counter)  # proxy -> how many results reach it

    def clear(self) -> None:
        self.plain.clear()
        self.vhosts.clear()
        self.by_host.clear()
        self.gone.clear()
        self.secure.clear()
        self.with_statuses.clear()
        self.reached.clear()

    def add(self, name: Name, result: RootResult) -> None:
        if result.served is not None:
            self.plain[name] = result.served
            vhost = self.vhosts[name] = new_plain(result.served).freeze()
            if vhost.name not in self.by_host:
                self.by_host_sorted = False
            self.by_host[vhost.name] = vhost
            self.gone.discard(vhost.name)
            if result.served.tls is not None:
                self.secure.add(name)
        if result.statuses:
            self.with_statuses.add(name)
        if result.reached:  # most roots include nothing (Counter.update costs even with nothing)
            self.reached.update(result.reached)

    def remove(self, name: Name, result: RootResult) -> None:
        self.plain.pop(name, None)
        vhost = self.vhosts.pop(name, None)
        if vhost is not None and self.by_host.get(vhost.name) is vhost:
            self.gone.add(vhost.name)
        self.secure.discard(name)
        self.with_statuses.discard(name)
        self.reached.subtract(result.reached)
        for reached in result.reached:
            if self.reached[reached] <= 0:
                del self.reached[reached]

    def apply(
        self,
        results: Mapping[Name, RootResult],
        registry: ProxyRegistry,
        dag: DAG,
        non_roots: Iterable[Name],
    ) -> None:
        """What replaying every result in root order does: the statuses they recorded (in root
        order: a child included by several roots gets their errors in that order), the orphans
        (proxies no root is and no result reached) and the virtual hosts they serve."""
        for name in sorted(self.with_statuses):
            results[name].replay_statuses(registry)
        registry.orphaned.update(name for name in non_roots if name not in self.reached)
        for host in self.gone:
            del self.by_host[host]
        self.gone.clear()
        if self.plain:
            if dag.listeners[HTTP_LISTENER].virtual_hosts or len(self.by_host) != len(self.vhosts):
                for name, served in self.plain.items():
                    add_plain(dag, served, self.vhosts[name])
            else:  # no other processor added a plain host: every one is new
                if not self.by_host_sorted:
                    self.by_host = dict(sorted(self.by_host.items()))
                    self.by_host_sorted = True
                dag.add_virtual_hosts(HTTP_LISTENER, self.by_host)
        for name in sorted(self.secure):
            serve_secure(dag, self.plain[name])
