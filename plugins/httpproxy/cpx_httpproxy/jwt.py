"""JWT verification: ``virtualhost.jwtProviders`` and the routes' ``jwtVerificationPolicy``
(Contour's ``httpproxy_processor.go``; the filter as ``internal/envoy/v3/listener.go`` FilterJWTAuthN
and ``route.go`` build it).

A root's providers ride on its secure virtual host (:data:`JWT_PROVIDERS`), so the
``envoy.filters.http.jwt_authn`` filter of that host's SNI chain is configured from
``FilterSite.attachments``: one provider and one requirement (of that provider alone) per name.
Each route that needs a token carries the requirement's name (:data:`JWT_REQUIREMENT`), given to
Envoy as its per-route config.  A remote JWKS is fetched through the core's ``dnsname`` cluster.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
from cpx import (
    SECRET,
    DelegationNotPermittedError,
    DurationError,
    FilterSite,
    ObjectKey,
    RouteSite,
    SourceView,
    go_quote,
    parse_go_duration_nanos,
)
from cpx.dag import AttachmentKey, Attachments, DNSNameCluster, Route, UpstreamValidation
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_v3
from google.protobuf import duration_pb2

from cpx_httpproxy import jwks, model
from cpx_httpproxy.kinds import JWT_REQUIREMENT_KEY
from cpx_httpproxy.services import ValidationProblem, ca_secret_ref, lookup_validation
from cpx_httpproxy.status import JWT_VERIFICATION_ERROR, TLS_ERROR, ProxyStatus

DEFAULT_TIMEOUT_NANOS = 1_000_000_000  # Contour's 1s
_DNS_FAMILIES = ("auto", "v4", "v6", "all")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_PREFIX = "Spec.VirtualHost.JWTProviders"
FALLBACK_INCOMPATIBLE = "Spec.Virtualhost.TLS fallback & JWT providers are incompatible"


@attrs.frozen(cache_hash=True)
class RemoteJWKS:
    uri: str
    cluster: DNSNameCluster
    timeout_nanos: int
    cache_duration_nanos: int | None  # None: Envoy's 5m


@attrs.frozen(cache_hash=True)
class Provider:
    name: str
    issuer: str
    audiences: tuple[str, ...]
    forward: bool
    remote: RemoteJWKS | None = None
    local_jwks: str | None = None  # the JWKS JSON itself


@attrs.frozen(cache_hash=True)
class Providers:
    """A root's providers (in its order) and the one its routes require by default ("": none)."""

    items: tuple[Provider, ...]
    default: str = ""

    def names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.items)

    def clusters(self) -> Iterator[DNSNameCluster]:
        return (p.remote.cluster for p in self.items if p.remote is not None)


# On a secure virtual host: its providers.  On a route: the provider it requires (resolved by the
# root), and before that the route's own policy ("": disabled, a name: that provider).
JWT_PROVIDERS = AttachmentKey("httpproxy.jwt.providers", Providers)
JWT_REQUIREMENT = AttachmentKey(JWT_REQUIREMENT_KEY, str)
JWT_ROUTE_POLICY = AttachmentKey("httpproxy.jwt.policy", str)
_NONE = Attachments()
NO_JWT = Attachments().set(JWT_ROUTE_POLICY, "")


class JWTPolicyError(ValueError):
    """A route's jwtVerificationPolicy Contour refuses (InvalidJWTVerificationPolicy)."""


def route_attachments(route: model.Route) -> Attachments:
    """The route's own policy as an attachment (none: the root's default provider applies)."""
    own = route_policy(route)
    return _NONE if own is None else _NONE.set(JWT_ROUTE_POLICY, own)


def route_policy(route: model.Route) -> str | None:
    """The route's own choice: None (the default provider), "" (disabled) or a provider name."""
    policy = route.jwt_verification_policy
    if policy is None:
        return None
    if policy.require and policy.disabled:
        raise JWTPolicyError("route's JWT verification policy cannot specify both require and disabled")
    if policy.require:
        return policy.require
    return "" if policy.disabled else None


# -- the virtual host's providers ----------------------------------------------------------------


