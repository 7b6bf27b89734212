"""Hostname intersection between listeners and routes (gateway.networking.k8s.io rules).

``*.d`` matches one or more labels before ``d`` (``a.b.d``, never ``d`` itself).  A route's
effective hostnames on a listener are the intersection of both lists; None stands for "any host"
(no hostname), which is the virtual host ``*``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

ANY = "*"


def matches(pattern: str | None, hostname: str) -> bool:
    """Whether ``pattern`` (a listener's or route's hostname, None for any) covers ``hostname``
    (exact or wildcard: a wildcard is covered by an equal or broader one)."""
    if pattern is None or pattern == hostname:
        return True
    if pattern.startswith("*."):
        return hostname.endswith(pattern[1:]) and len(hostname) > len(pattern) - 1
    return False


def intersect(listener: str | None, route: Sequence[str]) -> list[str]:
    """The hostnames a route with hostnames ``route`` serves on a listener with ``listener``:
    ``["*"]`` for any host; empty when they do not intersect."""
    if not route:
        return [listener or ANY]
    if listener is None:
        return list(dict.fromkeys(route))
    found: list[str] = []
    for hostname in route:
        if matches(listener, hostname):
            found.append(hostname)  # narrower (or equal): the route's
        elif matches(hostname, listener):
            found.append(listener)  # the route's wildcard covers the listener's name
    return list(dict.fromkeys(found))


def specificity(pattern: str | None) -> tuple[int, int]:
    """Sort key, most specific first: exact names, then wildcards by length, then none."""
    if pattern is None:
        return (2, 0)
    if pattern.startswith("*."):
        return (1, -len(pattern))
    return (0, -len(pattern))


def owner(patterns: Iterable[str | None], hostname: str) -> str | None:
    """Of listener hostnames on one port, the most specific that covers ``hostname`` (``"*"``
    for any host): the listener whose routes serve it (listener isolation).  None if none does."""
    name = None if hostname == ANY else hostname
    covering = [p for p in patterns if (p is None if name is None else matches(p, name))]
    if not covering:
        return None
    best = min(covering, key=specificity)
    return ANY if best is None else best
