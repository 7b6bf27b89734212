"""When Envoy NACKs anyway: the rejection is traced to the object behind it and reported.

cpx's checks model the Envoys it bootstraps.  These Envoys are stricter than that (a runtime
override: RE2 programs of at most 100 instructions, Envoy's own default, where cpx's bootstrap
allows 1 MiB), so a regex route cpx accepts is refused by Envoy: a real NACK.  Over plaintext xDS
the object's status says so and nothing is left out (any client could have sent that NACK); over
mTLS the NACK comes from an authenticated Envoy and the object is left out, so that later route
changes reach Envoy again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.envoy import envoy_binary
from cpx.testing.tenant import BACKEND, TenantStack, rejected_updates, tenant_stack, wait_until
from cpx.xds.resource import ROUTE

pytestmark = pytest.mark.e2e

STRICT_RE2 = {"re2.max_program_size.error_level": 100}


def regex_proxy(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "virtualhost": {"fqdn": f"{name}.tenant.test"},
            "routes": [
                {"conditions": [{"regex": "/(a+b+c+d+){10}"}], "services": [{"name": BACKEND, "port": 80}]}
            ],
        },
    }


@pytest.fixture(params=["plaintext", "mtls"])
def strict(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TenantStack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir = tmp_path_factory.mktemp(f"strict-{request.param}")
    with tenant_stack(
        workdir, valid_object=valid_httpproxy, envoy_runtime=STRICT_RE2, mtls=request.param == "mtls"
    ) as stack:
        yield stack


def test_a_nack_is_traced_to_the_object_and_reported(strict: TenantStack) -> None:
    mtls = strict.cpx.xds_tls[0] is not None
    control = strict.add_valid("control")
    rejected_before = rejected_updates(strict.envoy)
    strict.apply("regex.yaml", [regex_proxy("regex")])
    wait_until(lambda: rejected_updates(strict.envoy) > rejected_before, what="Envoy to NACK")
    shown = strict.wait_status("HTTPProxy", "default", "regex", "EnvoyRejected")
    assert "program size" in shown
    assert strict.cpx.metric("cpx_xds_rejects_total", type=ROUTE) >= 1
    assert strict.get(control) == 200  # Envoy keeps what it had
    if mtls:
        # Left out: the next push is one Envoy accepts, and later changes flow again.
        assert "currentStatus: invalid" in shown
        later = strict.add_valid("later")
        assert strict.get(later) == 200
    else:
        # Only reported: a forged NACK must not take a tenant's routes down.
        assert "currentStatus: valid" in shown
    strict.remove("regex.yaml")