def permitted(vhost: model.VirtualHost, status: ProxyStatus) -> bool:
    """Providers only on roots that terminate TLS (JWTVerificationNotPermitted)."""
    if vhost.jwt_providers and (vhost.tls is None or not vhost.tls.secret_name):
        status.add_error(
            JWT_VERIFICATION_ERROR,
            "JWTVerificationNotPermitted",
            f"{_PREFIX} can only be defined for root HTTPProxies that terminate TLS",
        )
        return False
    return True


class _Invalid(Exception):
    """The providers are unusable; the error is recorded."""


@attrs.frozen
class _Resolver:
    """Contour's provider checks, in its order; the first error drops the root."""

    referrer: ObjectKey
    source: SourceView
    status: ProxyStatus

    def fail(self, reason: str, message: str, error_type: str = JWT_VERIFICATION_ERROR) -> _Invalid:
        self.status.add_error(error_type, reason, message)
        return _Invalid()

    def providers(self, specs: Iterable[model.JWTProvider]) -> Providers:
        names: set[str] = set()
        default = ""
        items = []
        for spec in specs:
            if spec.name in names:
                raise self.fail("DuplicateProviderName", f"{_PREFIX} is invalid: duplicate name {spec.name}")
            names.add(spec.name)
            if spec.default:
                if default:
                    raise self.fail(
                        "MultipleDefaultProvidersSpecified",
                        f"{_PREFIX} is invalid: at most one provider can be set as the default",
                    )
                default = spec.name
            remote = spec.remote_jwks.uri if spec.remote_jwks is not None else ""
            local = spec.local_jwks.secret_name if spec.local_jwks is not None else ""
            if remote and local:
                raise self.fail(
                    "JWKSSourceConflict",
                    f"{_PREFIX} for provider {go_quote(spec.name)} is invalid: "
                    "at most one of remoteJWKS or localJWKS may be set",
                )
            if not remote and not local:
                raise self.fail(
                    "JWKSSourceMissing",
                    f"{_PREFIX} for provider {go_quote(spec.name)} is invalid: "
                    "exactly one of remoteJWKS or localJWKS must be set",
                )
            base = Provider(spec.name, spec.issuer, tuple(spec.audiences), spec.forward_jwt)
            if spec.local_jwks is not None and local:
                items.append(attrs.evolve(base, local_jwks=self.local(spec.name, spec.local_jwks)))
            else:
                assert spec.remote_jwks is not None
                items.append(attrs.evolve(base, remote=self.remote(spec.remote_jwks)))
        return Providers(tuple(items), default)

    def local(self, name: str, local: model.LocalJWKS) -> str:
        key = ObjectKey(SECRET.group, SECRET.kind, self.referrer.namespace, local.secret_name)
        try:
            return jwks_from_secret(self.source, key, local.key)
        except ValueError as err:
            raise self.fail(
                "LocalJWKSInvalid", f"{_PREFIX}.LocalJWKS for provider {go_quote(name)} is invalid: {err}"
            ) from None

    def remote(self, remote: model.RemoteJWKS) -> RemoteJWKS:
        where = f"{_PREFIX}.RemoteJWKS"
        try:
            scheme, host, port_text = split_uri(remote.uri)
        except ValueError as err:
            raise self.fail("RemoteJWKSURIInvalid", f"{where}.URI is invalid: {err}") from None
        if scheme not in _DEFAULT_PORTS:
            raise self.fail(
                "RemoteJWKSSchemeInvalid",
                f"{where}.URI has invalid scheme {go_quote(scheme)}, must be http or https",
            )
        validation = None
        if remote.validation is not None:
            validation = self.validation(remote.validation, scheme)
        timeout = self.duration(remote.timeout, "RemoteJWKSTimeoutInvalid", f"{where}.Timeout")
        cache = self.duration(
            remote.cache_duration, "RemoteJWKSCacheDurationInvalid", f"{where}.CacheDuration"
        )
        port = int(port_text) if port_text else _DEFAULT_PORTS[scheme]
        if not 0 < port < 65536:
            raise self.fail("RemoteJWKSPortInvalid", f"{where}.URI has an invalid port: {port_text}")
        family = remote.dns_lookup_family or "auto"
        if family not in _DNS_FAMILIES:
            raise self.fail(
                "RemoteJWKSDNSLookupFamilyInvalid",
                f"{where}.DNSLookupFamily has an invalid value {go_quote(family)}, "
                "must be auto, all, v4 or v6",
            )
        cluster = DNSNameCluster(
            address=host,
            port=port,
            scheme=scheme,
            dns_lookup_family=family,
            validation=validation,
            origin=self.referrer,
        )
        return RemoteJWKS(remote.uri, cluster, DEFAULT_TIMEOUT_NANOS if timeout is None else timeout, cache)

    def validation(self, spec: model.UpstreamValidation, scheme: str) -> UpstreamValidation:
        where = f"{_PREFIX}.RemoteJWKS.UpstreamValidation"
        if scheme == "http":
            raise self.fail(
                "RemoteJWKSUpstreamValidationInvalid",
                f"{where} must not be specified when URI scheme is http.",
            )
        try:
            return lookup_validation(spec, self.referrer.namespace, self.source, self.referrer)
        except DelegationNotPermittedError:
            ref = "/".join(ca_secret_ref(spec, self.referrer.namespace))
            raise self.fail(
                "RemoteJWKSCACertificateNotDelegated",
                f"{where}.CACertificate Secret {go_quote(ref)} is not configured for certificate delegation",
            ) from None
        except ValidationProblem as err:
            raise self.fail("RemoteJWKSUpstreamValidationInvalid", f"{where} is invalid: {err}") from None

    def duration(self, text: str, reason: str, field: str) -> int | None:
        if not text:
            return None
        try:
            return parse_go_duration_nanos(text)
        except DurationError as err:
            raise self.fail(reason, f"{field} is invalid: {err}") from None


