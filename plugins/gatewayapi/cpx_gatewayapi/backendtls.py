"""BackendTLSPolicy: TLS from Envoy to the Services it targets, verified against its CA.

Every policy is read once per source revision (:func:`policies`).  The route side asks, for each
backend cluster it builds, which policy applies (:func:`apply`): the one naming the Service port
(``sectionName`` = the port's name) beats the one naming the whole Service; among policies naming
the same target the oldest, then ``namespace/name``, wins and the others are ``Conflicted``.

A policy whose CA cannot be used (missing or malformed ConfigMap ``ca.crt``, a CA kind other than
ConfigMap or Secret, ``wellKnownCACertificates``) still takes its target: the cluster gets weight 0,
so the rule answers 500 for its share, and never talks plaintext (or unverified TLS) to a backend
that asked for verified TLS.

The status processor (:class:`BackendTLSStatusProcessor`, after the routes) writes
``status.ancestors[]``: one entry per Gateway a route using a targeted backend is accepted by.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from cpx import ObjectKey, SourceView
from cpx.dag import Cluster, Secret, UpstreamProtocol, UpstreamValidation

from cpx_gatewayapi.cabundles import CAProblem, ca_bundle, ref_kind
from cpx_gatewayapi.kinds import BACKEND_TLS_POLICY, CONFIG_MAP

# Condition reasons (apis/v1/policy_types.go, backendtlspolicy_types.go).
ACCEPTED = "Accepted"
CONFLICTED = "Conflicted"
INVALID = "Invalid"
NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
RESOLVED_REFS = "ResolvedRefs"
INVALID_KIND = "InvalidKind"

_TLS_PROTOCOLS = {UpstreamProtocol.H2C: UpstreamProtocol.H2, UpstreamProtocol.H2: UpstreamProtocol.H2}

Target = tuple[str, str, str]  # namespace, Service name, sectionName ("" = the whole Service)


@attrs.frozen
class Outcome:
    ok: bool
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class Policy:
    key: ObjectKey
    generation: int
    targets: tuple[Target, ...]
    accepted: Outcome
    resolved_refs: Outcome
    validation: UpstreamValidation | None  # None: no usable CA (the target answers 5xx)
    sni: str
    reads: tuple[ObjectKey, ...] = ()  # the policy and its CA objects: what a backend using it read


@attrs.frozen
class Policies:
    """Every policy, and for each target the policies naming it, winner first."""

    all: tuple[Policy, ...] = ()
    by_target: Mapping[Target, tuple[Policy, ...]] = attrs.field(factory=dict)
    config_maps: frozenset[tuple[str, str]] = frozenset()  # (namespace, name) the policies read

    def winner(self, namespace: str, service: str, port_name: str) -> Policy | None:
        for section in (port_name, "") if port_name else ("",):
            found = self.by_target.get((namespace, service, section))
            if found:
                return found[0]
        return None

    def naming(self, namespace: str, service: str, port_name: str) -> Iterator[Policy]:
        """Every policy naming the Service, or its port ``port_name``."""
        for section in (port_name, "") if port_name else ("",):
            yield from self.by_target.get((namespace, service, section), ())


NO_POLICIES = Policies()
_memo: weakref.WeakKeyDictionary[SourceView, tuple[int, Policies]] = weakref.WeakKeyDictionary()


def policies(source: SourceView) -> Policies:
    """The policies of the source as it is now (computed once per revision)."""
    if not source.count(BACKEND_TLS_POLICY):
        return NO_POLICIES
    cached = _memo.get(source)
    if cached is not None and cached[0] == source.revision:
        return cached[1]
    found = _read(source)
    _memo[source] = (source.revision, found)
    return found


def apply(source: SourceView, cluster: Cluster) -> Cluster:
    """``cluster`` as the policy for its Service port wants it (unchanged without one)."""
    found = policies(source)
    if found is NO_POLICIES:
        return cluster
    up = cluster.upstream
    policy = found.winner(up.namespace, up.name, up.port_name)
    if policy is None:
        return cluster
    for key in policy.reads:
        source.get(key)  # recorded: this backend depends on the policy and its CA (memoised reads are not)
    if policy.validation is None:
        return attrs.evolve(cluster, weight=0)
    protocol = _TLS_PROTOCOLS.get(up.protocol, UpstreamProtocol.TLS)
    return attrs.evolve(
        cluster,
        upstream=attrs.evolve(up, protocol=protocol),
        validation=policy.validation,
        sni=policy.sni,
    )


def _read(source: SourceView) -> Policies:
    objects = list(source.list(BACKEND_TLS_POLICY))
    read = sorted(_policy(source, obj) for obj in objects)  # oldest, then namespace/name, first
    by_target: dict[Target, list[Policy]] = {}
    for _, policy in read:
        for target in policy.targets:
            by_target.setdefault(target, []).append(policy)
    losers = {p.key for ps in by_target.values() for p in ps[1:]}
    final = {p.key: _conflicted(p) if p.key in losers and p.accepted.ok else p for _, p in read}
    config_maps = frozenset(
        (key.namespace, key.name)
        for _, policy in read
        for key in policy.reads
        if (key.group, key.kind) == (CONFIG_MAP.group, CONFIG_MAP.kind)
    )
    return Policies(
        all=tuple(final.values()),
        by_target={t: tuple(final[p.key] for p in ps) for t, ps in by_target.items()},
        config_maps=config_maps,
    )


def _conflicted(policy: Policy) -> Policy:
    message = "another BackendTLSPolicy, older or first by namespace/name, targets the same Service port"
    return attrs.evolve(policy, accepted=Outcome(False, CONFLICTED, message))


def _policy(source: SourceView, obj: Mapping[str, Any]) -> tuple[tuple[str, str, str], Policy]:
    """The policy, with its precedence (older first, then namespace/name)."""
    key = ObjectKey.of(obj)
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    validation = spec.get("validation") or {}
    generation = meta.get("generation")
    targets = tuple(
        (key.namespace, str(ref.get("name") or ""), str(ref.get("sectionName") or ""))
        for ref in spec.get("targetRefs") or ()
        if isinstance(ref, Mapping) and ref_kind(ref) == ("", "Service")
    )
    hostname = str(validation.get("hostname") or "")
    ca, accepted, resolved = _ca(source, key, obj, validation)
    uvalidation = None
    if ca is not None:
        dns, uris = _subject_alt_names(validation, hostname)
        uvalidation = UpstreamValidation(ca=ca, subject_names=dns, uri_subject_names=uris)
    if not targets and accepted.ok:
        accepted = Outcome(False, INVALID, "targetRefs name no core Service")
    policy = Policy(
        key=key,
        generation=generation if isinstance(generation, int) else 0,
        targets=targets,
        accepted=accepted,
        resolved_refs=resolved,
        validation=uvalidation if accepted.ok else None,
        sni=hostname,
        reads=(key, *(_ca_key(key.namespace, ref) for ref in _ca_refs(obj))),
    )
    order = (str(meta.get("creationTimestamp") or ""), key.namespace, key.name)
    return order, policy


def _subject_alt_names(
    validation: Mapping[str, Any], hostname: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names verified: the listed subjectAltNames, else the hostname."""
    sans = [s for s in validation.get("subjectAltNames") or () if isinstance(s, Mapping)]
    if not sans:
        return (hostname,), ()
    dns = tuple(str(s.get("hostname")) for s in sans if s.get("type") == "Hostname" and s.get("hostname"))
    uris = tuple(str(s.get("uri")) for s in sans if s.get("type") == "URI" and s.get("uri"))
    return dns, uris


