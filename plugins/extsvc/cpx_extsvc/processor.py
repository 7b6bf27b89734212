"""ExtensionServices into clusters and published upstreams (Contour's ``extension_processor.go``).

Each ExtensionService is checked the way Contour checks it, with Contour's status reasons; a valid
one becomes an ``extension/<namespace>/<name>`` cluster.  Every one, valid or not, is published in
the DAG registry :data:`cpx.dag.EXTENSION_UPSTREAMS` with what it read, so that referrers
(HTTPProxy authorization, rate limiting) learn its cluster, protocol and response timeout, and are
re-processed when it or a Service or Secret it uses changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from cpx import (
    Config,
    DelegationNotPermittedError,
    DetailedStatus,
    DurationError,
    NotFoundError,
    ObjectKey,
    SecretError,
    ServicePortError,
    SourceView,
    blame,
    go_quote,
    lookup_service_port,
    parse_timeout,
)
from cpx.dag import (
    DAG,
    EXTENSION_UPSTREAMS,
    CircuitBreakers,
    Duration,
    ExtensionUpstream,
    ServicePort,
    UpstreamValidation,
)

from cpx_extsvc import status
from cpx_extsvc.cluster import ExtensionCluster, cluster_name
from cpx_extsvc.kinds import EXTENSION_SERVICE

SPEC_ERROR = "SpecError"
TLS_ERROR = "TLSError"
SERVICE_ERROR = "ServiceError"
_UNSUPPORTED_LB = ("Cookie", "RequestHash")
_CIRCUIT_BREAKER_FIELDS = {
    "maxConnections": "max_connections",
    "maxPendingRequests": "max_pending_requests",
    "maxRequests": "max_requests",
    "maxRetries": "max_retries",
    "perHostMaxConnections": "per_host_max_connections",
}


@attrs.frozen
class Built:
    """One ExtensionService's translation: its cluster (None when refused) and what referrers see."""

    cluster: ExtensionCluster | None
    upstream: ExtensionUpstream
    conditions: DetailedStatus


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _timeouts(spec: Mapping[str, Any], conditions: DetailedStatus) -> tuple[Duration | None, Duration | None]:
    """Contour's timeoutPolicy(): the response and idle connection timeouts (None: Envoy's default)."""
    policy = _mapping(spec.get("timeoutPolicy"))
    parsed: dict[str, Duration | None] = {}
    for field, what in (("response", "response"), ("idle", "idle"), ("idleConnection", "idle connection")):
        try:
            parsed[field] = parse_timeout(str(policy.get(field) or ""))
        except DurationError as err:
            conditions.add_error(
                SPEC_ERROR,
                "TimeoutPolicyNotValid",
                f"spec.timeoutPolicy failed to parse: error parsing {what} timeout: {err}",
            )
            return None, None
    if policy.get("idle"):
        # ext_authz and ratelimit have a request timeout only.
        conditions.add_warning(
            SPEC_ERROR,
            "IgnoredField",
            'ignoring field ".Spec.TimeoutPolicy.Idle"; '
            "idle timeouts are not supported for ExtensionClusters",
        )
    return parsed["response"], parsed["idleConnection"]


def _load_balancer_policy(spec: Mapping[str, Any], conditions: DetailedStatus) -> str:
    strategy = _mapping(spec.get("loadBalancerPolicy")).get("strategy")
    if strategy in _UNSUPPORTED_LB:
        conditions.add_warning(
            SPEC_ERROR,
            "IgnoredField",
            f'ignoring field ".Spec.LoadBalancerPolicy"; {strategy} load balancer policy is not '
            "supported for ExtensionClusters",
        )
        return ""
    return strategy if strategy in ("WeightedLeastRequest", "Random", "RoundRobin") else ""


def _circuit_breakers(spec: Mapping[str, Any]) -> CircuitBreakers:
    policy = _mapping(spec.get("circuitBreakerPolicy"))
    values = {
        attr: policy[field]
        for field, attr in _CIRCUIT_BREAKER_FIELDS.items()
        if isinstance(policy.get(field), int)
    }
    return CircuitBreakers(**values)


