"""Claims: which root claims which FQDN, updated proxy by proxy, must always equal a regrouping
of all the proxies from scratch (what the processor did on every build before)."""

from __future__ import annotations

from cpx_httpproxy import testing as hp
from cpx_httpproxy.claims import Claims
from cpx_httpproxy.proxies import Name, Proxy, parse


def proxy(name: str, fqdn: str | None) -> Proxy:
    obj = hp.child(name, hp.route()) if fqdn is None else hp.root(name, fqdn, hp.route())
    return parse(obj)


def from_scratch(proxies: dict[Name, Proxy]) -> Claims:
    claims = Claims()
    for name, p in sorted(proxies.items()):
        claims.replace(name, None, p)
    claims.settle()
    return claims


class Tracked:
    def __init__(self) -> None:
        self.claims = Claims()
        self.proxies: dict[Name, Proxy] = {}

    def put(self, name: str, fqdn: str | None) -> tuple[set[Name], set[Name]]:
        new = proxy(name, fqdn)
        before = set(self.claims.roots)
        self.claims.replace(new.name, self.proxies.get(new.name), new)
        self.proxies[new.name] = new
        return self.check(before)

    def remove(self, name: str) -> tuple[set[Name], set[Name]]:
        key = ("default", name)
        before = set(self.claims.roots)
        self.claims.replace(key, self.proxies.pop(key), None)
        return self.check(before)

    def check(self, before: set[Name]) -> tuple[set[Name], set[Name]]:
        left, joined = self.claims.settle()
        fresh = from_scratch(self.proxies)
        assert list(self.claims.roots) == list(fresh.roots)  # in (namespace, name) order
        assert all(self.claims.roots[n] is fresh.roots[n] for n in fresh.roots)
        assert self.claims.duplicated == fresh.duplicated
        assert self.claims.non_roots == fresh.non_roots
        assert left == before - set(fresh.roots) and joined == set(fresh.roots) - before
        return left, joined


def test_duplicates_fqdn_changes_and_removals_match_a_regrouping() -> None:
    t = Tracked()
    assert t.put("b", "foo.example.com") == (set(), {("default", "b")})
    assert t.put("a", "bar.example.com") == (set(), {("default", "a")})
    # Another root claims foo (case differs): both lose it.
    assert t.put("c", "FOO.example.com") == ({("default", "b")}, set())
    # c moves away: b is unique again, c is a root of its own.
    assert t.put("c", "baz.example.com") == (set(), {("default", "b"), ("default", "c")})
    # A root that becomes a child is no root; a child that becomes a root is one.
    assert t.put("a", None) == ({("default", "a")}, set())
    assert t.put("a", "bar.example.com") == (set(), {("default", "a")})
    assert t.remove("b") == ({("default", "b")}, set())
    # An unchanged FQDN keeps the root's place and takes the new proxy object.
    t.put("c", "baz.example.com")
    t.put("d", None)
    t.remove("d")
