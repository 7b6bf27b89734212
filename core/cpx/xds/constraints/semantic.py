"""Envoy's rules beyond protoc-gen-validate: what Envoy refuses while it builds its config objects.

Each rule is keyed by the full name of the message it looks at and yields ``(path, rule, message)``
findings, the path relative to that message. A :class:`Scope` carries what a rule needs from the
messages around it (a RouteConfiguration's body size limit, whether a Cluster resolves names by
DNS); scope rules, keyed the same way, derive it on the way down.

Each rule was checked against Envoy 1.40 (``envoy --mode validate``, tests/core/test_xds_validate.py);
the messages quote Envoy's own.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import re2

from cpx.xds.constraints import pgv

# cryptography is imported where TLS material is checked (~50 ms of start-up imports otherwise).

# RouteConfiguration.max_direct_response_body_size_bytes when unset.
DEFAULT_MAX_DIRECT_RESPONSE_BODY = 4096
# re2.max_program_size.error_level as cpx's bootstrap sets it (as Contour's does; Envoy's own
# default is 100): an Envoy bootstrapped otherwise may refuse what this allows, and says so (NACK).
DEFAULT_MAX_REGEX_PROGRAM_SIZE = 1_048_576
# Envoy converts every Duration to integer nanoseconds or milliseconds; beyond this it refuses it
# ("Duration out-of-range"), well inside protobuf's own limit (found by bisection on Envoy 1.40).
MAX_ENVOY_DURATION_SECONDS = 9_223_372_035
_RSA_MIN_BITS = 2048
_CURVES = frozenset(("secp256r1", "secp384r1", "secp521r1"))


# A tuple: part of the key of every remembered walk (validate._walk) and pass check, and a
# tuple's hash is computed in C, with no Python call (attrs' cached hash still is one).
class Scope(NamedTuple):
    """What the enclosing messages tell a rule."""

    max_direct_response_body: int = DEFAULT_MAX_DIRECT_RESPONSE_BODY
    hostnames_resolve: bool = False  # endpoints of a STRICT_DNS/LOGICAL_DNS cluster may be names


Finding = tuple[str, str, str]  # (path relative to the message, rule, message)
SemanticRule = Callable[[Any, Scope], Iterable[Finding]]
ScopeRule = Callable[[Any, Scope], Scope]


# -- durations --------------------------------------------------------------------------------------


def duration_range(d: Any, scope: Scope) -> Iterable[Finding]:
    """Envoy validates every Duration in a config, whatever field holds it."""
    seconds, nanos = d.seconds, d.nanos
    if 0 <= seconds <= MAX_ENVOY_DURATION_SECONDS and 0 <= nanos < 1_000_000_000:
        return ()  # the common case, first and cheap: this runs for every Duration
    if seconds < 0 or nanos < 0:
        return (("", "envoy.duration: not negative", "Expected positive duration"),)
    if not pgv.duration_valid(d):
        return (("", "envoy.duration: protobuf range", "Duration out-of-range according to Protobuf"),)
    rule = f"envoy.duration: seconds <= {MAX_ENVOY_DURATION_SECONDS}"
    return (("", rule, f"Duration out-of-range (at most {MAX_ENVOY_DURATION_SECONDS} seconds)"),)


# -- routes -----------------------------------------------------------------------------------------


def route_configuration_scope(config: Any, scope: Scope) -> Scope:
    if config.HasField("max_direct_response_body_size_bytes"):
        return scope._replace(max_direct_response_body=config.max_direct_response_body_size_bytes.value)
    return scope


def direct_response_body(action: Any, scope: Scope) -> Iterator[Finding]:
    body = action.body
    kind = body.WhichOneof("specifier")
    if kind == "inline_string":
        size = len(body.inline_string.encode())
    elif kind == "inline_bytes":
        size = len(body.inline_bytes)
    else:
        return
    limit = scope.max_direct_response_body
    if size > limit:
        rule = f"envoy.direct_response: body <= max_direct_response_body_size_bytes ({limit})"
        yield f"body.{kind}", rule, f"response body size is {size} bytes; maximum is {limit}"


def _unmodifiable(header: str) -> bool:
    """Envoy's HeaderUtility::isModifiableHeader, negated: pseudo-headers and Host are Envoy's."""
    return header.startswith(":") or header.lower() == "host"


_HEADER_RULE = "envoy.header: not :-prefixed or host"


def header_value_option(option: Any, scope: Scope) -> Iterable[Finding]:
    if not _unmodifiable(option.header.key):
        return ()
    return (("header.key", _HEADER_RULE, ":-prefixed or host headers may not be modified"),)


def removed_headers(message: Any, scope: Scope) -> Iterable[Finding]:
    if not message.request_headers_to_remove and not message.response_headers_to_remove:
        return ()  # every route and virtual host is checked, and few remove headers
    found: list[Finding] = []
    for field in ("request_headers_to_remove", "response_headers_to_remove"):
        names = getattr(message, field)
        if names:
            found.extend(
                (f"{field}[{index}]", _HEADER_RULE, ":-prefixed or host headers may not be removed")
                for index, name in enumerate(names)
                if _unmodifiable(name)
            )
    return found


def unique_domains(config: Any, scope: Scope) -> Iterable[Finding]:
    """Envoy refuses a RouteConfiguration naming a domain twice (case-insensitively), in one
    virtual host or two, or with more than one ``*`` virtual host."""
    seen: set[str] = set()
    wildcard = False
    found: list[Finding] = []
    for v, vhost in enumerate(config.virtual_hosts):
        for d, domain in enumerate(vhost.domains):
            place = f"virtual_hosts[{v}].domains[{d}]"
            if domain == "*":
                if wildcard:
                    found.append(
                        (place, "envoy.domains: one wildcard", "Only a single wildcard domain is permitted")
                    )
                wildcard = True
                continue
            folded = domain.lower()
            if folded in seen:
                text = f"Only unique values for domains are permitted. Duplicate entry of domain {folded}"
                found.append((place, "envoy.domains: unique", text))
            seen.add(folded)
    return found


_MAX_TOTAL_WEIGHT = 4_294_967_295


def weighted_cluster_total(weighted: Any, scope: Scope) -> Iterable[Finding]:
    total = sum(c.weight.value for c in weighted.clusters)
    if total == 0:
        return (
            (
                "clusters",
                "envoy.weights: sum > 0",
                "Sum of weights in the weighted_cluster must be greater than 0.",
            ),
        )
    if total > _MAX_TOTAL_WEIGHT:
        text = f"The sum of weights of all weighted clusters exceeds {_MAX_TOTAL_WEIGHT}"
        return (("clusters", f"envoy.weights: sum <= {_MAX_TOTAL_WEIGHT}", text),)
    return ()


def one_path_rewrite(action: Any, scope: Scope) -> Iterable[Finding]:
    if not (
        action.prefix_rewrite or action.HasField("regex_rewrite") or action.HasField("path_rewrite_policy")
    ):
        return ()  # every route is checked, and nearly none rewrites its path
    rewrites = [f for f in ("prefix_rewrite", "regex_rewrite", "path_rewrite_policy") if _set(action, f)]
    if len(rewrites) <= 1:
        return ()
    text = "Specify only one of prefix_rewrite, regex_rewrite or path_rewrite_policy"
    return ((rewrites[1], "envoy.route: one path rewrite", text),)


def _set(message: Any, field: str) -> bool:
    value = getattr(message, field)
    return bool(value) if isinstance(value, str) else bool(message.HasField(field))


@functools.lru_cache(maxsize=4096)
def _regex_program(pattern: str) -> tuple[str | None, int]:
    """(RE2's error, program size) of a pattern, as Envoy compiles it."""
    try:
        return None, int(re2.compile(pattern, pgv.re2_options()).programsize)
    except re2.error as err:
        reason = err.args[0] if err.args else err
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason), 0


