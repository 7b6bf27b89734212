"""Client certificate validation on a secure virtual host (DownstreamValidation): the SNI chain's
DownstreamTlsContext, its connection manager's x-forwarded-client-cert settings, the fallback
chain that never serves such a host, and the CA / CRL Secret lookups."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from envoy.config.listener.v3 import listener_components_pb2 as listener_components
from envoy.config.listener.v3 import listener_pb2 as listener_v3
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm
from envoy.extensions.transport_sockets.tls.v3 import common_pb2 as tls_common
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2 as tls

from cpx.builtin.filters import with_builtin_filters
from cpx.config import Config
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import (
    ClientCertificateDetails,
    Cluster,
    DownstreamValidation,
    PathKind,
    PathMatch,
    Route,
    Secret,
    ServicePort,
)
from cpx.objects import ObjectKey
from cpx.sources.cache import DelegationNotPermittedError, SourceCache
from cpx.sources.secrets import SecretError, validate_ca_secret, validate_crl_secret
from cpx.testing.tls import default_ca, issue_cert, make_ca_secret, make_crl, make_crl_secret
from cpx.xds.caches.listeners import ListenerCache
from cpx.xds.caches.routes import FALLBACK_ROUTE_CONFIG, RouteCache
from cpx.xds.caches.secrets import SecretCache

HTTPS = "ingress_https"
SECRET = Secret(namespace="default", name="tls", cert_pem=b"cert", key_pem=b"key")
FALLBACK = Secret(namespace="default", name="fallback", cert_pem=b"fb-cert", key_pem=b"fb-key")
CA = Secret(namespace="default", name="ca", ca_pem=default_ca().cert_pem)
CRL = Secret(namespace="default", name="crl", crl_pem=b"crl-pem")
VERIFY = tls_common.CertificateValidationContext.VERIFY_TRUST_CHAIN
ACCEPT_UNTRUSTED = tls_common.CertificateValidationContext.ACCEPT_UNTRUSTED


def _dag(**hosts: DownstreamValidation | None) -> DAG:
    """One secure host per keyword (``a_com`` is a.com) with that validation (and a fallback
    certificate: a host with client validation must not be reachable through it)."""
    dag = DAG()
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "0.0.0.0", 8443)
    for name, validation in hosts.items():
        vhost = dag.ensure_secure_virtual_host(HTTPS, name.replace("_", "."))
        vhost.secret, vhost.fallback_certificate, vhost.downstream_validation = SECRET, FALLBACK, validation
        backend = Cluster(upstream=ServicePort(namespace="default", name="svc", port=80))
        vhost.add_route(Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), clusters=(backend,)))
    dag.prune()
    return dag


def _chains(dag: DAG) -> dict[str, listener_components.FilterChain]:
    cache = with_builtin_filters(ListenerCache(Config(route_shape="single")))
    cache.on_change(dag)
    listener = listener_v3.Listener.FromString(cache.contents()[HTTPS].body)
    return {c.name or c.filter_chain_match.server_names[0]: c for c in listener.filter_chains}


def _tls(chain: listener_components.FilterChain) -> tls.DownstreamTlsContext:
    context = tls.DownstreamTlsContext()
    assert chain.transport_socket.typed_config.Unpack(context)
    return context


def _manager(chain: listener_components.FilterChain) -> hcm.HttpConnectionManager:
    manager = hcm.HttpConnectionManager()
    assert chain.filters[0].typed_config.Unpack(manager)
    return manager


def test_required_validation_with_ca_and_crl_is_inline_on_the_sni_chain() -> None:
    validation = DownstreamValidation(ca=CA, crl=CRL, crl_only_verify_leaf=True)
    context = _tls(_chains(_dag(a_com=validation))["a.com"])
    checks = context.common_tls_context.validation_context
    assert context.require_client_certificate.value is True
    assert checks.trust_chain_verification == VERIFY
    assert checks.trusted_ca.inline_bytes == CA.ca_pem
    assert checks.crl.inline_bytes == b"crl-pem" and checks.only_verify_leaf_cert_crl
    # The serving certificate stays on SDS.
    assert [s.name for s in context.common_tls_context.tls_certificate_sds_secret_configs]


@pytest.mark.parametrize(
    ("validation", "required", "verification", "has_ca"),
    [
        (DownstreamValidation(ca=CA, optional=True), False, VERIFY, True),
        (DownstreamValidation(skip_verification=True), True, ACCEPT_UNTRUSTED, False),
        (DownstreamValidation(ca=CA, skip_verification=True, optional=True), False, ACCEPT_UNTRUSTED, True),
    ],
    ids=["optional", "skip", "skip-optional-with-ca"],
)
def test_optional_and_skipped_validation(
    validation: DownstreamValidation, required: bool, verification: int, has_ca: bool
) -> None:
    context = _tls(_chains(_dag(a_com=validation))["a.com"])
    checks = context.common_tls_context.validation_context
    assert context.require_client_certificate.value is required
    assert checks.trust_chain_verification == verification
    assert checks.HasField("trusted_ca") is has_ca
    assert not checks.HasField("crl")


def test_forwarded_details_sanitize_and_set_on_that_chain_only() -> None:
    details = ClientCertificateDetails(subject=True, chain=True, uri=True)
    chains = _chains(_dag(a_com=DownstreamValidation(ca=CA, forward_client_certificate=details), b_com=None))
    manager = _manager(chains["a.com"])
    assert manager.forward_client_cert_details == hcm.HttpConnectionManager.SANITIZE_SET
    current = manager.set_current_client_cert_details
    assert (current.subject.value, current.cert, current.chain, current.dns, current.uri) == (
        True,
        False,
        True,
        False,
        True,
    )
    other = _manager(chains["b.com"])
    assert other.forward_client_cert_details == hcm.HttpConnectionManager.SANITIZE
    assert not other.HasField("set_current_client_cert_details")
    assert not _tls(chains["b.com"]).common_tls_context.HasField("validation_context")


def test_without_forwarding_the_header_is_sanitized_as_everywhere() -> None:
    manager = _manager(_chains(_dag(a_com=DownstreamValidation(ca=CA)))["a.com"])
    assert manager.forward_client_cert_details == hcm.HttpConnectionManager.SANITIZE
    assert not manager.HasField("set_current_client_cert_details")


def test_a_host_with_client_validation_is_never_served_through_the_fallback_certificate() -> None:
    dag = _dag(a_com=DownstreamValidation(ca=CA), b_com=None)
    assert "fallback-certificate" in _chains(dag)
    routes = RouteCache(Config(route_shape="single"))
    routes.on_change(dag)
    fallback = routes.contents()[FALLBACK_ROUTE_CONFIG].message()
    assert [v.name for v in fallback.virtual_hosts] == ["b.com"]
    # Only client validation on every fallback host: no fallback chain at all.
    assert "fallback-certificate" not in _chains(_dag(a_com=DownstreamValidation(ca=CA)))


def test_ca_and_crl_stay_out_of_sds() -> None:
    secrets = SecretCache(Config())
    secrets.on_change(_dag(a_com=DownstreamValidation(ca=CA, crl=CRL)))
    assert all("/ca/" not in name and "/crl/" not in name for name in secrets.contents())
    vhost = _dag(a_com=DownstreamValidation(ca=CA, crl=CRL)).listeners[HTTPS].secure_virtual_hosts["a.com"]
    assert vhost.referenced_secrets() == (SECRET, FALLBACK, CA, CRL)


# -- the Secrets ------------------------------------------------------------------------------------


def _with_type(secret: dict[str, Any], secret_type: str) -> dict[str, Any]:
    return {**secret, "type": secret_type}


def test_ca_secret_must_be_tls_or_opaque_with_ca_crt() -> None:
    good = make_ca_secret("default", "ca")
    assert validate_ca_secret(good).ca_pem == default_ca().cert_pem
    assert validate_ca_secret(_with_type(good, "kubernetes.io/tls")).ca_pem
    with pytest.raises(SecretError, match=re.escape("secret type is not 'kubernetes.io/tls' or 'Opaque'")):
        validate_ca_secret(_with_type(good, "kubernetes.io/basic-auth"))
    with pytest.raises(SecretError, match=re.escape("has no ca.crt")):
        validate_ca_secret({**good, "data": {"tls.crt": good["data"]["ca.crt"]}})


def test_crl_secret_holds_pem_crls() -> None:
    crl_pem = make_crl(default_ca(), [issue_cert(["client"], client=True)])
    secret = make_crl_secret("default", "crl", crl_pem + crl_pem)
    assert validate_crl_secret(secret).crl_pem == crl_pem + crl_pem
    with pytest.raises(SecretError, match=re.escape("has no crl.pem")):
        validate_crl_secret(make_ca_secret("default", "crl"))
    with pytest.raises(SecretError, match="holds no X509 CRL"):
        validate_crl_secret(make_crl_secret("default", "crl", default_ca().cert_pem))
    broken = crl_pem.replace(b"\n", b"\nA", 2)
    with pytest.raises(SecretError, match="not a PEM-encoded certificate revocation list"):
        validate_crl_secret({**secret, "data": {"crl.pem": base64.b64encode(broken).decode()}})
    with pytest.raises(SecretError, match="secret type"):
        validate_crl_secret(_with_type(secret, "kubernetes.io/dockerconfigjson"))


def test_lookup_crl_secret_follows_the_access_policy_and_is_invalidated() -> None:
    cache = SourceCache()
    crl_pem = make_crl(default_ca())
    cache.insert(make_crl_secret("default", "crl", crl_pem))
    referrer = ObjectKey("projectcontour.io", "HTTPProxy", "default", "proxy")
    assert cache.lookup_crl_secret("default", "crl", referrer).crl_pem == crl_pem
    cache.insert(make_crl_secret("default", "crl", b"-"))
    with pytest.raises(SecretError):
        cache.lookup_crl_secret("default", "crl", referrer)
    with pytest.raises(DelegationNotPermittedError):
        cache.lookup_crl_secret("other", "crl", referrer)
