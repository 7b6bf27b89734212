"""cpx's typed model of an HTTPProxy: frozen attrs classes, structured once from the wire dict.

``HTTPProxy.from_dict(obj)`` (or ``HTTPProxySpec.from_dict(obj["spec"])``) turns the Kubernetes
object into these classes; ``to_dict()`` turns them back into wire shape.  Attribute names are the
wire names in snake_case (``secret_name`` ↔ ``secretName``); a field whose wire name does not
follow that rule says so in its metadata (``WIRE``).

Shape checks are :mod:`cpx_httpproxy.schema`'s job, so this module assumes validated input, but
it never raises on odd input: a missing, null or wrongly-typed field takes its default, and a list
item of the wrong type becomes an empty item (so list indices still match the manifest's).

Defaults are the CRD's (what an API server stores: ``retryPolicy.count`` 1, redirect
``statusCode`` 302, ``serviceType`` grpc, ...); Contour's processing defaults (health check host,
intervals, Envoy's timeouts) are the processor's business, so those fields default to zero here.
``to_dict`` omits a field that is unset or at a zero default, as Go's ``omitempty`` does, and always
writes a field whose CRD default is not zero.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeGuard

import attrs

StringMap = tuple[tuple[str, str], ...]
"""A ``map[string]string`` (e.g. authorization context), as hashable pairs in wire order."""

_MISSING: Any = object()  # a loader's answer for "no usable value: keep the field's default"

WIRE = "wire"  # attrs field metadata: the wire name, where camelCase of the attribute is wrong


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# -- converters between wire values and attribute values ---------------------------------------

Load = Callable[[Any], Any]
Dump = Callable[[Any], Any]


def _is_int(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # The exact type first: wire objects are dicts, and the Mapping ABC check costs more than a
    # small object's whole load.
    return type(value) is dict or isinstance(value, Mapping)


def _is_zero(value: Any) -> bool:
    return type(value) in (str, int, bool, tuple) and not value


def _scalar_load(kind: type) -> Load:
    if kind is int:
        return lambda v: int(v) if _is_int(v) else _MISSING
    return lambda v: v if isinstance(v, kind) else _MISSING


def _converters(hint: Any) -> tuple[Load, Dump]:
    """How to read and write an attribute of this (resolved) type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):  # X | None: None (unset) differs from any value
        (inner,) = (a for a in args if a is not type(None))
        return _converters(inner)
    if origin is tuple:
        return _tuple_converters(args)
    if isinstance(hint, type) and issubclass(hint, Model):
        return (lambda v: hint.load(v) if _is_mapping(v) else _MISSING), (lambda v: v.to_dict())
    if hint in (str, bool, int):
        return _scalar_load(hint), (lambda v: v)
    raise TypeError(f"cpx_httpproxy.model: no converter for {hint!r}")


def _tuple_converters(args: tuple[Any, ...]) -> tuple[Load, Dump]:
    """A StringMap (``tuple[tuple[str, str], ...]``, a JSON object) or a list of one type."""
    if args == (tuple[str, str], Ellipsis):

        def load_map(v: Any) -> Any:
            if not _is_mapping(v):
                return _MISSING
            return tuple((str(k), item) for k, item in v.items() if isinstance(item, str))

        return load_map, dict
    item_load, item_dump = _converters(args[0])
    item_kind, item_fast = _fast_path(args[0])
    empty_item: Any = args[0]() if isinstance(args[0], type) and issubclass(args[0], Model) else _MISSING

    def load_list(v: Any) -> Any:
        if not isinstance(v, list):
            return _MISSING
        out = []
        for x in v:
            if type(x) is item_kind:  # see _fast_path
                out.append(x if item_fast is None else item_fast(x))
                continue
            loaded = item_load(x)
            if loaded is _MISSING:
                if empty_item is _MISSING:
                    continue  # an odd scalar item is dropped
                loaded = empty_item  # an odd object item becomes an empty one: indices stay right
            out.append(loaded)
        return tuple(out)

    return load_list, (lambda v: [item_dump(x) for x in v])


