"""HTTPRoute filters (rule and backendRef level) as what they do to a DAG route.

RequestHeaderModifier / ResponseHeaderModifier become header policies (``add`` appends),
RequestRedirect a redirect, URLRewrite a Host and path rewrite, RequestMirror mirror policies
(resolved by the caller, which knows the backends).  Path modifiers depend on each match's path,
so they are kept as :class:`PathModifier` and applied per match.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from cpx.dag import CORSPolicy, HeadersPolicy, HeaderValue, PathKind, PathMatch, RegexRewrite

REQUEST_HEADER_MODIFIER = "RequestHeaderModifier"
RESPONSE_HEADER_MODIFIER = "ResponseHeaderModifier"
REQUEST_REDIRECT = "RequestRedirect"
URL_REWRITE = "URLRewrite"
REQUEST_MIRROR = "RequestMirror"
CORS = "CORS"
_DEFAULT_MAX_AGE = 5  # seconds, the spec's default

FULL_PATH = "ReplaceFullPath"
PREFIX_MATCH = "ReplacePrefixMatch"
_ANY_PATH = "^/.*$"
# Ports a scheme implies when a redirect names the scheme but no port.
SCHEME_PORTS = {"http": 80, "https": 443}
NO_HEADERS = HeadersPolicy()


class FilterProblem(ValueError):
    """A filter cpx cannot apply (UnsupportedValue): its rule is dropped."""


@attrs.frozen(kw_only=True)
class PathModifier:
    type: str  # ReplaceFullPath | ReplacePrefixMatch
    value: str

    def rewrite(self, path: PathMatch) -> tuple[str | None, RegexRewrite | None]:
        """(prefix rewrite, regex rewrite) replacing the path a route with ``path`` matched."""
        if self.type == FULL_PATH:
            return None, RegexRewrite(pattern=_ANY_PATH, substitution=self.value)
        prefix = path.value.rstrip("/")
        replacement = self.value.rstrip("/")
        if prefix and replacement:
            return replacement, None
        # "/" as either side: keep exactly one slash between the replacement and the rest.
        return None, RegexRewrite(pattern=f"^{re.escape(prefix)}/*", substitution=f"{replacement}/")


@attrs.frozen(kw_only=True)
class RedirectSpec:
    scheme: str | None
    hostname: str | None
    port: int | None
    path: PathModifier | None
    status_code: int


@attrs.frozen(kw_only=True)
class Effects:
    """What a rule's (or a backendRef's) filters do."""

    request_headers: HeadersPolicy = NO_HEADERS
    response_headers: HeadersPolicy = NO_HEADERS
    redirect: RedirectSpec | None = None
    host_rewrite: str | None = None
    path_rewrite: PathModifier | None = None
    mirrors: tuple[Mapping[str, Any], ...] = ()  # RequestMirror entries, resolved by the caller
    cors: CORSPolicy | None = None


def effects(filters: object) -> Effects:
    """The filters' effects; FilterProblem for a filter type or value cpx does not support."""
    found = Effects()
    for entry in filters if isinstance(filters, list) else []:
        if not isinstance(entry, Mapping):
            continue
        kind = entry.get("type")
        if kind == REQUEST_HEADER_MODIFIER:
            policy = header_policy(entry.get("requestHeaderModifier"))
            found = attrs.evolve(found, request_headers=policy)
        elif kind == RESPONSE_HEADER_MODIFIER:
            policy = header_policy(entry.get("responseHeaderModifier"))
            found = attrs.evolve(found, response_headers=policy)
        elif kind == REQUEST_REDIRECT:
            found = attrs.evolve(found, redirect=_redirect(_mapping(entry.get("requestRedirect"))))
        elif kind == URL_REWRITE:
            rewrite = _mapping(entry.get("urlRewrite"))
            hostname = rewrite.get("hostname")
            found = attrs.evolve(
                found,
                host_rewrite=str(hostname) if hostname else None,
                path_rewrite=_path_modifier(rewrite.get("path")),
            )
        elif kind == REQUEST_MIRROR:
            found = attrs.evolve(found, mirrors=(*found.mirrors, _mapping(entry.get("requestMirror"))))
        elif kind == CORS:
            found = attrs.evolve(found, cors=cors_policy(_mapping(entry.get("cors"))))
        else:
            raise FilterProblem(f"filter type {kind!r} is not supported")
    if found.redirect is not None and found.path_rewrite is not None:
        raise FilterProblem("RequestRedirect and URLRewrite filters cannot be used together")
    return found