def regex_matcher(matcher: Any, scope: Scope) -> Iterator[Finding]:
    error, size = _regex_program(matcher.regex)
    if error is not None:
        yield "regex", "envoy.regex: RE2 compiles", f"invalid regex: {error}"
        return
    limit = DEFAULT_MAX_REGEX_PROGRAM_SIZE
    if matcher.HasField("google_re2") and matcher.google_re2.HasField("max_program_size"):
        limit = matcher.google_re2.max_program_size.value
    if size > limit:
        rule = f"envoy.regex: program size <= {limit}"
        yield "regex", rule, f"RE2 program size of {size} > max program size of {limit}"


# -- addresses --------------------------------------------------------------------------------------


def cluster_scope(cluster: Any, scope: Scope) -> Scope:
    """STRICT_DNS and LOGICAL_DNS clusters (and custom ones) resolve their endpoints' names."""
    dns = cluster.WhichOneof("cluster_discovery_type") == "cluster_type" or cluster.type in (1, 2)
    return scope._replace(hostnames_resolve=True) if dns else scope


def envoy_ip(address: str) -> bool:
    """Envoy's parseInternetAddressNoThrow: inet_pton, plus an IPv6 scope id."""
    if pgv.is_ip(address):
        return True
    if "%" in address:
        try:
            return isinstance(ipaddress.ip_address(address), ipaddress.IPv6Address)
        except ValueError:
            return False
    return False