def resolve_providers(
    vhost: model.VirtualHost, *, referrer: ObjectKey, source: SourceView, status: ProxyStatus
) -> Providers | None:
    """The root's providers (None when it has none, or after recording why they are unusable:
    check with ``status.errors``)."""
    if not vhost.jwt_providers:
        return None
    try:
        return _Resolver(referrer, source, status).providers(vhost.jwt_providers)
    except _Invalid:
        return None


def fallback_conflict(vhost: model.VirtualHost) -> tuple[str, str, str] | None:
    """(type, reason, message) when the fallback certificate is asked for beside providers: one
    connection manager would serve every fallback host with one set of providers."""
    tls = vhost.tls
    if tls is not None and tls.enable_fallback_certificate and vhost.jwt_providers:
        return TLS_ERROR, "TLSIncompatibleFeatures", FALLBACK_INCOMPATIBLE
    return None


def split_uri(uri: str) -> tuple[str, str, str]:
    """(scheme, host, port) of a URL, refused where Go's url.Parse refuses it (and without a host
    where there is a scheme: Envoy cannot fetch from no host); the port is "" when not given."""
    problem = f"parse {go_quote(uri)}: "
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        raise ValueError("net/url: invalid control character in URL")
    scheme, colon, rest = uri.partition(":")
    if not colon or not scheme or not scheme[0].isalpha() or not _scheme_chars(scheme):
        if colon and not scheme:
            raise ValueError(problem + "missing protocol scheme")
        return "", "", ""  # no scheme: refused as such (RemoteJWKSSchemeInvalid)
    if not rest.startswith("//"):
        return scheme.lower(), "", ""
    authority = rest[2:].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise ValueError(problem + "missing ']' in host")
        host, port = hostport[1:end], hostport[end + 1 :]
    else:
        host, _, port = hostport.partition(":")
        port = ":" + port if ":" in hostport else ""
    if port and (not port.startswith(":") or not port[1:].isdigit()):
        raise ValueError(problem + f"invalid port {go_quote(port)} after host")
    if scheme.lower() in _DEFAULT_PORTS and not host:
        raise ValueError(problem + "missing host")
    return scheme.lower(), host, port[1:]


def _scheme_chars(scheme: str) -> bool:
    return all(c.isascii() and (c.isalnum() or c in "+-.") for c in scheme)


