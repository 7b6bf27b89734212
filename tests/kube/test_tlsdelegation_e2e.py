"""TLS certificate delegation in Kubernetes mode: ``cpx serve --kubeconfig`` against the emulated API
server, with a real Envoy and a real echo backend.

Contour's documented example (tls-delegation.md) serves HTTPS once the TLSCertificateDelegation is
created through the API; deleting it stops the HTTPS virtual host and the HTTPProxy's status (written
through the status subresource) says why; cpx never writes the delegation's status, as Contour.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cpx_tlsdelegation.kinds import TLS_CERTIFICATE_DELEGATION
from cpx_tlsdelegation.testing import docs_delegation, proxy

from cpx import objects as k8s
from cpx.testing import EchoServer, EnvoyProcess, envoy_binary, https_get, make_tls_secret
from cpx.testing.cpxproc import CpxProcess, backend
from cpx.testing.kubeapi import KubeAPI

pytestmark = pytest.mark.e2e

HTTPPROXY = k8s.GroupVersionKind(
    group="projectcontour.io", version="v1", kind="HTTPProxy", plural="httpproxies"
)
KINDS = (k8s.SERVICE, k8s.ENDPOINT_SLICE, k8s.SECRET, k8s.NAMESPACE, HTTPPROXY, TLS_CERTIFICATE_DELEGATION)
WWW = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})


def wait_until(check: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.05)


def test_a_delegation_created_and_deleted_through_the_api(tmp_path: Path) -> None:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    wildcard, ca_pem = make_tls_secret("www-admin", "example-com-wildcard", ["*.bar.com"])
    with EchoServer("s1") as echo:
        api = KubeAPI(
            kinds=KINDS, objects=[wildcard, *backend("s1", echo.port, namespace="example-com"), WWW]
        )
        api.start()
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        plugins = ["httpproxy", "tlsdelegation"]
        cpx = CpxProcess([], tmp_path, plugins=plugins, extra_args=["--kubeconfig", str(kubeconfig)])
        envoy = EnvoyProcess.with_xds(cpx.xds_port, workdir=tmp_path / "envoy")
        try:
            cpx.start()
            envoy.start()
            envoy.wait_ready()

            def serves() -> bool:
                url = f"https://127.0.0.1:{cpx.https_port}/"
                try:
                    return https_get(url, "foo2.bar.com", ca_pem, timeout=2.0).status == 200
                except (OSError, ssl.SSLError):
                    return False

            def proxy_reason() -> str | None:
                status = api.request(
                    "GET", "/apis/projectcontour.io/v1/namespaces/example-com/httpproxies/www"
                )
                errors = [
                    e for c in status.get("status", {}).get("conditions", []) for e in c.get("errors", [])
                ]
                return errors[0]["reason"] if errors else None

            wait_until(lambda: proxy_reason() == "DelegationNotPermitted", what="refused without delegation")
            api.create(docs_delegation())
            wait_until(serves, what="HTTPS with the delegation")
            api.delete(docs_delegation())
            wait_until(lambda: not serves(), what="HTTPS stopped without the delegation")
            wait_until(lambda: proxy_reason() == "DelegationNotPermitted", what="the status saying why")
            writes = [r.url.path for r in api.requests() if r.method in ("PATCH", "PUT")]
            assert not [p for p in writes if "tlscertificatedelegations" in p], writes
        except BaseException:
            print(f"--- cpx log (tail) ---\n{cpx.log_text()[-6000:]}")
            raise
        finally:
            envoy.stop()
            cpx.kill()
            api.stop()
