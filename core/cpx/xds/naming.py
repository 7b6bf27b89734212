"""Contour's names for xDS resources (``internal/envoy/cluster.go``, ``internal/xds/util.go``)."""

from __future__ import annotations

import functools
import hashlib

from cpx.dag.nodes import Cluster, Secret, UpstreamValidation

MAX_NAME_LENGTH = 60

# The weighted-cluster entry of a route's FailedShare: a cluster that is never served (two
# segments, so no Service cluster's ``namespace/service/port/hash``; cpx's static clusters and the
# plugins' cluster kinds use other names).  Envoy answers the requests it draws with the route's
# cluster_not_found_response_code.  RDS routes naming an absent cluster are valid (Envoy checks
# only inline routes' clusters, and cpx's validation turns that check off for them too), and
# make-before-break (0016) does not wait for it: the gate is the whole CDS set, not the names routes use.
FAILED_SHARE_CLUSTER = "cpx/failed-backends"


def _sha1_10(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()[:10]


def hashname(limit: int, *segments: str) -> str:
    """Join segments with '/', truncating each with a short hash when the result is too long.

    Contour's ``Hashname``: a name within the limit is returned as is; otherwise every segment is
    shortened to an equal share ending in ``-<6 hex sha256>`` so that names stay unique.
    """
    joined = "/".join(segments)
    if len(joined) <= limit or not segments:
        return joined
    share = max((limit - (len(segments) - 1)) // len(segments), 8)
    out = []
    for segment in segments:
        if len(segment) <= share:
            out.append(segment)
            continue
        digest = hashlib.sha256(segment.encode()).hexdigest()[:6]
        out.append(segment[: share - 7] + "-" + digest)
    return "/".join(out)


# Memoised: CDS and every route pointing at a cluster ask for its name (nodes cache their hash).
@functools.lru_cache(maxsize=1 << 16)
def cluster_name(cluster: Cluster) -> str:
    """``namespace/service/port/<hash>``; the hash covers every option that shapes the cluster."""
    up = cluster.upstream
    key = (
        cluster.load_balancer_policy,
        id(cluster.health_check),
        id(cluster.validation),
        up.protocol,
        cluster.sni,
        id(cluster.idle_connection_timeout),
        id(cluster.slow_start),
        up.external_name,
        id(up.circuit_breakers),
    )
    known = _digests.get(key)
    if known is not None:
        digest = known[1]
    else:
        digest = _options_digest(cluster)
        if len(_digests) >= _DIGESTS_LIMIT:
            _digests.clear()
        held = (cluster.health_check, cluster.validation, cluster.idle_connection_timeout, cluster.slow_start)
        _digests[key] = ((*held, up.circuit_breakers), digest)
    return hashname(MAX_NAME_LENGTH, up.namespace, up.name, str(up.port), digest)


# The options' digest, for options that are the very objects of an earlier cluster (most share
# them: the default circuit breakers, no health check).  Objects by identity, not equality: equal
# values of other types (5 and 5.0) would print differently.  The entry holds them, so their ids
# are not reused while it exists.
_digests: dict[tuple[object, ...], tuple[tuple[object, ...], str]] = {}
_DIGESTS_LIMIT = 4096


def _options_digest(cluster: Cluster) -> str:
    up = cluster.upstream
    hc = cluster.health_check
    parts = [
        cluster.load_balancer_policy,
        repr(
            (hc.path, hc.host, hc.interval, hc.timeout, hc.unhealthy_threshold, hc.healthy_threshold, hc.port)
        )
        if hc
        else "",
        _validation_part(cluster.validation),
        up.protocol.value,
        cluster.sni,
        repr(cluster.idle_connection_timeout.seconds) if cluster.idle_connection_timeout else "",
        repr(
            (cluster.slow_start.window, cluster.slow_start.aggression, cluster.slow_start.min_weight_percent)
        )
        if cluster.slow_start
        else "",
        "",  # (was a client certificate: removed options keep their place, so names never change)
        up.external_name or "",
        "2.0",  # (was a per-cluster connect timeout, always 2 s)
        repr(up.circuit_breakers),
    ]
    return _sha1_10("|".join(parts))


def _validation_part(validation: UpstreamValidation | None) -> str:
    """Contour's (the CA and the first DNS name), plus the URI names when there are any (so that
    no other cluster's name changes)."""
    if validation is None:
        return ""
    part = f"{validation.ca.ref}:{validation.subject_names[:1]}"
    if validation.uri_subject_names:
        part += f":{validation.uri_subject_names}"
    return part


def alt_stat_name(cluster: Cluster) -> str:
    up = cluster.upstream
    return f"{up.namespace}_{up.name}_{up.port}"


def secret_name(secret: Secret) -> str:
    """``namespace/name/<10-hex sha1 of the certificate>``: a new certificate is a new resource."""
    return hashname(MAX_NAME_LENGTH, secret.namespace, secret.name, _sha1_10(secret.cert_pem + secret.ca_pem))


def eds_name(cluster: Cluster) -> str:
    return cluster.upstream.eds_name
