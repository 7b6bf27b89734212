"""The DAG's values: what a processor says Envoy should do, in cpx's own terms.

Every node here is a frozen attrs value with a cached hash: translation memoises Envoy messages by
node, so an unchanged route or cluster is never translated (or serialised) twice.  Containers that
processors fill during a build (listeners, virtual hosts) live in :mod:`cpx.dag.dag`.
"""

from __future__ import annotations

import enum
import typing

import attrs

from cpx.dag.attachments import NO_ATTACHMENTS, Attachments
from cpx.objects import ObjectKey


class PathKind(enum.Enum):
    PREFIX = "prefix"  # plain string prefix: /foo matches /foobar
    SEGMENT_PREFIX = "segment_prefix"  # /foo matches /foo and /foo/bar, not /foobar
    EXACT = "exact"
    REGEX = "regex"  # RE2, anchored on the whole path


@attrs.frozen(cache_hash=True, kw_only=True)
class PathMatch:
    kind: PathKind
    value: str

    def key(self) -> str:
        return f"{self.kind.value}:{self.value}"


class HeaderMatchKind(enum.Enum):
    EXACT = "exact"
    REGEX = "regex"
    CONTAINS = "contains"
    PRESENT = "present"


@attrs.frozen(cache_hash=True, kw_only=True)
class HeaderMatch:
    """A request header condition; `:method` and `:authority` are headers too."""

    name: str
    kind: HeaderMatchKind
    value: str = ""
    invert: bool = False
    ignore_case: bool = False
    treat_missing_as_empty: bool = False


class QueryMatchKind(enum.Enum):
    EXACT = "exact"
    REGEX = "regex"
    PREFIX = "prefix"
    SUFFIX = "suffix"
    CONTAINS = "contains"
    PRESENT = "present"


@attrs.frozen(cache_hash=True, kw_only=True)
class QueryMatch:
    name: str
    kind: QueryMatchKind
    value: str = ""
    ignore_case: bool = False


class UpstreamProtocol(enum.Enum):
    HTTP1 = ""
    H2 = "h2"  # HTTP/2 over TLS
    H2C = "h2c"  # HTTP/2 cleartext
    TLS = "tls"  # HTTP/1 over TLS


@attrs.frozen(cache_hash=True, kw_only=True)
class CircuitBreakers:
    max_connections: int | None = None
    max_pending_requests: int | None = None
    max_requests: int | None = None
    max_retries: int | None = None
    per_host_max_connections: int | None = None

    def is_empty(self) -> bool:
        return self == _NO_CIRCUIT_BREAKERS


_NO_CIRCUIT_BREAKERS = CircuitBreakers()


@attrs.frozen(cache_hash=True, kw_only=True)
class Secret:
    """A validated TLS (or CA) Secret.  Its data never appears in repr or logs."""

    namespace: str
    name: str
    cert_pem: bytes = attrs.field(repr=False, default=b"")
    key_pem: bytes = attrs.field(repr=False, default=b"")
    ca_pem: bytes = attrs.field(repr=False, default=b"")
    crl_pem: bytes = attrs.field(repr=False, default=b"")  # PEM CRLs (a ``crl.pem`` Secret)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@attrs.frozen(cache_hash=True, kw_only=True)
class ServicePort:
    """One port of a Kubernetes Service: where a cluster's endpoints come from."""

    namespace: str
    name: str
    port: int
    port_name: str = ""
    target_port: int | str | None = None
    # A Service of type ExternalName resolves to this DNS name instead of EndpointSlices.
    external_name: str | None = None
    protocol: UpstreamProtocol = UpstreamProtocol.HTTP1
    circuit_breakers: CircuitBreakers = CircuitBreakers()

    @property
    def eds_name(self) -> str:
        """Contour's EDS service name: namespace/service/portName (or namespace/service if unnamed)."""
        if self.port_name:
            return f"{self.namespace}/{self.name}/{self.port_name}"
        return f"{self.namespace}/{self.name}"


@attrs.frozen(cache_hash=True, kw_only=True)
class Duration:
    """A timeout: `None` seconds means disabled (Contour's `infinity`)."""

    seconds: float | None

    @property
    def disabled(self) -> bool:
        return self.seconds is None


