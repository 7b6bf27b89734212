"""Render a DAG as Graphviz dot (``/debug/dag``), in the spirit of Contour's ``internal/debug/dot.go``."""

from __future__ import annotations

from cpx.dag.dag import DAG, SecureVirtualHost, VirtualHost
from cpx.dag.nodes import Cluster, TCPProxy


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = ["digraph DAG {", "rankdir=LR;"]
        self.ids: dict[object, str] = {}

    def node(self, key: object, label: str, shape: str = "box") -> str:
        ident = self.ids.get(key)
        if ident is None:
            ident = self.ids[key] = f"n{len(self.ids)}"
            self.lines.append(f"{ident} [shape={shape}, label={_quote(label)}];")
        return ident

    def edge(self, a: str, b: str) -> None:
        self.lines.append(f"{a} -> {b};")

    def cluster(self, parent: str, cluster: Cluster) -> None:
        up = cluster.upstream
        c = self.node(
            ("cluster", cluster), f"cluster\n{up.namespace}/{up.name}:{up.port}\nweight {cluster.weight}"
        )
        s = self.node(
            ("service", up.namespace, up.name, up.port),
            f"service\n{up.namespace}/{up.name}:{up.port}",
            "ellipse",
        )
        self.edge(parent, c)
        self.edge(c, s)

    def tcp(self, parent: str, proxy: TCPProxy) -> None:
        t = self.node(("tcp", id(proxy)), "tcpproxy")
        self.edge(parent, t)
        for cluster in proxy.clusters:
            self.cluster(t, cluster)

    def vhost(self, parent: str, vhost: VirtualHost, secure: bool) -> None:
        kind = "secure virtualhost" if secure else "virtualhost"
        v = self.node(("vhost", id(vhost)), f"{kind}\n{vhost.name}")
        self.edge(parent, v)
        if isinstance(vhost, SecureVirtualHost):
            if vhost.secret is not None:
                self.edge(v, self.node(("secret", vhost.secret.ref), f"secret\n{vhost.secret.ref}", "note"))
            if vhost.tcp_proxy is not None:
                self.tcp(v, vhost.tcp_proxy)
        for route in vhost.routes.values():
            r = self.node(
                ("route", id(vhost), route.match_key()), f"route\n{route.path.kind.value} {route.path.value}"
            )
            self.edge(v, r)
            for cluster in route.clusters:
                self.cluster(r, cluster)


def to_dot(dag: DAG) -> str:
    w = _Writer()
    for listener in dag.listeners.values():
        ln = w.node(
            ("listener", listener.name), f"listener\n{listener.name}\n{listener.address}:{listener.port}"
        )
        for vhost in listener.virtual_hosts.values():
            w.vhost(ln, vhost, False)
        for svhost in listener.secure_virtual_hosts.values():
            w.vhost(ln, svhost, True)
        if listener.tcp_proxy is not None:
            w.tcp(ln, listener.tcp_proxy)
    w.lines.append("}")
    return "\n".join(w.lines) + "\n"