def header_policy(modifier: object) -> HeadersPolicy:
    """set replaces, add appends, remove deletes; a name is case-insensitive, its first entry wins."""
    spec = _mapping(modifier)
    return HeadersPolicy(
        set=_header_values(spec.get("set")),
        add=_header_values(spec.get("add")),
        remove=tuple(dict.fromkeys(str(n).lower() for n in spec.get("remove") or () if isinstance(n, str))),
    )


def _header_values(entries: object) -> tuple[HeaderValue, ...]:
    seen: dict[str, HeaderValue] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            name = entry["name"].lower()
            seen.setdefault(name, HeaderValue(name=name, value=str(entry.get("value") or "")))
    return tuple(seen.values())


def cors_policy(spec: Mapping[str, Any]) -> CORSPolicy:
    """A wildcard in an origin's host spans any number of labels (``https://*.bar.com``).  The
    Gateway answers a preflight from another origin itself (upstream HTTPRouteCORS)."""
    max_age = spec.get("maxAge")
    return CORSPolicy(
        allow_origin=tuple(_origin(str(o)) for o in spec.get("allowOrigins") or ()),
        allow_methods=tuple(str(m) for m in spec.get("allowMethods") or ()),
        allow_headers=tuple(str(h) for h in spec.get("allowHeaders") or ()),
        expose_headers=tuple(str(h) for h in spec.get("exposeHeaders") or ()),
        allow_credentials=spec.get("allowCredentials") is True,
        max_age=str(max_age if isinstance(max_age, int) else _DEFAULT_MAX_AGE),
        forward_unmatched_preflights=False,
    )


def _origin(origin: str) -> str:
    if origin == "*" or "*" not in origin:
        return origin
    pattern = "".join("[^/]+" if part == "*" else re.escape(part) for part in re.split(r"(\*)", origin))
    return f"regex:(?i)^{pattern}$"


def _redirect(spec: Mapping[str, Any]) -> RedirectSpec:
    scheme, hostname, port = spec.get("scheme"), spec.get("hostname"), spec.get("port")
    status = spec.get("statusCode", 302)
    if status not in (301, 302, 303, 307, 308):
        raise FilterProblem(f"redirect status code {status!r} is not supported")
    if scheme is not None and scheme not in SCHEME_PORTS:
        raise FilterProblem(f"redirect scheme {scheme!r} is not supported")
    return RedirectSpec(
        scheme=scheme,
        hostname=str(hostname) if hostname else None,
        port=port if isinstance(port, int) else None,
        path=_path_modifier(spec.get("path")),
        status_code=int(status),
    )


def _path_modifier(spec: object) -> PathModifier | None:
    if not isinstance(spec, Mapping):
        return None
    kind = spec.get("type")
    if kind == FULL_PATH:
        return PathModifier(type=FULL_PATH, value=str(spec.get("replaceFullPath") or "/"))
    if kind == PREFIX_MATCH:
        return PathModifier(type=PREFIX_MATCH, value=str(spec.get("replacePrefixMatch") or "/"))
    raise FilterProblem(f"path modifier type {kind!r} is not supported")


def check_prefix_modifier(modifier: PathModifier | None, paths: Sequence[PathMatch]) -> None:
    """ReplacePrefixMatch needs a PathPrefix match to know what to replace."""
    prefixes = (PathKind.SEGMENT_PREFIX, PathKind.PREFIX)
    if modifier is not None and modifier.type == PREFIX_MATCH and any(p.kind not in prefixes for p in paths):
        raise FilterProblem("ReplacePrefixMatch is only supported with a PathPrefix match")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
