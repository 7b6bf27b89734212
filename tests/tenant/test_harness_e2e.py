"""The tenant-safety check itself: it passes for a harmless input and fails for a harmful one."""

from __future__ import annotations

import pytest
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.tenant import BACKEND, TenantStack

pytestmark = pytest.mark.e2e


def test_a_valid_object_passes_the_check(tenant: TenantStack) -> None:
    doc = valid_httpproxy("fine", "fine.tenant.test", service=BACKEND)
    shown = tenant.check_bad_input(
        "fine.yaml", [doc], kind="HTTPProxy", name="fine", problem="currentStatus: valid"
    )
    assert "valid" in shown


def test_the_check_fails_when_the_status_never_names_the_problem(tenant: TenantStack) -> None:
    doc = valid_httpproxy("quiet", "quiet.tenant.test", service=BACKEND)
    with pytest.raises(AssertionError, match="to contain"):
        tenant.check_bad_input(
            "quiet.yaml", [doc], kind="HTTPProxy", name="quiet", problem="no such text", timeout=1.0
        )
