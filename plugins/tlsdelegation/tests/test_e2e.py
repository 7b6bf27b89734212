"""TLS certificate delegation end to end: `cpx serve` (standalone) + a real Envoy + an echo backend.

Contour's documented examples (tls-delegation.md: HTTPProxy and the Ingress v1 annotation;
tls-termination.md: the fallback certificate) serve HTTPS through Envoy with the delegated
certificate; removing the delegation's manifest stops it at the next build.  Requests present SNI
(or none, for the fallback certificate) to Envoy's HTTPS listener on 127.0.0.1.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from cpx.testing import (
    CpxProcess,
    EchoServer,
    EnvoyProcess,
    Response,
    backend,
    cpx_with_envoy,
    envoy_binary,
    eventually,
    http_get,
    https_get,
    make_tls_secret,
    write_manifest,
)

from cpx_tlsdelegation.testing import delegation, docs_delegation, ingress, proxy

pytestmark = pytest.mark.e2e

FALLBACK = "www-admin/fallback-secret-name"
NAMESPACES = ("example-com", "defaultub")


@attrs.define
class Stack:
    cpx: CpxProcess
    envoy: EnvoyProcess
    manifests: Path
    ca_pem: str

    def apply(self, name: str, objects: list[dict[str, Any]]) -> None:
        write_manifest(self.manifests, name, objects)

    def remove(self, name: str) -> None:
        (self.manifests / name).unlink()

    def https(self, host: str | None, host_header: str | None = None) -> Response:
        url = f"https://127.0.0.1:{self.cpx.https_port}/"
        return https_get(url, host, self.ca_pem, host_header=host_header, timeout=2.0)

    def http(self, host: str) -> Response:
        return http_get(f"http://127.0.0.1:{self.cpx.http_port}/", host_header=host, timeout=2.0)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp("tlsdelegation-e2e")
    manifests = workdir / "manifests"
    wildcard, ca_pem = make_tls_secret("www-admin", "example-com-wildcard", ["*.bar.com"])
    fallback, _ = make_tls_secret("www-admin", "fallback-secret-name", ["fallback.invalid"])
    own, _ = make_tls_secret("defaultub", "testsecret", ["fallback.bar.com"])
    with EchoServer("s1") as echo:
        objects = [wildcard, fallback, own]
        for namespace in NAMESPACES:
            objects += backend("s1", echo.port, namespace=namespace)
        write_manifest(manifests, "base.yaml", objects)
        with cpx_with_envoy(manifests, workdir, plugins=["ingress", "httpproxy", "tlsdelegation"]) as (
            cpx,
            envoy,
        ):
            envoy.wait_ready()
            yield Stack(cpx, envoy, manifests, ca_pem)


@pytest.fixture(scope="module")
def fallback_stack(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Iterator[Stack]:
    """A second cpx on the same manifests, with Contour's fallback certificate configured."""
    workdir = tmp_path_factory.mktemp("tlsdelegation-fallback")
    cpx = CpxProcess(
        stack.manifests,
        workdir=workdir,
        plugins=["httpproxy", "tlsdelegation"],
        extra_args=["--fallback-certificate", FALLBACK],
    )
    envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=workdir / "envoy")
    try:
        cpx.start()
        envoy.start()
        envoy.wait_ready()
        yield Stack(cpx, envoy, stack.manifests, stack.ca_pem)
    finally:
        envoy.stop()
        try:
            if cpx.running:
                cpx.stop()
        finally:
            cpx.kill()


def refused(call: Any) -> None:
    """The request fails: no filter chain for the SNI (Envoy closes the connection) or a 404."""
    try:
        response = call()
    except (OSError, ssl.SSLError):
        return
    assert response.status != 200, response.status


def test_the_documented_httpproxy_serves_https_until_the_delegation_goes(stack: Stack) -> None:
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    stack.apply("www.yaml", [www])
    stack.apply("delegation.yaml", [docs_delegation()])
    response = eventually(lambda: _ok(stack.https("foo2.bar.com")), timeout=15)
    assert response.peer_dns_names() == ["*.bar.com"]
    stack.remove("delegation.yaml")
    eventually(lambda: refused(lambda: stack.https("foo2.bar.com")), timeout=15)
    stack.apply("delegation.yaml", [docs_delegation()])
    eventually(lambda: _ok(stack.https("foo2.bar.com")), timeout=15)
    stack.remove("www.yaml")


def test_the_documented_ingress_with_the_annotation_serves_https(stack: Stack) -> None:
    web = ingress("example-com", "web", "web.bar.com", "example-com-wildcard", cert_namespace="www-admin")
    stack.apply("web.yaml", [web])
    stack.apply("delegation.yaml", [docs_delegation()])
    eventually(lambda: _ok(stack.https("web.bar.com")), timeout=15)
    stack.remove("delegation.yaml")
    eventually(lambda: refused(lambda: stack.https("web.bar.com")), timeout=15)
    assert stack.http("web.bar.com").status == 200  # the Ingress is still served, over HTTP only
    stack.remove("web.yaml")


def test_the_documented_fallback_certificate_serves_clients_without_sni(fallback_stack: Stack) -> None:
    tls = {"secretName": "testsecret", "enableFallbackCertificate": True}
    fallback_proxy = proxy("defaultub", "fallback-tls-example", "fallback.bar.com", tls)
    recipe = delegation("www-admin", "fallback-delegation", ("fallback-secret-name", ["*"]))
    fallback_stack.apply("fallback.yaml", [fallback_proxy, recipe])
    response = eventually(lambda: _ok(fallback_stack.https(None, "fallback.bar.com")), timeout=15)
    assert response.peer_dns_names() == ["fallback.invalid"]  # the fallback certificate
    assert _ok(fallback_stack.https("fallback.bar.com")).peer_dns_names() == ["fallback.bar.com"]
    fallback_stack.apply("fallback.yaml", [fallback_proxy])  # the delegation removed
    eventually(lambda: refused(lambda: fallback_stack.https(None, "fallback.bar.com")), timeout=15)
    fallback_stack.remove("fallback.yaml")


def _ok(response: Response) -> Response:
    assert response.status == 200, response.status
    return response