def socket_address(address: Any, scope: Scope) -> Iterator[Finding]:
    if scope.hostnames_resolve or address.resolver_name or not address.address:
        return
    if not envoy_ip(address.address):
        yield "address", "envoy.address: IP literal", f"malformed IP address: {address.address}"


# -- listeners --------------------------------------------------------------------------------------


def _ranges(ranges: Any) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((r.address_prefix, r.prefix_len.value) for r in ranges))


def _match_keys(match: Any) -> list[tuple[object, ...]]:
    """Every (server name, ALPN, everything else) combination one FilterChainMatch accepts."""
    rest = (
        match.destination_port.value if match.HasField("destination_port") else 0,
        _ranges(match.prefix_ranges),
        _ranges(match.direct_source_prefix_ranges),
        match.transport_protocol,
        match.source_type,
        _ranges(match.source_prefix_ranges),
        tuple(sorted(match.source_ports)),
    )
    names = [n.lower() for n in match.server_names] or [""]
    protocols = list(match.application_protocols) or [""]
    return [(name, protocol, *rest) for name in names for protocol in protocols]


def filter_chain_matches(listener: Any, scope: Scope) -> Iterable[Finding]:
    """Envoy's filter chain manager: no partial wildcard server name, no two chains (or two
    entries of one chain) matching the same connections."""
    found: list[Finding] = []
    seen: set[tuple[object, ...]] = set()
    for c, chain in enumerate(listener.filter_chains):
        match = chain.filter_chain_match
        for n, name in enumerate(match.server_names):
            if "*" in name and not name.startswith("*."):
                place = f"filter_chains[{c}].filter_chain_match.server_names[{n}]"
                text = 'partial wildcards are not supported in "server_names"'
                found.append((place, "envoy.listener: whole-label wildcard server names", text))
        for key in _match_keys(match):
            if key in seen:
                text = "multiple filter chains with overlapping matching rules are defined"
                found.append(
                    (f"filter_chains[{c}].filter_chain_match", "envoy.listener: distinct matches", text)
                )
                break
            seen.add(key)
    return found


def cidr_range(cidr: Any, scope: Scope) -> Iterable[Finding]:
    """A CIDR range's prefix is an IP address (Envoy clamps the length, so only the address matters)."""
    if not cidr.address_prefix or pgv.is_ip(cidr.address_prefix):
        return ()
    text = f"Failed to create CIDR range: malformed IP address: {cidr.address_prefix}"
    return (("address_prefix", "envoy.address: IP literal", text),)


# -- TLS --------------------------------------------------------------------------------------------


def _inline(source: Any) -> bytes | None:
    kind = source.WhichOneof("specifier")
    if kind == "inline_bytes":
        return bytes(source.inline_bytes)
    if kind == "inline_string":
        return str(source.inline_string).encode()
    return None  # a file or an environment variable: only Envoy's host can read it


