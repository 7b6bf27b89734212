"""The HTTPProxies of one build and their statuses: which are roots, which are still orphans, and
the status each one ends up with.

The root builder and the include walker record errors on :meth:`ProxyRegistry.status_of`; the
processor publishes every status once the tree is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import Any

import attrs
from cpx import ObjectKey, StatusClock, SubCondition, blame
from cpx.dag import DAG

from cpx_httpproxy import model
from cpx_httpproxy import status as st
from cpx_httpproxy.model import HTTPProxySpec
from cpx_httpproxy.status import ProxyStatus

NOT_IMPLEMENTED = "NotImplemented"

Name = tuple[str, str]  # (namespace, name)


@attrs.frozen(eq=False)
class Proxy:
    """One HTTPProxy of a build; the registry holds one per object, so identity is equality."""

    obj: Mapping[str, Any]
    key: ObjectKey
    model: model.HTTPProxy
    name: Name  # the registry's key

    @property
    def ref(self) -> str:
        return f"{self.key.namespace}/{self.key.name}"

    @property
    def spec(self) -> HTTPProxySpec:
        return self.model.spec


def parse(obj: Mapping[str, Any]) -> Proxy:
    """One HTTPProxy of the source as the processor uses it."""
    key = ObjectKey.of(obj)
    try:
        parsed = model.HTTPProxy.from_dict(obj)
    except Exception:
        # A crash in one proxy's translation leaves out that proxy (or the included one it
        # happened in), not the build: see cpx.isolation.  Parsing reads nothing from the source,
        # so blame is entered only to raise (entering it per proxy costs a tenth of the parse).
        with blame(key):
            raise
    return Proxy(obj, key, parsed, (parsed.namespace, parsed.name))


@attrs.define(eq=False)
class ProxyRegistry:
    """Every HTTPProxy of the source, its status, and the ones no root has reached (yet)."""

    proxies: dict[Name, Proxy] = attrs.field(factory=dict)  # in (namespace, name) order
    # Made on first use: most proxies of a large build get no error, and their rendered status
    # from the last build is reused without one.
    statuses: dict[Name, ProxyStatus] = attrs.field(factory=dict)
    orphaned: set[Name] = attrs.field(factory=set)

    def get(self, name: Name) -> Proxy | None:
        return self.proxies.get(name)

    def status_of(self, proxy: Proxy) -> ProxyStatus:
        return self.status_named(proxy.name)

    def status_named(self, name: Name) -> ProxyStatus:
        status = self.statuses.get(name)
        if status is None:
            status = self.statuses[name] = ProxyStatus.for_object(self.proxies[name].obj)
        return status

    def reached(self, name: Name) -> None:
        """``name`` is included from a root: it is no orphan."""
        self.orphaned.discard(name)

    def duplicates(self, duplicated: Mapping[str, Iterable[Proxy]]) -> None:
        """Every root of an FQDN claimed more than once gets DuplicateVhost (``duplicated``: the
        claimants by lower-cased FQDN)."""
        for fqdn, group in duplicated.items():
            claimants = list(group)
            refs = ", ".join(sorted(p.ref for p in claimants))
            message = f'fqdn "{fqdn}" is used in multiple HTTPProxies: {refs}'
            for proxy in claimants:
                self.status_of(proxy).add_error(st.VIRTUAL_HOST_ERROR, "DuplicateVhost", message)

    def publish(
        self,
        dag: DAG,
        *,
        clock: StatusClock,
        last: Published | None,
        changed: Set[Name] | None,
        load_balancer: Mapping[str, Any] | None,
    ) -> Published:
        """Orphan every proxy never reached, set every status and note on ``dag``; returns the
        rendered statuses (the next build's ``last``).

        With ``changed`` (the proxies that changed since ``last``) only the proxies that may get
        another status are looked at: those, and the ones with problems now or last time."""
        for name in self.orphaned:
            self.status_named(name).orphan()
        previous = last.rendered if last is not None else {}
        if last is None or changed is None:
            out, names = Published(), list(self.proxies)
        else:
            # Last build's tables, updated in place: copying 10k statuses cost more than a change
            # (each name is read before it is written; the processor keeps only what this returns).
            out, names = last, sorted(changed | self.statuses.keys() | last.sticky)
        for name in names:
            proxy = self.proxies.get(name)
            done = previous.get(name)
            if proxy is None:
                out.drop(name)
                continue
            status = self.statuses.get(name)
            errors, warnings = (tuple(status.errors), tuple(status.warnings)) if status else ((), ())
            if done is None or not done.same(proxy, errors, warnings):
                # Without a status the proxy has no problem: its empty one is rendered but not
                # kept (only statuses with errors or warnings have notes, below).
                status = status or ProxyStatus.for_object(proxy.obj)
                done = _render(proxy, status, done, clock, load_balancer)
            out.put(name, done)
        dag.statuses.update(out.statuses)
        for name, status in self.statuses.items():
            key = self.proxies[name].key
            for note in status.notes():
                dag.add_note(key, note)
        return out


@attrs.define(eq=False)
class Published:
    """The statuses of the last build: per proxy what was rendered (the next build reuses it), the
    same by object key (for the DAG), and the proxies to look at again even when unchanged."""

    rendered: dict[Name, Rendered] = attrs.field(factory=dict)
    statuses: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict)
    # Rendered with errors or warnings, or not reusable: may render differently next time.
    sticky: set[Name] = attrs.field(factory=set)

    def put(self, name: Name, done: Rendered) -> None:
        self.rendered[name] = done
        self.statuses[done.proxy.key] = done.status
        if done.errors or done.warnings or not done.reusable:
            self.sticky.add(name)
        else:
            self.sticky.discard(name)

    def drop(self, name: Name) -> None:
        done = self.rendered.pop(name, None)
        if done is not None:
            del self.statuses[done.proxy.key]
        self.sticky.discard(name)


@attrs.frozen(eq=False)
class Rendered:
    """A proxy's rendered status and what it was rendered from: the next build reuses it for the
    same proxy object with the same errors and warnings when rendering again would give the same
    dict (the status keeps its lastTransitionTime)."""

    proxy: Proxy
    errors: tuple[SubCondition, ...]
    warnings: tuple[SubCondition, ...]
    status: dict[str, Any]
    reusable: bool

    def same(
        self, proxy: Proxy, errors: tuple[SubCondition, ...], warnings: tuple[SubCondition, ...]
    ) -> bool:
        return self.reusable and self.proxy is proxy and self.errors == errors and self.warnings == warnings


def _render(
    proxy: Proxy,
    status: ProxyStatus,
    last: Rendered | None,
    clock: StatusClock,
    load_balancer: Mapping[str, Any] | None,
) -> Rendered:
    own = proxy.obj.get("status")
    # Objects from files carry no status: without the last rendered one every rebuild would stamp
    # a new lastTransitionTime (and log every proxy as changed).
    if own and isinstance(own, Mapping):  # (most have none: the cheap test first)
        previous: Mapping[str, Any] | None = own
        reusable = status.keeps_transition_time(own)
    else:
        previous, reusable = (last.status if last is not None else None), True
    computed = status.render(previous, clock=clock)
    if load_balancer is not None:
        computed = {**computed, **load_balancer}
    return Rendered(proxy, tuple(status.errors), tuple(status.warnings), computed, reusable)
