"""The secret-access policy: a plugin's refusal, no plugin judging at all, and kinds whose status
is reported but never written."""

from __future__ import annotations

import types
from typing import Any

import pytest

from cpx import (
    DelegationNotEnabledError,
    DelegationNotPermittedError,
    GroupVersionKind,
    ObjectKey,
    SourceView,
    StatusWriterSpec,
    hookimpl,
)
from cpx.builtin import plugin as core
from cpx.ops.metrics import Metrics
from cpx.plugins import PluginHost
from cpx.sources.cache import SourceCache
from cpx.status.updater import StatusUpdater
from cpx.testing import make_tls_secret

REFERRER = ObjectKey("example.com", "Thing", "app", "web")
SECRET, _ = make_tls_secret("certs", "tls", ["web.example.com"])


def policy_plugin(answer: bool | None) -> types.SimpleNamespace:
    @hookimpl
    def cpx_secret_access_permitted(
        secret_namespace: str, secret_name: str, referrer: ObjectKey, source: SourceView
    ) -> bool | None:
        return answer

    return types.SimpleNamespace(cpx_secret_access_permitted=cpx_secret_access_permitted)


def source_with(*plugins: Any) -> SourceCache:
    host = PluginHost.from_modules([("core", core), *((f"p{i}", p) for i, p in enumerate(plugins))])
    source = SourceCache(secret_policy=host.secret_access_permitted)
    source.insert(SECRET)
    return source


def test_without_a_policy_plugin_another_namespace_is_not_enabled() -> None:
    source = source_with()
    with pytest.raises(DelegationNotEnabledError, match="no enabled plugin permits cross-namespace"):
        source.lookup_tls_secret("certs", "tls", REFERRER)
    assert source.secret_access_permitted("certs", "tls", REFERRER) is False
    assert source.lookup_tls_secret("certs", "tls", ObjectKey("", "Thing", "certs", "x")).ref == "certs/tls"


def test_a_plugin_passing_leaves_it_not_enabled() -> None:
    with pytest.raises(DelegationNotEnabledError):
        source_with(policy_plugin(None)).lookup_tls_secret("certs", "tls", REFERRER)


def test_a_plugin_refusing_is_a_refusal_not_a_missing_policy() -> None:
    with pytest.raises(DelegationNotPermittedError) as raised:
        source_with(policy_plugin(False)).lookup_ca_secret("certs", "tls", REFERRER)
    assert not isinstance(raised.value, DelegationNotEnabledError)
    assert "no delegation permits Thing app/web" in str(raised.value)


def test_a_plugin_permitting_lets_the_lookup_through() -> None:
    source = source_with(policy_plugin(True))
    assert source.lookup_tls_secret("certs", "tls", REFERRER).ref == "certs/tls"
    assert source.secret_access_permitted("certs", "tls", REFERRER) is True


def test_a_cross_namespace_lookup_is_re_checked_at_every_build() -> None:
    source = source_with(policy_plugin(True))
    with source.recording() as read:
        source.lookup_tls_secret("certs", "tls", REFERRER)
    assert read.volatile
    with source.recording() as read:
        source.lookup_tls_secret("certs", "tls", ObjectKey("", "Thing", "certs", "x"))
    assert not read.volatile


def test_the_updater_leaves_reported_only_kinds_alone() -> None:
    written = GroupVersionKind(group="example.com", version="v1", kind="Written", plural="writtens")
    reported = GroupVersionKind(group="example.com", version="v1", kind="Reported", plural="reporteds")
    writers = {
        written.group_kind: StatusWriterSpec(name="written", gvk=written),
        reported.group_kind: StatusWriterSpec(name="reported", gvk=reported, writes=False),
    }
    updater = StatusUpdater(api_client=None, writers=writers, metrics=Metrics())
    assert set(updater.writers) == {written.group_kind}