def jwks_from_secret(source: SourceView, key: ObjectKey, field: str) -> str:
    """Contour's LookupJWKSFromSecret: an Opaque Secret's ``field``, a JSON object with a
    ``keys`` array; ValueError in Contour's words."""
    obj = source.get(key)
    if obj is None:
        raise ValueError("Secret not found")
    if (obj.get("type") or "Opaque") != "Opaque":
        raise ValueError('secret type is not "Opaque"')
    data = _secret_field(obj, field)
    if not data:
        raise ValueError(f"missing {go_quote(field)} key or empty value")
    text = data.strip()
    if not text:
        raise ValueError("empty JWKS")
    try:
        parsed = json.loads(text)
    except ValueError as err:
        raise ValueError(f"not valid JSON: {err}") from None
    if not isinstance(parsed, dict):
        raise ValueError("JWKS must be a JSON object")
    if "keys" not in parsed:
        raise ValueError('JWKS must contain a "keys" array')
    if not isinstance(parsed["keys"], list):
        raise ValueError('JWKS "keys" must be an array')
    if not any(jwks.usable(key) for key in parsed["keys"]):
        raise ValueError("JWKS has no valid public key")  # Envoy would refuse the provider
    return data.decode()


def _secret_field(obj: Any, field: str) -> bytes:
    data = obj.get("data") or {}
    if field in data:
        try:
            return base64.b64decode(str(data[field]), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{field} is not valid base64") from None
    return str((obj.get("stringData") or {}).get(field, "")).encode()


# -- routes ----------------------------------------------------------------------------------------


def require_on_routes(
    routes: list[Route], providers: Providers | None, *, origin: ObjectKey, status: ProxyStatus
) -> list[Route] | None:
    """The routes with the provider each requires (their own choice, else the default); None after
    recording JWTProviderNotDefined for a route requiring a provider the root does not define."""
    if providers is None and not any(JWT_ROUTE_POLICY in route.attachments for route in routes):
        return routes  # most hosts: nothing to resolve, no route to copy
    names = providers.names() if providers is not None else frozenset()
    default = providers.default if providers is not None else ""
    out = []
    for route in routes:
        own = route.attachments.get(JWT_ROUTE_POLICY)
        required = default if own is None else own
        attachments = route.attachments if own is None else route.attachments.remove(JWT_ROUTE_POLICY)
        if required:
            if required not in names:
                status.add_error(
                    JWT_VERIFICATION_ERROR,
                    "JWTProviderNotDefined",
                    f"Route references an undefined JWT provider {go_quote(required)}",
                )
                return None
            attachments = attachments.set(JWT_REQUIREMENT, required, origin=origin)
        out.append(
            route if attachments == route.attachments else attrs.evolve(route, attachments=attachments)
        )
    return out


# -- Envoy -----------------------------------------------------------------------------------------


def _duration(nanos: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=nanos // 1_000_000_000, nanos=nanos % 1_000_000_000)


@functools.lru_cache(maxsize=1024)
def authentication(providers: Providers) -> jwt_v3.JwtAuthentication:
    """Contour's FilterJWTAuthN (memoised: the same message for the same providers)."""
    config = jwt_v3.JwtAuthentication()
    for provider in providers.items:
        msg = config.providers[provider.name]
        msg.issuer = provider.issuer
        msg.audiences.extend(provider.audiences)
        msg.forward = provider.forward
        if provider.remote is not None:
            remote = provider.remote
            msg.remote_jwks.http_uri.uri = remote.uri
            msg.remote_jwks.http_uri.cluster = remote.cluster.name
            msg.remote_jwks.http_uri.timeout.CopyFrom(_duration(remote.timeout_nanos))
            if remote.cache_duration_nanos is not None:
                msg.remote_jwks.cache_duration.CopyFrom(_duration(remote.cache_duration_nanos))
        else:
            msg.local_jwks.inline_string = provider.local_jwks or '{"keys":[]}'
        config.requirement_map[provider.name].provider_name = provider.name
    return config


def filter_config(site: FilterSite) -> jwt_v3.JwtAuthentication | None:
    providers = site.attachments.get(JWT_PROVIDERS)
    return None if providers is None or not site.secure else authentication(providers)


@functools.lru_cache(maxsize=1024)
def _requirement(name: str) -> jwt_v3.PerRouteConfig:
    return jwt_v3.PerRouteConfig(requirement_name=name)


def per_route(route: Route, site: RouteSite) -> jwt_v3.PerRouteConfig | None:
    """The route's requirement where the filter is (SNI chains of hosts with providers)."""
    name = route.attachments.get(JWT_REQUIREMENT)
    return None if name is None or not site.secure else _requirement(name)
