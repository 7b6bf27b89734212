"""ExtensionServices in Kubernetes mode: ``cpx serve --kubeconfig`` against the emulated API server
watches them and writes their status through the status subresource; a Service created later makes
an invalid one valid."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cpx import objects as k8s
from cpx.testing.cpxproc import CpxProcess
from cpx.testing.kubeapi import KubeAPI

from cpx_extsvc.kinds import EXTENSION_SERVICE

pytestmark = pytest.mark.e2e

PATH = "/apis/projectcontour.io/v1alpha1/namespaces/default/extensionservices/"


def until(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 9000}]},
    }


def extension(name: str, service_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1alpha1",
        "kind": "ExtensionService",
        "metadata": {"name": name, "namespace": "default", "generation": 2},
        "spec": {"protocol": "h2c", "services": [{"name": service_name, "port": 9000}]},
    }


@pytest.fixture
def api() -> Iterator[KubeAPI]:
    kinds = (k8s.SERVICE, k8s.ENDPOINT_SLICE, k8s.SECRET, k8s.NAMESPACE, EXTENSION_SERVICE)
    with KubeAPI(kinds=kinds) as api:
        yield api


def test_status_is_written_and_follows_the_services(api: KubeAPI, tmp_path: Path) -> None:
    api.create(service("authsvc"), extension("good", "authsvc"), extension("later", "latersvc"))
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    cpx = CpxProcess(
        [],
        tmp_path,
        plugins=["extsvc"],
        extra_args=["--kubeconfig", str(kubeconfig), "--disable-leader-election"],
    )
    with cpx:
        cpx.wait_ready()

        def valid(name: str) -> dict[str, Any] | None:
            conditions = (api.request("GET", PATH + name).get("status") or {}).get("conditions") or []
            return next((c for c in conditions if c.get("type") == "Valid"), None)

        good = until(lambda: valid("good"))
        assert (good["status"], good["reason"], good["observedGeneration"]) == ("True", "Valid", 2)
        later = until(lambda: valid("later"))
        assert later["status"] == "False"
        assert [e["reason"] for e in later["errors"]] == ["ServiceUnresolvedReference"]

        api.create(service("latersvc"))
        until(lambda: (valid("later") or {}).get("status") == "True")
