"""The SDS cache: one Envoy Secret per DAG secret, named by content."""

from __future__ import annotations

from envoy.extensions.transport_sockets.tls.v3 import secret_pb2 as tls_secret

from cpx.config import Config
from cpx.dag.dag import DAG, Protocol
from cpx.dag.nodes import Cluster, PathKind, PathMatch, Route, Secret, ServicePort
from cpx.xds import resource
from cpx.xds.caches.secrets import SecretCache, envoy_secret
from cpx.xds.naming import secret_name

HTTPS = "ingress_https"
SERVING = Secret(namespace="default", name="tls", cert_pem=b"CERT", key_pem=b"KEY")
OTHER = Secret(namespace="apps", name="tls", cert_pem=b"CERT2", key_pem=b"KEY2")
FALLBACK = Secret(namespace="projectcontour", name="fallback", cert_pem=b"FB", key_pem=b"FBKEY")


def dag_with(*hosts: tuple[str, Secret, Secret | None]) -> DAG:
    dag = DAG()
    dag.ensure_listener(HTTPS, Protocol.HTTPS, "0.0.0.0", 8443)
    cluster = Cluster(upstream=ServicePort(namespace="default", name="svc", port=443))
    for fqdn, secret, fallback in hosts:
        svh = dag.ensure_secure_virtual_host(HTTPS, fqdn)
        svh.secret, svh.fallback_certificate = secret, fallback
        svh.add_route(Route(path=PathMatch(kind=PathKind.PREFIX, value="/"), clusters=(cluster,)))
    return dag


def contents(cache: SecretCache) -> dict[str, tls_secret.Secret]:
    out = {}
    for name, res in cache.contents().items():
        assert res.type_url == resource.SECRET and res.name == name
        out[name] = tls_secret.Secret.FromString(res.body)
    return out


def test_tls_certificate_inline() -> None:
    cache = SecretCache(Config())
    cache.on_change(dag_with(("example.com", SERVING, None)))
    secrets = contents(cache)
    assert list(secrets) == [secret_name(SERVING)]
    secret = secrets[secret_name(SERVING)]
    assert secret.name.startswith("default/tls/")
    assert secret.tls_certificate.certificate_chain.inline_bytes == b"CERT"
    assert secret.tls_certificate.private_key.inline_bytes == b"KEY"


def test_every_used_secret_once_sorted_by_name() -> None:
    cache = SecretCache(Config())
    dag = dag_with(("a.com", SERVING, FALLBACK), ("b.com", OTHER, FALLBACK), ("c.com", SERVING, None))
    cache.on_change(dag)
    names = list(cache.contents())
    assert names == sorted(secret_name(s) for s in (SERVING, OTHER, FALLBACK))


def test_ca_bundle_becomes_validation_context() -> None:
    ca = Secret(namespace="default", name="ca", ca_pem=b"CA")
    secret = envoy_secret(ca)
    assert secret.WhichOneof("type") == "validation_context"
    assert secret.validation_context.trusted_ca.inline_bytes == b"CA"
    assert secret.name == secret_name(ca)


def test_unchanged_secrets_keep_resources_and_rotation_renames() -> None:
    cache = SecretCache(Config())
    cache.on_change(dag_with(("a.com", SERVING, None), ("b.com", OTHER, None)))
    before = dict(cache.contents())
    cache.on_change(dag_with(("a.com", SERVING, None), ("b.com", OTHER, None)))
    assert all(cache.contents()[name] is res for name, res in before.items())
    # A renewed certificate is a new resource name; the old one disappears.
    renewed = Secret(namespace="default", name="tls", cert_pem=b"CERT-NEW", key_pem=b"KEY")
    cache.on_change(dag_with(("a.com", renewed, None), ("b.com", OTHER, None)))
    after = cache.contents()
    assert secret_name(SERVING) not in after and secret_name(renewed) in after
    assert after[secret_name(OTHER)] is before[secret_name(OTHER)]
    cache.on_change(DAG())
    assert cache.contents() == {}