@attrs.frozen(cache_hash=True, kw_only=True)
class LoadAssignment:
    """One ClusterLoadAssignment a plugin's cluster reads, merging several Service ports, each one
    locality with its weight (Contour's ExtensionService upstreams): ``ClusterKindSpec.load_assignments``.
    A weight of 0 leaves the locality's weight unset, as Contour does."""

    name: str
    ports: tuple[ServicePort, ...]
    weights: tuple[int, ...]  # one per port

    def __attrs_post_init__(self) -> None:
        if len(self.weights) != len(self.ports):
            raise ValueError(f"load assignment {self.name!r}: one weight per port")


@attrs.frozen(cache_hash=True, kw_only=True)
class ExtensionUpstream:
    """A service Envoy's filters call out to (external authorization, rate limiting), as the plugin
    that owns its kind publishes it for the plugins that reference it by name (the registry
    :data:`cpx.dag.EXTENSION_UPSTREAMS`, keyed by the referenced object).

    ``valid`` False: the object exists but is refused (its own status says why); referrers treat it
    as Contour treats a missing extension.  ``response_timeout`` is the object's response timeout
    (None: unset; ``Duration(None)``: infinity), the default of a filter's call timeout.
    """

    cluster_name: str
    valid: bool = True
    protocol: str = "h2"  # "h2" (TLS), "h2c" or "http/1.1"
    sni: str = ""  # the TLS server name (and gRPC authority) the cluster uses, if any
    response_timeout: Duration | None = None


@attrs.frozen(cache_hash=True, kw_only=True)
class HealthCheck:
    path: str = ""  # empty: TCP health check
    host: str = "contour-envoy-healthcheck"
    interval: float = 5.0
    timeout: float = 2.0
    unhealthy_threshold: int = 3
    healthy_threshold: int = 2
    port: int | None = None
    expected_statuses: tuple[tuple[int, int], ...] = ()


@attrs.frozen(cache_hash=True, kw_only=True)
class UpstreamValidation:
    ca: Secret
    subject_names: tuple[str, ...] = ()  # DNS subject alternative names, one must match
    # URI subject alternative names (e.g. SPIFFE IDs): a match of one of these also passes.
    uri_subject_names: tuple[str, ...] = ()


@attrs.frozen(cache_hash=True, kw_only=True)
class ClientCertificateDetails:
    """Which parts of a validated client certificate Envoy puts in ``x-forwarded-client-cert``
    (the hash is always there)."""

    subject: bool = False
    cert: bool = False  # URL-encoded PEM
    chain: bool = False  # URL-encoded PEM, the leaf included
    dns: bool = False  # DNS subject alternative names
    uri: bool = False  # URI subject alternative names


@attrs.frozen(cache_hash=True, kw_only=True)
class DownstreamValidation:
    """Client certificate validation on a secure virtual host's SNI chain (Contour's
    PeerValidationContext on a SecureVirtualHost).

    ``ca`` (a CA bundle) verifies the client's chain, ``crl`` (CRLs) revokes certificates: of every
    CA in the chain, or of the leaf only with ``crl_only_verify_leaf``; a CRL needs a CA.  With
    ``skip_verification`` a certificate is requested but any is accepted; with ``optional`` a
    connection without one is accepted too (one that is sent is still verified).  With
    ``forward_client_certificate`` the connection manager replaces ``x-forwarded-client-cert`` by
    those details of the connection's certificate (and removes it when there is none).
    """

    ca: Secret | None = None
    crl: Secret | None = None
    skip_verification: bool = False
    optional: bool = False
    crl_only_verify_leaf: bool = False
    forward_client_certificate: ClientCertificateDetails | None = None


@attrs.frozen(cache_hash=True, kw_only=True)
class HeaderValue:
    name: str
    value: str