def _public_der(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return bytes(
        key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def tls_certificate(cert: Any, scope: Scope) -> Iterator[Finding]:
    """The leaf's key type and size, the private key, and that the two belong together."""
    chain = _inline(cert.certificate_chain) if cert.HasField("certificate_chain") else None
    if chain is None:
        return
    from cryptography import x509  # noqa: PLC0415
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415

    try:
        leaf = x509.load_pem_x509_certificates(chain)[0]
        leaf_key = leaf.public_key()
    except (ValueError, UnsupportedAlgorithm):
        yield "certificate_chain", "envoy.tls: certificate chain parses", "Failed to load certificate chain"
        return
    yield from _key_type("certificate_chain", leaf_key)
    key_pem = _inline(cert.private_key) if cert.HasField("private_key") else None
    if key_pem is None:
        return
    password = _inline(cert.password) if cert.HasField("password") else None
    private = _private_key(key_pem, password)
    if private is None:
        yield "private_key", "envoy.tls: private key parses", "Failed to load private key"
        return
    if _public_der(private.public_key()) != _public_der(leaf_key):
        yield (
            "private_key",
            "envoy.tls: private key matches certificate",
            "private key does not match the certificate (KEY_VALUES_MISMATCH)",
        )


def _private_key(pem: bytes, password: bytes | None) -> Any:
    """The key, or None when it does not load (a password given for a clear key is tried without)."""
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    for attempt in (password, None) if password else (None,):
        try:
            return serialization.load_pem_private_key(pem, attempt, unsafe_skip_rsa_key_validation=True)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            continue
    return None


def _key_type(path: str, key: Any) -> Iterator[Finding]:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415

    if isinstance(key, rsa.RSAPublicKey) and key.key_size < _RSA_MIN_BITS:
        text = (
            "only RSA certificates with 2048-bit or larger keys are supported"
            f" (this key has {key.key_size} bits)"
        )
        yield path, "envoy.tls: RSA key >= 2048 bits", text
    elif isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name not in _CURVES:
        text = f"only P-256, P-384 or P-521 ECDSA certificates are supported (not {key.curve.name})"
        yield path, "envoy.tls: ECDSA curve P-256, P-384 or P-521", text


def trusted_ca(context: Any, scope: Scope) -> Iterator[Finding]:
    pem = _inline(context.trusted_ca) if context.HasField("trusted_ca") else None
    if pem is None:
        return
    from cryptography import x509  # noqa: PLC0415

    try:
        x509.load_pem_x509_certificates(pem)
    except ValueError:
        yield "trusted_ca", "envoy.tls: trusted CA parses", "Failed to load trusted CA certificates"


def crl(context: Any, scope: Scope) -> Iterator[Finding]:
    """CRLs come with the CA they are checked against (text that holds no CRL Envoy ignores)."""
    if context.HasField("crl") and not context.HasField("trusted_ca"):
        text = "Failed to load CRL from <inline> without trusted CA"
        yield "crl", "envoy.tls: CRL needs a trusted CA", text


_ROUTE = "envoy.config.route.v3."
_TLS = "envoy.extensions.transport_sockets.tls.v3."

ENVOY_RULES: dict[str, tuple[SemanticRule, ...]] = {
    "envoy.config.listener.v3.Listener": (filter_chain_matches,),
    "google.protobuf.Duration": (duration_range,),
    _ROUTE + "DirectResponseAction": (direct_response_body,),
    _ROUTE + "RouteConfiguration": (removed_headers, unique_domains),
    _ROUTE + "WeightedCluster": (weighted_cluster_total,),
    _ROUTE + "RouteAction": (one_path_rewrite,),
    _ROUTE + "VirtualHost": (removed_headers,),
    _ROUTE + "Route": (removed_headers,),
    _ROUTE + "WeightedCluster.ClusterWeight": (removed_headers,),
    "envoy.config.core.v3.HeaderValueOption": (header_value_option,),
    "envoy.type.matcher.v3.RegexMatcher": (regex_matcher,),
    "envoy.config.core.v3.SocketAddress": (socket_address,),
    "envoy.config.core.v3.CidrRange": (cidr_range,),
    _TLS + "TlsCertificate": (tls_certificate,),
    _TLS + "CertificateValidationContext": (trusted_ca, crl),
}

# The fields a rule reads, for rules that find nothing in a message where none of them is set: a
# check of messages whose set fields are known (validate.parts_pass_check: most routes) skips them.
RULE_FIELDS: dict[SemanticRule, frozenset[str]] = {
    removed_headers: frozenset({"request_headers_to_remove", "response_headers_to_remove"}),
}

ENVOY_SCOPES: dict[str, ScopeRule] = {
    _ROUTE + "RouteConfiguration": route_configuration_scope,
    "envoy.config.cluster.v3.Cluster": cluster_scope,
}
