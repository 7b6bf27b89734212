"""Fixtures for the re-expressed conformance tests: one cpx + Envoy per session, one upstream YAML per test.

A conformance module names its upstream manifest in ``MANIFEST`` (a file of ``manifests/``, or a
tuple of them) and asks for ``upstream``: the manifests are applied before the test and deleted
after it, waiting until cpx has dropped their objects, so the next test starts from the base set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from cpx.ops import certgen
from cpx.testing import envoy_binary

from cpx_gatewayapi.testing import Conformance

from .frontendconformance import client_certificates

MANIFESTS = Path(__file__).parent / "manifests"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every conformance test starts the real cpx and a real Envoy: marked ``e2e`` like the others."""
    for item in items:
        if item.path.name.startswith("test_conformance_"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Conformance]:
    """cpx serving the upstream base set (conformance/base/manifests.yaml) through a real Envoy."""
    try:
        envoy_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    harness = Conformance(tmp_path_factory.mktemp("conformance"), MANIFESTS / "base.yaml")
    with harness:
        yield harness


@pytest.fixture
def upstream(request: pytest.FixtureRequest, conformance: Conformance) -> Iterator[Conformance]:
    """The harness with the test module's upstream manifest (``MANIFEST``) applied."""
    names = request.module.MANIFEST
    with contextlib.ExitStack() as stack:
        for name in [names] if isinstance(names, str) else names:
            stack.enter_context(conformance.applied(MANIFESTS / name))
        yield conformance


@pytest.fixture
def client_certs(conformance: Conformance) -> Iterator[Mapping[str, certgen.KeyPair]]:
    """The client certificates of the frontend validation tests by Secret name, with their CA
    ConfigMaps and Secrets applied (ask for it before ``upstream``)."""
    certs, docs = client_certificates()
    conformance.apply_docs("01-client-certificates.yaml", docs)
    try:
        yield certs
    finally:
        conformance.remove("01-client-certificates.yaml")
