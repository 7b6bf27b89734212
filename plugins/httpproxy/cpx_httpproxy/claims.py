"""Which root claims which FQDN, kept up to date proxy by proxy.

A build needs the unique roots (an FQDN only one root claims) in (namespace, name) order, the
FQDNs claimed more than once (DuplicateVhost) and the proxies that are no roots (orphans until a
root includes them).  Grouping 10k proxies again for every change cost more than the rest of an
incremental build, so :class:`Claims` moves only the changed proxies between groups.
"""

from __future__ import annotations

import attrs

from cpx_httpproxy.proxies import Name, Proxy


def claimed_fqdn(proxy: Proxy) -> str | None:
    """The lower-cased FQDN a root claims; None for a proxy without ``spec.virtualhost``."""
    vhost = proxy.spec.virtualhost
    return None if vhost is None else vhost.fqdn.lower()


@attrs.define(eq=False)
class Claims:
    by_fqdn: dict[str, dict[Name, Proxy]] = attrs.field(factory=dict)
    # Roots whose FQDN no other root claims, in (namespace, name) order.
    roots: dict[Name, Proxy] = attrs.field(factory=dict)
    duplicated: set[str] = attrs.field(factory=set)  # FQDNs claimed by more than one root
    non_roots: set[Name] = attrs.field(factory=set)
    _touched: set[str] = attrs.field(factory=set)
    _left: set[Name] = attrs.field(factory=set)

    def clear(self) -> None:
        for table in (self.by_fqdn, self.roots, self.duplicated, self.non_roots, self._touched, self._left):
            table.clear()

    def replace(self, name: Name, old: Proxy | None, new: Proxy | None) -> None:
        """``name`` was ``old`` and is now ``new`` (None: absent); :meth:`settle` finishes the job."""
        if old is not None:
            fqdn = claimed_fqdn(old)
            if fqdn is None:
                self.non_roots.discard(name)
            else:
                self.by_fqdn[fqdn].pop(name, None)
                self._touched.add(fqdn)
        fqdn = None if new is None else claimed_fqdn(new)
        if new is not None:
            if fqdn is None:
                self.non_roots.add(name)
            else:
                self.by_fqdn.setdefault(fqdn, {})[name] = new
                self._touched.add(fqdn)
        if fqdn is None and self.roots.pop(name, None) is not None:
            self._left.add(name)

    def settle(self) -> tuple[set[Name], set[Name]]:
        """Regroup the FQDNs touched since the last call; returns the proxies that are no longer
        unique roots, and those that became unique roots."""
        joined: set[Name] = set()
        for fqdn in self._touched:
            group = self.by_fqdn.get(fqdn)
            if not group:
                self.by_fqdn.pop(fqdn, None)
                self.duplicated.discard(fqdn)
            elif len(group) == 1:
                self.duplicated.discard(fqdn)
                ((name, proxy),) = group.items()
                if name not in self.roots:
                    joined.add(name)
                self.roots[name] = proxy  # an existing key keeps its place
            else:
                self.duplicated.add(fqdn)
                for name in group:
                    if self.roots.pop(name, None) is not None:
                        self._left.add(name)
        if joined:
            self.roots = dict(sorted(self.roots.items()))
        left = {name for name in self._left if name not in self.roots}
        self._touched, self._left = set(), set()
        return left, joined
