"""``cpx serve --envoy-validate``: what the real Envoy would refuse never reaches the served Envoy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.envoy import envoy_binary
from cpx.testing.tenant import BACKEND, TenantStack, tenant_stack
from cpx.testing.tls import weak_tls_secret

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def validating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TenantStack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    with tenant_stack(
        tmp_path_factory.mktemp("validating"), valid_object=valid_httpproxy, extra_args=["--envoy-validate"]
    ) as stack:
        yield stack
        if not stack.cpx.running:
            print(stack.cpx.log_text()[-4000:])


def test_valid_changes_are_served_with_validation_on(validating: TenantStack) -> None:
    assert "--mode validate" in validating.cpx.log_text()
    host = validating.add_valid("checked")
    assert validating.get(host) == 200


def test_a_weak_key_envoy_refuses_is_held_back(validating: TenantStack) -> None:
    secret = weak_tls_secret("default", "weak", "weak.tenant.test")
    site = {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": "weak", "namespace": "default"},
        "spec": {
            "virtualhost": {"fqdn": "weak.tenant.test", "tls": {"secretName": "weak"}},
            "routes": [{"services": [{"name": BACKEND, "port": 80}]}],
        },
    }
    validating.apply("weak-secret.yaml", [secret])
    try:
        shown = validating.check_bad_input("weak.yaml", [site], kind="HTTPProxy", name="weak", problem="2048")
    finally:
        validating.remove("weak-secret.yaml")
    assert "2048" in shown