def _fast_path(hint: Any) -> tuple[type, Load | None]:
    """The wire type nearly every value of this attribute has, and what loads a value of exactly
    that type (None: the value as it is).  Loaders test ``type(value) is kind`` first and only
    then the general converter: its checks cost more than loading a small object."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        (inner,) = (a for a in args if a is not type(None))
        return _fast_path(inner)
    if origin is tuple:
        load, _ = _converters(hint)
        return (dict if args == (tuple[str, str], Ellipsis) else list), load
    if isinstance(hint, type) and issubclass(hint, Model):
        return dict, hint.load
    return hint, None  # str, bool, int: an int is its own int(), a str or bool itself


@attrs.frozen
class _Slot:
    name: str
    wire: str
    default: Any
    load: Load
    dump: Dump
    kind: type  # see _fast_path
    fast: Load | None


class Model:
    """Base of the wire-mapped classes: ``from_dict`` and ``to_dict`` driven by the type hints."""

    __slots__ = ()

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Structure a wire dict (anything else counts as an empty one)."""
        return cls.load(data if _is_mapping(data) else {})

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> Self:
        """:meth:`from_dict` of a mapping (nested objects are loaded this way: checked once)."""
        kwargs: dict[str, Any] = {}
        by_wire = _LOAD_PLANS.get(cls) or _load_plan(cls)
        # The fields present, not every field of the class: objects set few of them.
        for wire, value in data.items():
            slot = by_wire.get(wire)
            if slot is None:
                continue
            name, kind, fast, load = slot
            if type(value) is kind:
                kwargs[name] = value if fast is None else fast(value)
            elif value is not None:
                loaded = load(value)
                if loaded is not _MISSING:
                    kwargs[name] = loaded
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The wire dict (Go ``omitempty`` rules; fields with a non-zero CRD default always written)."""
        out: dict[str, Any] = {}
        for slot in _slots(type(self)):
            value = getattr(self, slot.name)
            if value is None or (_is_zero(value) and value == slot.default):
                continue
            out[slot.wire] = slot.dump(value)
        return out


_SLOTS: dict[type, tuple[_Slot, ...]] = {}
# Per class: wire name -> (attribute, kind, fast, load) of its _Slot, for Model.load.
_LOAD_PLANS: dict[type, dict[str, tuple[str, type, Load | None, Load]]] = {}


def _load_plan(cls: type[Model]) -> dict[str, tuple[str, type, Load | None, Load]]:
    plan = _LOAD_PLANS[cls] = {
        slot.wire: (slot.name, slot.kind, slot.fast, slot.load) for slot in _slots(cls)
    }
    return plan


def _slots(cls: type[Model]) -> tuple[_Slot, ...]:
    """The attribute plan of a model class, worked out once from its (resolved) type hints."""
    known = _SLOTS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    out = []
    for f in attrs.fields(typing.cast(Any, cls)):
        load, dump = _converters(hints[f.name])
        kind, fast = _fast_path(hints[f.name])
        out.append(_Slot(f.name, f.metadata.get(WIRE) or _camel(f.name), f.default, load, dump, kind, fast))
    plan = _SLOTS[cls] = tuple(out)
    return plan


# -- shared types ---------------------------------------------------------------------------------


@attrs.frozen
class HeaderValue(Model):
    name: str = ""
    value: str = ""


@attrs.frozen
class HeadersPolicy(Model):
    set: tuple[HeaderValue, ...] = ()
    remove: tuple[str, ...] = ()


@attrs.frozen
class HeaderMatchCondition(Model):
    name: str = ""
    present: bool = False
    not_present: bool = attrs.field(default=False, metadata={WIRE: "notpresent"})
    contains: str = ""
    not_contains: str = attrs.field(default="", metadata={WIRE: "notcontains"})
    exact: str = ""
    not_exact: str = attrs.field(default="", metadata={WIRE: "notexact"})
    regex: str = ""
    ignore_case: bool = False
    treat_missing_as_empty: bool = False


@attrs.frozen
class QueryParameterMatchCondition(Model):
    name: str = ""
    exact: str = ""
    prefix: str = ""
    suffix: str = ""
    regex: str = ""
    contains: str = ""
    present: bool = False
    ignore_case: bool = False


@attrs.frozen
class MatchCondition(Model):
    prefix: str = ""
    exact: str = ""
    regex: str = ""
    header: HeaderMatchCondition | None = None
    query_parameter: QueryParameterMatchCondition | None = None


@attrs.frozen
class UpstreamValidation(Model):
    ca_secret: str = ""
    subject_name: str = ""
    subject_names: tuple[str, ...] = ()


@attrs.frozen
class CookiePathRewrite(Model):
    value: str = ""


@attrs.frozen
class CookieDomainRewrite(Model):
    value: str = ""


@attrs.frozen
class CookieRewritePolicy(Model):
    name: str = ""
    path_rewrite: CookiePathRewrite | None = None
    domain_rewrite: CookieDomainRewrite | None = None
    secure: bool | None = None  # unset: leave the attribute alone; False: clear it
    same_site: str = ""


@attrs.frozen
class SlowStartPolicy(Model):
    window: str = ""
    aggression: str = "1.0"
    min_weight_percent: int = 10


@attrs.frozen
class Service(Model):
    name: str = ""
    port: int = 0
    health_port: int = 0
    protocol: str = ""
    weight: int = 0
    validation: UpstreamValidation | None = None
    mirror: bool = False
    request_headers_policy: HeadersPolicy | None = None
    response_headers_policy: HeadersPolicy | None = None
    cookie_rewrite_policies: tuple[CookieRewritePolicy, ...] = ()
    slow_start_policy: SlowStartPolicy | None = None


@attrs.frozen
class HeaderHashOptions(Model):
    header_name: str = ""


@attrs.frozen
class QueryParameterHashOptions(Model):
    parameter_name: str = ""


@attrs.frozen
class RequestHashPolicy(Model):
    terminal: bool = False
    header_hash_options: HeaderHashOptions | None = None
    query_parameter_hash_options: QueryParameterHashOptions | None = None
    hash_source_ip: bool = attrs.field(default=False, metadata={WIRE: "hashSourceIP"})


@attrs.frozen
class LoadBalancerPolicy(Model):
    strategy: str = ""
    request_hash_policies: tuple[RequestHashPolicy, ...] = ()


@attrs.frozen
class IPFilterPolicy(Model):
    source: str = ""  # "Peer" | "Remote"
    cidr: str = ""


@attrs.frozen
class AuthorizationPolicy(Model):
    disabled: bool = False
    context: StringMap = ()


@attrs.frozen
class LocalRateLimitPolicy(Model):
    requests: int = 0
    unit: str = ""
    burst: int = 0
    response_status_code: int = 0  # 0: Envoy's 429
    response_headers_to_add: tuple[HeaderValue, ...] = ()


@attrs.frozen
class GenericKeyDescriptor(Model):
    key: str = ""  # "": generic_key
    value: str = ""


@attrs.frozen
class RequestHeaderDescriptor(Model):
    header_name: str = ""
    descriptor_key: str = ""


@attrs.frozen
class RequestHeaderValueMatchDescriptor(Model):
    headers: tuple[HeaderMatchCondition, ...] = ()
    expect_match: bool = True
    value: str = ""


@attrs.frozen
class RemoteAddressDescriptor(Model):
    """Presence is the whole of it: the client address, under key ``remote_address``."""


@attrs.frozen
class RateLimitDescriptorEntry(Model):
    generic_key: GenericKeyDescriptor | None = None
    request_header: RequestHeaderDescriptor | None = None
    request_header_value_match: RequestHeaderValueMatchDescriptor | None = None
    remote_address: RemoteAddressDescriptor | None = None


@attrs.frozen
class RateLimitDescriptor(Model):
    entries: tuple[RateLimitDescriptorEntry, ...] = ()


@attrs.frozen
class GlobalRateLimitPolicy(Model):
    disabled: bool = False
    descriptors: tuple[RateLimitDescriptor, ...] = ()


@attrs.frozen
class RateLimitPolicy(Model):
    local: LocalRateLimitPolicy | None = None
    global_: GlobalRateLimitPolicy | None = attrs.field(default=None, metadata={WIRE: "global"})


# -- routes ---------------------------------------------------------------------------------------


@attrs.frozen
class TimeoutPolicy(Model):
    response: str = ""
    idle: str = ""
    idle_connection: str = ""


@attrs.frozen
class RetryPolicy(Model):
    count: int = 1  # -1 disables retries; 0 means Envoy's 1
    per_try_timeout: str = ""
    retry_on: tuple[str, ...] = ()
    retriable_status_codes: tuple[int, ...] = ()


@attrs.frozen
class HTTPStatusRange(Model):
    start: int = 0
    end: int = 0


@attrs.frozen
class HTTPHealthCheckPolicy(Model):
    path: str = ""
    host: str = ""
    interval_seconds: int = 0
    timeout_seconds: int = 0
    unhealthy_threshold_count: int = 0
    healthy_threshold_count: int = 0
    expected_statuses: tuple[HTTPStatusRange, ...] = ()


@attrs.frozen
class ReplacePrefix(Model):
    prefix: str = ""
    replacement: str = ""


@attrs.frozen
class PathRewritePolicy(Model):
    replace_prefix: tuple[ReplacePrefix, ...] = ()


@attrs.frozen
class HTTPRequestRedirectPolicy(Model):
    scheme: str = ""
    hostname: str = ""
    port: int = 0
    status_code: int = 302
    path: str = ""
    prefix: str = ""


@attrs.frozen
class HTTPDirectResponsePolicy(Model):
    status_code: int = 0
    body: str = ""


@attrs.frozen
class HTTPInternalRedirectPolicy(Model):
    max_internal_redirects: int = 0
    redirect_response_codes: tuple[int, ...] = ()
    allow_cross_scheme_redirect: str = "Never"
    deny_repeated_route_redirect: bool = False


@attrs.frozen
class JWTVerificationPolicy(Model):
    require: str = ""
    disabled: bool = False


@attrs.frozen
class Route(Model):
    conditions: tuple[MatchCondition, ...] = ()
    services: tuple[Service, ...] = ()
    enable_websockets: bool = False
    permit_insecure: bool = False
    auth_policy: AuthorizationPolicy | None = None
    timeout_policy: TimeoutPolicy | None = None
    retry_policy: RetryPolicy | None = None
    health_check_policy: HTTPHealthCheckPolicy | None = None
    load_balancer_policy: LoadBalancerPolicy | None = None
    path_rewrite_policy: PathRewritePolicy | None = None
    request_headers_policy: HeadersPolicy | None = None
    response_headers_policy: HeadersPolicy | None = None
    cookie_rewrite_policies: tuple[CookieRewritePolicy, ...] = ()
    rate_limit_policy: RateLimitPolicy | None = None
    request_redirect_policy: HTTPRequestRedirectPolicy | None = None
    direct_response_policy: HTTPDirectResponsePolicy | None = None
    internal_redirect_policy: HTTPInternalRedirectPolicy | None = None
    jwt_verification_policy: JWTVerificationPolicy | None = None
    ip_allow_policy: tuple[IPFilterPolicy, ...] = ()
    ip_deny_policy: tuple[IPFilterPolicy, ...] = ()


# -- virtual host ---------------------------------------------------------------------------------


@attrs.frozen
class ClientCertificateDetails(Model):
    subject: bool = False
    cert: bool = False
    chain: bool = False
    dns: bool = False
    uri: bool = False


@attrs.frozen
class DownstreamValidation(Model):
    ca_secret: str = ""
    skip_client_cert_validation: bool = False
    optional_client_certificate: bool = False
    crl_secret: str = ""
    crl_only_verify_leaf_cert: bool = False
    forward_client_certificate: ClientCertificateDetails | None = None


@attrs.frozen
class TLS(Model):
    secret_name: str = ""
    minimum_protocol_version: str = ""
    maximum_protocol_version: str = ""
    passthrough: bool = False
    client_validation: DownstreamValidation | None = None
    enable_fallback_certificate: bool = False


@attrs.frozen
class ExtensionServiceReference(Model):
    api_version: str = ""  # "": projectcontour.io/v1alpha1
    namespace: str = ""  # "": the proxy's
    name: str = ""


@attrs.frozen
class HTTPAuthorizationHeaderMatcher(Model):
    exact: str = ""
    prefix: str = ""
    suffix: str = ""
    contains: str = ""
    ignore_case: bool = False


@attrs.frozen
class HTTPAuthorizationServerSettings(Model):
    path_prefix: str = ""
    allowed_authorization_headers: tuple[HTTPAuthorizationHeaderMatcher, ...] = ()
    allowed_upstream_headers: tuple[HTTPAuthorizationHeaderMatcher, ...] = ()


@attrs.frozen
class AuthorizationServerBufferSettings(Model):
    max_request_bytes: int = 1024
    allow_partial_message: bool = False
    pack_as_bytes: bool = False


@attrs.frozen
class AuthorizationServer(Model):
    extension_ref: ExtensionServiceReference | None = None
    service_type: str = "grpc"
    http_settings: HTTPAuthorizationServerSettings | None = None
    auth_policy: AuthorizationPolicy | None = None
    response_timeout: str = ""
    fail_open: bool = False
    with_request_body: AuthorizationServerBufferSettings | None = None


@attrs.frozen
class CORSPolicy(Model):
    allow_credentials: bool = False
    allow_origin: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: str = ""
    allow_private_network: bool = False


@attrs.frozen
class RemoteJWKS(Model):
    uri: str = ""
    validation: UpstreamValidation | None = None
    timeout: str = ""  # "": 1s
    cache_duration: str = ""  # "": Envoy's 5m
    dns_lookup_family: str = ""


@attrs.frozen
class LocalJWKS(Model):
    secret_name: str = ""
    key: str = ""


@attrs.frozen
class JWTProvider(Model):
    name: str = ""
    default: bool = False
    issuer: str = ""
    audiences: tuple[str, ...] = ()
    remote_jwks: RemoteJWKS | None = attrs.field(default=None, metadata={WIRE: "remoteJWKS"})
    local_jwks: LocalJWKS | None = attrs.field(default=None, metadata={WIRE: "localJWKS"})
    forward_jwt: bool = attrs.field(default=False, metadata={WIRE: "forwardJWT"})


@attrs.frozen
class VirtualHost(Model):
    fqdn: str = ""
    tls: TLS | None = None
    authorization: AuthorizationServer | None = None
    cors_policy: CORSPolicy | None = None
    rate_limit_policy: RateLimitPolicy | None = None
    jwt_providers: tuple[JWTProvider, ...] = ()
    ip_allow_policy: tuple[IPFilterPolicy, ...] = ()
    ip_deny_policy: tuple[IPFilterPolicy, ...] = ()


# -- includes, TCP proxying, the spec -------------------------------------------------------------


@attrs.frozen
class Include(Model):
    name: str = ""
    namespace: str = ""  # "": the including proxy's
    conditions: tuple[MatchCondition, ...] = ()


@attrs.frozen
class TCPProxyInclude(Model):
    name: str = ""
    namespace: str = ""


@attrs.frozen
class TCPHealthCheckPolicy(Model):
    interval_seconds: int = 0
    timeout_seconds: int = 0
    unhealthy_threshold_count: int = 0
    healthy_threshold_count: int = 0


@attrs.frozen
class TCPProxy(Model):
    load_balancer_policy: LoadBalancerPolicy | None = None
    services: tuple[Service, ...] = ()
    include: TCPProxyInclude | None = None
    includes_deprecated: TCPProxyInclude | None = attrs.field(default=None, metadata={WIRE: "includes"})
    health_check_policy: TCPHealthCheckPolicy | None = None

    @property
    def delegate(self) -> TCPProxyInclude | None:
        """The include to follow: ``include``, else the legacy plural ``includes``."""
        return self.include or self.includes_deprecated


@attrs.frozen
class HTTPProxySpec(Model):
    virtualhost: VirtualHost | None = None
    routes: tuple[Route, ...] = ()
    tcpproxy: TCPProxy | None = None
    includes: tuple[Include, ...] = ()
    ingress_class_name: str = ""

    @property
    def is_root(self) -> bool:
        """A proxy with a virtual host is a root; one without must be included (or is orphaned)."""
        return self.virtualhost is not None


@attrs.frozen
class HTTPProxy:
    """The parts of an HTTPProxy object the processor needs (status is not part of the model)."""

    namespace: str
    name: str
    spec: HTTPProxySpec
    generation: int = 0

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> HTTPProxy:
        meta = obj.get("metadata")
        meta = meta if _is_mapping(meta) else {}
        generation: Any = meta.get("generation")
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            spec=HTTPProxySpec.from_dict(obj.get("spec")),
            generation=int(generation) if _is_int(generation) else 0,
        )

    def to_dict(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.generation:
            meta["generation"] = self.generation
        return {
            "apiVersion": "projectcontour.io/v1",
            "kind": "HTTPProxy",
            "metadata": meta,
            "spec": self.spec.to_dict(),
        }
