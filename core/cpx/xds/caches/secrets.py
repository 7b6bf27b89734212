"""The SDS cache: every Secret the DAG uses, named ``namespace/name/<hash>`` (Contour's secret.go).

Listeners and clusters refer to certificates by these names only, so a renewed certificate changes
one Secret (and, since the name hashes the certificate, the one chain that points to it) rather
than carrying key material in LDS or CDS.
"""

from __future__ import annotations

from collections.abc import Mapping

from envoy.extensions.transport_sockets.tls.v3 import secret_pb2 as tls_secret

from cpx.config import Config
from cpx.dag.dag import DAG
from cpx.dag.nodes import Secret
from cpx.records import ClusterKindSpec, ListenerKindSpec
from cpx.xds import resource
from cpx.xds.caches.kinds import KindTranslator, node_secrets
from cpx.xds.contributions import Contributions
from cpx.xds.naming import secret_name
from cpx.xds.resource import Resource


def envoy_secret(secret: Secret) -> tls_secret.Secret:
    """A key pair becomes a ``tls_certificate``; a CA bundle alone a ``validation_context``."""
    out = tls_secret.Secret(name=secret_name(secret))
    if secret.cert_pem:
        out.tls_certificate.certificate_chain.inline_bytes = secret.cert_pem
        out.tls_certificate.private_key.inline_bytes = secret.key_pem
    else:
        out.validation_context.trusted_ca.inline_bytes = secret.ca_pem
    return out


class SecretCache:
    type_url = resource.SECRET

    def __init__(self, config: Config) -> None:
        self.config = config
        self._by_secret: dict[Secret, Resource] = {}
        self._resources: dict[str, Resource] = {}
        # Plugins' kinds: which Secrets their own listener and cluster nodes reference.
        self._listener_kinds: KindTranslator[ListenerKindSpec] = KindTranslator(resource.LISTENER)
        self._cluster_kinds: KindTranslator[ClusterKindSpec] = KindTranslator(resource.CLUSTER)

    def bind_contributions(self, contributions: Contributions) -> None:
        self._listener_kinds.bind(contributions.listener_kinds)
        self._cluster_kinds.bind(contributions.cluster_kinds)

    def contents(self) -> Mapping[str, Resource]:
        return self._resources

    def on_change(self, dag: DAG) -> None:
        secrets = dag.secrets()
        if dag.listener_nodes() or dag.cluster_nodes():
            secrets |= node_secrets(
                self._listener_kinds, dag.listener_nodes(), self._cluster_kinds, dag.cluster_nodes()
            )
        previous, self._by_secret = self._by_secret, {}
        for secret in secrets:
            found = previous.get(secret)
            if found is None:
                found = Resource.from_message(secret_name(secret), self.type_url, envoy_secret(secret))
            self._by_secret[secret] = found
        self._resources = {r.name: r for r in sorted(self._by_secret.values(), key=lambda r: r.name)}