@attrs.frozen(cache_hash=True, kw_only=True)
class HeadersPolicy:
    set: tuple[HeaderValue, ...] = ()
    remove: tuple[str, ...] = ()
    # Appended to the header's current values (added when absent), after ``set``.
    add: tuple[HeaderValue, ...] = ()
    host_rewrite: str | None = None  # literal Host value
    host_rewrite_header: str | None = None  # copy Host from this request header

    def is_empty(self) -> bool:
        # Field by field (what == compares), without attrs' __eq__ call: this runs for every
        # route and cluster translated, and most policies are empty.
        return (
            self.set == ()
            and self.remove == ()
            and self.add == ()
            and self.host_rewrite is None
            and self.host_rewrite_header is None
        )


_NO_HEADERS = HeadersPolicy()


@attrs.frozen(cache_hash=True, kw_only=True)
class SlowStart:
    window: float
    aggression: float = 1.0
    min_weight_percent: int = 10


@attrs.frozen(cache_hash=True, kw_only=True)
class Cluster:
    """An upstream cluster: a Service port plus how to talk to it.

    Routes and TCP proxies reference clusters; the CDS cache names them the way Contour does
    (namespace/service/port/<hash of the options below>).
    """

    upstream: ServicePort
    weight: int = 1
    load_balancer_policy: str = "RoundRobin"
    health_check: HealthCheck | None = None
    validation: UpstreamValidation | None = None
    sni: str = ""
    request_headers: HeadersPolicy = HeadersPolicy()
    response_headers: HeadersPolicy = HeadersPolicy()
    slow_start: SlowStart | None = None
    idle_connection_timeout: Duration | None = None
    cookie_rewrites: tuple[CookieRewrite, ...] = ()  # per-service Set-Cookie rewrites
    # Plugins' typed data, read by their HTTP filters' per-weighted-cluster configs.
    attachments: Attachments = NO_ATTACHMENTS


class CustomNode(typing.Protocol):
    """A plugin's own listener or cluster node (see :class:`cpx.records.ListenerKindSpec` and
    :class:`cpx.records.ClusterKindSpec`): a frozen attrs value, translated once per distinct value.

    ``name`` is the Envoy resource name; ``origin`` the source object it came from, which gets
    the note (and is left out) when the node cannot be translated; None for a plugin's own
    static node, which is then left out with an error in the log.
    """

    @property
    def name(self) -> str: ...

    @property
    def origin(self) -> ObjectKey | None: ...


DNS_LOOKUP_FAMILIES = ("auto", "v4", "v6", "all")


@attrs.frozen(cache_hash=True, kw_only=True)
class DNSNameCluster:
    """A cluster to one DNS name or IP address and port, not a Kubernetes Service (Contour's
    ``DNSNameCluster``: a JWKS server, an OAuth endpoint ...), over TLS when ``scheme`` is
    ``https`` (checked against ``validation`` when given, SNI ``address``).  Add it with
    ``dag.add_cluster_node``; the core's ``dnsname`` cluster kind builds it, named
    ``dnsname/<scheme>/<address>`` as Contour names it.

    ``origin`` does not take part in equality: several objects naming the same server share one
    cluster (the first one added is blamed if Envoy refuses it); the same name with other
    settings is a ``NameConflict`` of the later object.
    """

    address: str  # a DNS name or an IP literal (without brackets)
    port: int
    scheme: str = "https"  # "http" or "https"
    dns_lookup_family: str = "auto"  # one of DNS_LOOKUP_FAMILIES
    validation: UpstreamValidation | None = None
    origin: ObjectKey | None = attrs.field(default=None, eq=False)

    @property
    def name(self) -> str:
        return f"dnsname/{self.scheme}/{self.address}"


@attrs.frozen(cache_hash=True, kw_only=True)
class RetryPolicy:
    retry_on: str = "5xx"
    num_retries: int = 1
    per_try_timeout: Duration | None = None
    retriable_status_codes: tuple[int, ...] = ()
    # Envoy's retry_back_off base interval in seconds (more than 1 ms); None: Envoy's 25 ms.
    backoff: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0.001))
    )


@attrs.frozen(cache_hash=True, kw_only=True)
class TimeoutPolicy:
    response: Duration | None = None  # None: Envoy default (15 s); Duration(None): infinity
    idle: Duration | None = None
    idle_connection: Duration | None = None


