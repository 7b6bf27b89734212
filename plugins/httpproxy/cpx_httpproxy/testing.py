"""Builders of ``projectcontour.io/v1`` HTTPProxy objects for tests (any package's), as wire dicts.

Keyword arguments are snake_case and become the camelCase wire names (``timeout_policy`` ->
``timeoutPolicy``, ``ignore_case`` -> ``ignoreCase``); their values are passed through as they are,
in wire shape.  For example::

    root("web", "web.example.com",
         route(prefix("/api"), header("x-env", exact="prod"), services=[service("api")],
               timeout_policy={"response": "2s"}),
         includes=[include("blog", prefix("/blog"), namespace="team")],
         tls=tls("web-cert"))
    child("blog", route(services=[service("blog", weight=80), service("blog-v2", weight=20)]),
          namespace="team")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

API_VERSION = "projectcontour.io/v1"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _wire(fields: Mapping[str, Any]) -> dict[str, Any]:
    """snake_case keyword arguments as camelCase wire fields; None values are left out."""
    return {_camel(key): value for key, value in fields.items() if value is not None}


# -- conditions -----------------------------------------------------------------------------------


def prefix(path: str) -> dict[str, Any]:
    """A string-prefix path condition (``/foo`` also matches ``/foobar``)."""
    return {"prefix": path}


def exact(path: str) -> dict[str, Any]:
    return {"exact": path}


def regex(path: str) -> dict[str, Any]:
    """A path regex condition (RE2, matched against the whole path)."""
    return {"regex": path}


def header(name: str, **operator: Any) -> dict[str, Any]:
    """A header condition: ``header("x-a", notexact="b", treat_missing_as_empty=True)``.

    Operators: present, notpresent, exact, notexact, contains, notcontains, regex; modifiers
    ignore_case and treat_missing_as_empty.  ``header(":method", exact="POST")`` matches the method.
    """
    return {"header": {"name": name, **_wire(operator)}}


def query(name: str, **operator: Any) -> dict[str, Any]:
    """A query parameter condition: ``query("q", prefix="ab", ignore_case=True)``.

    Operators: exact, prefix, suffix, regex, contains, present; modifier ignore_case.
    """
    return {"queryParameter": {"name": name, **_wire(operator)}}


# -- services, routes, includes, TCP proxying -----------------------------------------------------


def service(name: str, port: int = 80, **fields: Any) -> dict[str, Any]:
    """A route or tcpproxy service: ``service("web", weight=80)``, ``service("shadow", mirror=True)``."""
    return {"name": name, "port": port, **_wire(fields)}


def headers_policy(
    set: Mapping[str, str] | None = None,
    remove: Iterable[str] = (),
) -> dict[str, Any]:
    """A request/response headers policy from ``{name: value}`` and names to remove."""
    out: dict[str, Any] = {}
    if set:
        out["set"] = [{"name": name, "value": value} for name, value in set.items()]
    if remove:
        out["remove"] = list(remove)
    return out


def route(
    *conditions: Mapping[str, Any], services: Iterable[Mapping[str, Any]] = (), **fields: Any
) -> dict[str, Any]:
    """A route: its conditions, its services, and any other Route field by snake_case name
    (``enable_websockets=True``, ``request_redirect_policy={...}``, ``retry_policy={...}``)."""
    out: dict[str, Any] = {}
    if conditions:
        out["conditions"] = [dict(c) for c in conditions]
    svcs = [dict(s) for s in services]
    if svcs:
        out["services"] = svcs
    out.update(_wire(fields))
    return out


def include(name: str, *conditions: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """An include of the HTTPProxy ``namespace/name`` (``namespace`` None: the includer's)."""
    out: dict[str, Any] = {"name": name}
    if namespace is not None:
        out["namespace"] = namespace
    if conditions:
        out["conditions"] = [dict(c) for c in conditions]
    return out


def tcpproxy(
    *services: Mapping[str, Any], include: Mapping[str, str] | None = None, **fields: Any
) -> dict[str, Any]:
    """``spec.tcpproxy``: weighted services, or ``include={"name": ..., "namespace": ...}``."""
    out: dict[str, Any] = {}
    if services:
        out["services"] = [dict(s) for s in services]
    if include is not None:
        out["include"] = dict(include)
    out.update(_wire(fields))
    return out


def tls(secret_name: str | None = None, *, passthrough: bool = False, **fields: Any) -> dict[str, Any]:
    """``virtualhost.tls``: a Secret to terminate with, or ``passthrough=True``."""
    out: dict[str, Any] = {}
    if secret_name is not None:
        out["secretName"] = secret_name
    if passthrough:
        out["passthrough"] = True
    out.update(_wire(fields))
    return out


def ip_rule(cidr: str, source: str = "Peer") -> dict[str, str]:
    """One entry of ipAllowPolicy / ipDenyPolicy."""
    return {"source": source, "cidr": cidr}


# -- objects --------------------------------------------------------------------------------------


def httpproxy(  # noqa: PLR0913  (why: a builder: one keyword per HTTPProxy field)
    name: str,
    *,
    namespace: str = "default",
    virtualhost: Mapping[str, Any] | None = None,
    routes: Iterable[Mapping[str, Any]] = (),
    includes: Iterable[Mapping[str, Any]] = (),
    tcpproxy: Mapping[str, Any] | None = None,
    ingress_class_name: str | None = None,
    generation: int | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An HTTPProxy object; a root when ``virtualhost`` is given."""
    spec: dict[str, Any] = {}
    if ingress_class_name is not None:
        spec["ingressClassName"] = ingress_class_name
    if virtualhost is not None:
        spec["virtualhost"] = dict(virtualhost)
    route_list = [dict(r) for r in routes]
    if route_list:
        spec["routes"] = route_list
    include_list = [dict(i) for i in includes]
    if include_list:
        spec["includes"] = include_list
    if tcpproxy is not None:
        spec["tcpproxy"] = dict(tcpproxy)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if generation is not None:
        meta["generation"] = generation
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": API_VERSION, "kind": "HTTPProxy", "metadata": meta, "spec": spec}


def root(
    name: str,
    fqdn: str,
    *routes: Mapping[str, Any],
    namespace: str = "default",
    tls: Mapping[str, Any] | None = None,
    includes: Iterable[Mapping[str, Any]] = (),
    tcpproxy: Mapping[str, Any] | None = None,
    generation: int | None = None,
    **virtualhost: Any,
) -> dict[str, Any]:
    """A root HTTPProxy for ``fqdn``; other VirtualHost fields by snake_case name
    (``cors_policy={...}``, ``rate_limit_policy={...}``, ``ip_deny_policy=[ip_rule(...)]``)."""
    vhost: dict[str, Any] = {"fqdn": fqdn}
    if tls is not None:
        vhost["tls"] = dict(tls)
    vhost.update(_wire(virtualhost))
    return httpproxy(
        name,
        namespace=namespace,
        virtualhost=vhost,
        routes=routes,
        includes=includes,
        tcpproxy=tcpproxy,
        generation=generation,
    )


def child(
    name: str,
    *routes: Mapping[str, Any],
    namespace: str = "default",
    includes: Iterable[Mapping[str, Any]] = (),
    tcpproxy: Mapping[str, Any] | None = None,
    generation: int | None = None,
) -> dict[str, Any]:
    """An HTTPProxy without a virtual host: served only through an include from a root."""
    return httpproxy(
        name,
        namespace=namespace,
        routes=routes,
        includes=includes,
        tcpproxy=tcpproxy,
        generation=generation,
    )


def valid_httpproxy(name: str, fqdn: str, *, service: str, namespace: str = "default") -> dict[str, Any]:
    """A root HTTPProxy serving every path of ``fqdn`` from port 80 of ``service``."""
    return root(name, fqdn, route(services=[{"name": service, "port": 80}]), namespace=namespace)