def _ca(
    source: SourceView, key: ObjectKey, obj: Mapping[str, Any], validation: Mapping[str, Any]
) -> tuple[Secret | None, Outcome, Outcome]:
    """The CA bundle of every usable caCertificateRef, and the Accepted and ResolvedRefs outcomes."""
    resolved_ok = Outcome(True, RESOLVED_REFS, "CA certificate references resolved")
    if validation.get("wellKnownCACertificates"):
        message = f"wellKnownCACertificates {validation['wellKnownCACertificates']} is not supported"
        return None, Outcome(False, INVALID, message), resolved_ok
    refs = _ca_refs(obj)
    bundles: list[bytes] = []
    problem: Outcome | None = None
    for ref in refs:
        try:
            bundles.append(ca_bundle(source, key.namespace, ref, key, kind_reason=INVALID_KIND))
        except CAProblem as err:
            problem = problem or Outcome(False, err.reason, err.message)
    resolved = problem or resolved_ok
    if not bundles:
        message = problem.message if problem else "no caCertificateRefs"
        return None, Outcome(False, NO_VALID_CA_CERTIFICATE, message), resolved
    names = "+".join(str(ref.get("name") or "") for ref in refs)
    ca = Secret(namespace=key.namespace, name=f"{key.name}/{names}", ca_pem=b"".join(bundles))
    return ca, Outcome(True, ACCEPTED, "Accepted"), resolved


def _ca_refs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    validation = (obj.get("spec") or {}).get("validation") or {}
    return [ref for ref in validation.get("caCertificateRefs") or () if isinstance(ref, Mapping)]


def _ca_key(namespace: str, ref: Mapping[str, Any]) -> ObjectKey:
    group, kind = ref_kind(ref)
    return ObjectKey(group, kind, namespace, str(ref.get("name") or ""))


def references_config_map(obj: Mapping[str, Any], source: SourceView) -> bool:
    """``WatchSpec.triggers_rebuild`` of ConfigMaps: only those a policy names matter."""
    key = ObjectKey.of(obj)
    return (key.namespace, key.name) in policies(source).config_maps