@attrs.frozen(cache_hash=True, kw_only=True)
class RegexRewrite:
    """Rewrite the part of the path (never the query) that the RE2 ``pattern`` matches with
    ``substitution`` (``\\1`` for groups): a whole-path replacement is ``^/.*$``."""

    pattern: str
    substitution: str


@attrs.frozen(cache_hash=True, kw_only=True)
class Redirect:
    scheme: str | None = None
    hostname: str | None = None
    port: int | None = None
    path: str | None = None
    prefix: str | None = None
    regex_rewrite: RegexRewrite | None = None  # instead of path / prefix
    status_code: int = 302


@attrs.frozen(cache_hash=True, kw_only=True)
class DirectResponse:
    status_code: int
    body: str | None = None


# What Envoy's RouteAction.cluster_not_found_response_code can answer.
FAILED_SHARE_CODES = (500, 503, 404)


@attrs.frozen(cache_hash=True, kw_only=True)
class FailedShare:
    """The weighted share of a route's requests that would have gone to backends that cannot be
    used (not found, not permitted): Envoy answers them ``status_code`` itself while the route's
    clusters serve the rest.  Alone (no clusters) it is a direct response."""

    weight: int = attrs.field(validator=attrs.validators.gt(0))
    status_code: int = attrs.field(default=500, validator=attrs.validators.in_(FAILED_SHARE_CODES))


@attrs.frozen(cache_hash=True, kw_only=True)
class MirrorPolicy:
    cluster: Cluster
    percent: float = 100.0


@attrs.frozen(cache_hash=True, kw_only=True)
class HashPolicy:
    """One request-hash input for ring-hash load balancing (Contour's requestHashPolicies)."""

    header: str | None = None
    query_parameter: str | None = None
    source_ip: bool = False
    cookie: str | None = None  # Cookie strategy: Contour's X-Contour-Session-Affinity
    cookie_ttl: float = 0.0
    cookie_path: str = "/"
    terminal: bool = False


@attrs.frozen(cache_hash=True, kw_only=True)
class InternalRedirectPolicy:
    max_internal_redirects: int = 1
    redirect_response_codes: tuple[int, ...] = ()  # empty: Envoy's default (302)
    allow_cross_scheme_redirect: str = "Never"  # Always | Never | SafeOnly
    deny_repeated_route_redirect: bool = False


@attrs.frozen(cache_hash=True, kw_only=True)
class CookieRewrite:
    """Rewrite attributes of a Set-Cookie response header (Contour does it with a Lua filter)."""

    name: str
    path: str | None = None
    domain: str | None = None
    secure: bool | None = None
    same_site: str | None = None  # Strict | Lax | None


@attrs.frozen(cache_hash=True, kw_only=True)
class LocalRateLimit:
    """A per-Envoy token bucket (Envoy local_ratelimit): max = requests + burst, refilled each unit."""

    requests: int
    unit_seconds: float
    burst: int = 0
    status_code: int = 429
    response_headers: tuple[HeaderValue, ...] = ()


@attrs.frozen(cache_hash=True, kw_only=True)
class IPRule:
    cidr: str  # normalised: a bare address becomes /32 or /128
    remote: bool = False  # False: the socket peer; True: the remote (XFF / PROXY) address


@attrs.frozen(cache_hash=True, kw_only=True)
class IPFilter:
    """Envoy RBAC: allow only the listed ranges, or deny them."""

    allow: bool
    rules: tuple[IPRule, ...]


@attrs.frozen(cache_hash=True, kw_only=True)
class AuthorityCheck:
    """Which ``:authority`` (Host) a TLS connection whose SNI selected a virtual host may carry; the
    others are answered 421 (misdirected request).  Names are exact, ``*.example.com`` (one or more
    labels under it) or ``*`` (any).  Without one, the Host must be the SNI's host (Contour's rule)."""

    accept: str
    refuse: tuple[str, ...] = ()  # names other hosts own, answered 421 although accepted


