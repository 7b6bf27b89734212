"""The HTTPProxies of one build and their statuses: which are roots, which are still orphans, and
the status each one ends up with.

The root builder and the include walker record errors on :meth:`ProxyRegistry.status_of`; the
processor publishes every status once the tree is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from cpx import ObjectKey, blame
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
    # A crash in one proxy's translation leaves out that proxy (or the included one it happened
    # in), not the build: see cpx.isolation.
    with blame(key):
        parsed = model.HTTPProxy.from_dict(obj)
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

    def unique_roots(self) -> list[Proxy]:
        """Roots whose FQDN no other root claims, in (namespace, name) order; the others get
        DuplicateVhost.  Every proxy that is not a root starts out orphaned."""
        by_fqdn: dict[str, list[Proxy]] = {}
        for name, proxy in self.proxies.items():
            vhost = proxy.spec.virtualhost
            if vhost is None:
                self.orphaned.add(name)
                continue
            by_fqdn.setdefault(vhost.fqdn.lower(), []).append(proxy)
        roots = []
        for fqdn, claimants in by_fqdn.items():
            if len(claimants) == 1:
                roots.append(claimants[0])
                continue
            refs = ", ".join(sorted(p.ref for p in claimants))
            message = f'fqdn "{fqdn}" is used in multiple HTTPProxies: {refs}'
            for proxy in claimants:
                self.status_of(proxy).add_error(st.VIRTUAL_HOST_ERROR, "DuplicateVhost", message)
        return sorted(roots, key=lambda p: (p.key.namespace, p.key.name))

    def publish(
        self,
        dag: DAG,
        *,
        clock: st.Clock,
        last: Mapping[ObjectKey, Rendered],
        load_balancer: Mapping[str, Any] | None,
    ) -> dict[ObjectKey, Rendered]:
        """Orphan every proxy never reached, set every status and note on ``dag``; returns the
        rendered statuses (the next build's ``last``)."""
        for name in self.orphaned:
            self.status_named(name).orphan()
        rendered: dict[ObjectKey, Rendered] = {}
        statuses = self.statuses
        for name, proxy in self.proxies.items():
            status = statuses.get(name)
            errors, warnings = (tuple(status.errors), tuple(status.warnings)) if status else ((), ())
            done = last.get(proxy.key)
            if done is None or not done.same(proxy, errors, warnings):
                done = _render(proxy, self.status_named(name), done, clock, load_balancer)
            rendered[proxy.key] = done
            dag.set_status(proxy.key, done.status)
            if status is not None:
                for note in status.notes():
                    dag.add_note(proxy.key, note)
        return rendered


@attrs.frozen(eq=False)
class Rendered:
    """A proxy's rendered status and what it was rendered from: the next build reuses it for the
    same proxy object with the same errors and warnings when rendering again would give the same
    dict (the status keeps its lastTransitionTime)."""

    proxy: Proxy
    errors: tuple[st.SubCondition, ...]
    warnings: tuple[st.SubCondition, ...]
    status: dict[str, Any]
    reusable: bool

    def same(
        self, proxy: Proxy, errors: tuple[st.SubCondition, ...], warnings: tuple[st.SubCondition, ...]
    ) -> bool:
        return self.reusable and self.proxy is proxy and self.errors == errors and self.warnings == warnings


def _render(
    proxy: Proxy,
    status: ProxyStatus,
    last: Rendered | None,
    clock: st.Clock,
    load_balancer: Mapping[str, Any] | None,
) -> Rendered:
    own = proxy.obj.get("status")
    # Objects from files carry no status: without the last rendered one every rebuild would stamp
    # a new lastTransitionTime (and log every proxy as changed).
    if isinstance(own, Mapping) and own:
        previous: Mapping[str, Any] | None = own
        reusable = st.keeps_transition_time(own, status)
    else:
        previous, reusable = (last.status if last is not None else None), True
    computed = status.render(previous, clock=clock)
    if load_balancer is not None:
        computed = {**computed, **load_balancer}
    return Rendered(proxy, tuple(status.errors), tuple(status.warnings), computed, reusable)


def not_supported(status: ProxyStatus, fields: Iterable[str]) -> None:
    """Record each of ``fields`` as a feature cpx does not have (the proxy is not served)."""
    for field in fields:
        status.add_error(st.SPEC_ERROR, NOT_IMPLEMENTED, f"{field} is not supported by cpx yet")