def _validation(
    spec: Mapping[str, Any], key: ObjectKey, source: SourceView, conditions: DetailedStatus
) -> UpstreamValidation | None:
    """Contour's LookupUpstreamValidation for ``spec.validation``; records the error and returns
    None when it fails (the caller then refuses the whole ExtensionService)."""
    validation = _mapping(spec.get("validation"))
    ca_ref = str(validation.get("caSecret") or "")
    namespace, _, name = ca_ref.rpartition("/")
    namespace = namespace or key.namespace
    shown = go_quote(f"{namespace}/{name}")
    try:
        ca = source.lookup_ca_secret(namespace, name, key)
    except DelegationNotPermittedError:
        conditions.add_error(
            TLS_ERROR,
            "CACertificateNotDelegated",
            f"service.UpstreamValidation.CACertificate Secret {shown} is not configured for certificate "
            "delegation",
        )
        return None
    except SecretError as err:
        return _invalid_validation(conditions, f"invalid CA Secret {shown}: {err}")
    subject_name = str(validation.get("subjectName") or "")
    subject_names = [str(n) for n in validation.get("subjectNames") or ()]
    if not subject_name:
        return _invalid_validation(conditions, "missing subject alternative name")
    if subject_names and subject_names[0] != subject_name:
        return _invalid_validation(
            conditions,
            f"first entry of SubjectNames ({subject_names[0]}) does not match SubjectName ({subject_name})",
        )
    return UpstreamValidation(ca=ca, subject_names=tuple(subject_names or [subject_name]))


def _invalid_validation(conditions: DetailedStatus, problem: str) -> UpstreamValidation | None:
    """Record a TLSUpstreamValidation error; no validation (the caller refuses the object)."""
    message = f"TLS upstream validation policy error: {problem}"
    conditions.add_error(SPEC_ERROR, "TLSUpstreamValidation", message)
    return None


def _upstreams(
    spec: Mapping[str, Any], key: ObjectKey, source: SourceView, conditions: DetailedStatus
) -> tuple[tuple[ServicePort, ...], tuple[int, ...]]:
    """The services (same namespace only: a cross-namespace reference would subvert the
    installation), each with its weight."""
    ports: list[ServicePort] = []
    weights: list[int] = []
    for item in spec.get("services") or ():
        target = _mapping(item)
        name = str(target.get("name") or "")
        shown = go_quote(f"{key.namespace}/{name}")
        try:
            service = source.lookup_service(key.namespace, name)
            external = bool(_mapping(service.get("spec")).get("externalName"))
            port = None if external else lookup_service_port(source, key.namespace, name, int(target["port"]))
        except (NotFoundError, ServicePortError) as err:
            conditions.add_error(
                SERVICE_ERROR, "ServiceUnresolvedReference", f"unresolved service {shown}: {err}"
            )
            continue
        if port is None:
            conditions.add_error(
                SERVICE_ERROR,
                "UnsupportedServiceType",
                f'Service {shown} is of unsupported type "ExternalName".',
            )
            continue
        ports.append(port)
        weight = target.get("weight")
        weights.append(weight if isinstance(weight, int) and not isinstance(weight, bool) else 0)
    return tuple(ports), tuple(weights)


def build(obj: Mapping[str, Any], key: ObjectKey, source: SourceView) -> Built:
    """Contour's buildExtensionService, in its order of checks."""
    spec = _mapping(obj.get("spec"))
    conditions = status.for_object(obj)
    response, idle_connection = _timeouts(spec, conditions)
    lb_policy = _load_balancer_policy(spec, conditions)
    protocol = str(spec.get("protocol") or "h2")
    name = cluster_name(key)
    validation, sni = None, ""
    refused = False
    if spec.get("validation") is not None:
        validation = _validation(spec, key, source, conditions)
        refused = validation is None
        if validation is not None:
            sni = validation.subject_names[0]
            if protocol != "h2":
                conditions.add_error(
                    SPEC_ERROR,
                    "InconsistentProtocol",
                    f"upstream TLS validation not supported for {go_quote(protocol)} protocol",
                )
    ports, weights = ((), ()) if refused else _upstreams(spec, key, source, conditions)
    valid = conditions.valid
    upstream = ExtensionUpstream(
        cluster_name=name, valid=valid, protocol=protocol, sni=sni, response_timeout=response
    )
    cluster = None
    if valid:
        cluster = ExtensionCluster(
            name=name,
            origin=key,
            upstreams=ports,
            weights=weights,
            protocol=protocol,
            validation=validation,
            sni=sni,
            load_balancer_policy=lb_policy,
            idle_connection_timeout=idle_connection,
            circuit_breakers=_circuit_breakers(spec),
        )
    return Built(cluster=cluster, upstream=upstream, conditions=conditions)


@attrs.define
class ExtensionServiceProcessor:
    config: Config

    def run(self, dag: DAG, source: SourceView) -> None:
        for obj in source.list(EXTENSION_SERVICE):
            key = ObjectKey.of(obj)
            with blame(key), source.recording() as reads:
                source.get(key)  # referrers depend on the object itself too
                built = build(obj, key, source)
            if built.cluster is not None:
                dag.add_cluster_node(built.cluster)
            dag.registries.publish(EXTENSION_UPSTREAMS, key, built.upstream, reads=reads)
            for note in built.conditions.notes():
                dag.add_note(key, note)
            dag.set_status(key, status.render(built.conditions, obj))
