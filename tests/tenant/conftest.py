"""One tenant stack (cpx + real Envoy + echo backend) per test module; see :mod:`cpx.testing.tenant`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.envoy import envoy_binary
from cpx.testing.tenant import TenantStack, tenant_stack


@pytest.fixture(scope="module")
def tenant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TenantStack]:
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    workdir: Path = tmp_path_factory.mktemp("tenant")
    with tenant_stack(workdir, valid_object=valid_httpproxy) as stack:
        yield stack
        if not stack.cpx.running:
            print(stack.cpx.log_text()[-4000:])