@attrs.frozen(cache_hash=True, kw_only=True)
class CORSPolicy:
    allow_origin: tuple[str, ...]  # "*", exact origins, or RE2 regexes (prefixed "regex:")
    allow_methods: tuple[str, ...]
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    allow_credentials: bool = False
    max_age: str | None = None  # seconds as a string, Envoy's format; "0" disables caching
    allow_private_network: bool = False
    # A preflight whose origin (or method) the policy does not allow goes on to the backend (Envoy's
    # default, HTTPProxy's behaviour); False: Envoy answers it itself, without CORS headers.
    forward_unmatched_preflights: bool = True


# Not slotted: a frozen slotted class's __init__ sets each of the 26 fields through
# object.__setattr__, a dict class's stores them in its __dict__, ~30% cheaper; a large build
# makes one Route per path (10k Ingress paths: -20 ms build, +8 ms reading them in RDS).
@attrs.frozen(cache_hash=True, kw_only=True, slots=False)
class Route:
    """One route of a virtual host: match conditions plus exactly one action.

    The action is `clusters` (weighted, plus a `failed_share` Envoy answers itself), `redirect`, or
    `direct_response`; `https_redirect` turns an HTTP route into a 301 to HTTPS.  A route with
    neither clusters nor another action answers 503 (its `failed_share`'s status if it has one),
    which is how a dangling Service reference behaves in Contour.
    """

    path: PathMatch
    headers: tuple[HeaderMatch, ...] = ()
    query: tuple[QueryMatch, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    failed_share: FailedShare | None = None  # weighted against ``clusters``
    redirect: Redirect | None = None
    direct_response: DirectResponse | None = None
    https_redirect: bool = False
    websocket: bool = False
    timeout_policy: TimeoutPolicy = TimeoutPolicy()
    retry_policy: RetryPolicy | None = None
    prefix_rewrite: str | None = None
    regex_rewrite: RegexRewrite | None = None  # instead of prefix_rewrite
    request_headers: HeadersPolicy = HeadersPolicy()
    response_headers: HeadersPolicy = HeadersPolicy()
    mirrors: tuple[MirrorPolicy, ...] = ()
    hash_policies: tuple[HashPolicy, ...] = ()
    internal_redirect: InternalRedirectPolicy | None = None
    cookie_rewrites: tuple[CookieRewrite, ...] = ()
    local_rate_limit: LocalRateLimit | None = None
    ip_filter: IPFilter | None = None  # overrides the virtual host's
    cors: CORSPolicy | None = None  # overrides the virtual host's
    # Order among routes whose matches are equally specific (same path, same method/header/query
    # counts): lower first, before the conditions' values decide.  Lets a plugin whose API ranks
    # such routes by age or rule position (Gateway API) say so; 0 for every route otherwise.
    precedence: int = 0
    # The object this route came from: a fault in its translation is that object's (and its
    # status says so); also shown by /debug/dag.
    origin: ObjectKey | None = None
    # Plugins' typed data, read by their HTTP filters' per-route configs.
    attachments: Attachments = NO_ATTACHMENTS

    def forwards(self, secure: bool) -> bool:
        """Whether Envoy proxies this route to its clusters (rather than redirecting or answering
        itself) on an HTTPS (``secure``) or a plain virtual host."""
        if self.https_redirect and not secure:
            return False
        return self.direct_response is None and self.redirect is None and bool(self.clusters)

    def match_key(self) -> str:
        """Routes with the same key overwrite each other in a virtual host (Contour's behaviour)."""
        if not (self.headers or self.query):  # most routes: the path's key alone, as joined below
            return self.path.key()
        parts = [self.path.key()]
        parts += [f"h:{h.name}:{h.kind.value}:{h.value}:{h.invert}:{h.ignore_case}" for h in self.headers]
        parts += [f"q:{q.name}:{q.kind.value}:{q.value}:{q.ignore_case}" for q in self.query]
        return "|".join(parts)


@attrs.frozen(cache_hash=True, kw_only=True)
class TCPProxy:
    clusters: tuple[Cluster, ...]


@attrs.frozen(cache_hash=True, kw_only=True)
class TLSParams:
    min_version: str = "1.2"
    max_version: str = "1.3"
