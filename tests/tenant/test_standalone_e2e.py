"""Standalone mode answers bad manifests as the API server would (issue 8, item 3), with a real Envoy."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from cpx_httpproxy.testing import valid_httpproxy

from cpx.testing.tenant import BACKEND, TenantStack, wait_until

pytestmark = pytest.mark.e2e


def _problems(status: dict[str, Any] | str | None) -> str:
    """An object's cpx problems as one text, its lines not wrapped as in the status file's YAML."""
    loaded = yaml.safe_load(status) if isinstance(status, str) else status or {}
    return "\n".join(f"{p['type']}/{p['reason']}: {p['message']}" for p in loaded["cpx"]["problems"])


def _served_proxy(tenant: TenantStack, name: str) -> str:
    """A valid HTTPProxy ``name`` in ``name.yaml``, served; returns its host."""
    host = f"{name}.tenant.test"
    tenant.apply(f"{name}.yaml", [valid_httpproxy(name, host, service=BACKEND)])
    tenant.wait_served(host)
    return host


def test_a_new_object_with_an_unknown_field_is_reported_at_once(tenant: TenantStack) -> None:
    doc = valid_httpproxy("unknown-field", "unknown-field.tenant.test", service=BACKEND)
    doc["spec"]["colour"] = "blue"
    log_start = len(tenant.cpx.log_text())
    started = time.monotonic()
    shown = tenant.check_bad_input(
        "unknown-field.yaml",
        [doc],
        kind="HTTPProxy",
        name="unknown-field",
        problem="spec.colour: unknown field",
    )
    assert "refused (not served)" in shown and "SchemaError" in shown
    line = tenant.cpx.wait_log(
        "unknown-field.yaml (document 1): HTTPProxy default/unknown-field", start=log_start
    )
    assert "spec.colour: unknown field (refused; not served)" in line
    assert time.monotonic() - started < 10


def _check_refused_edit(
    tenant: TenantStack, name: str, bad: dict[str, Any], *, kind_name: str, problem: str, detail: str
) -> None:
    """A served HTTPProxy edited into something the API server refuses stays served as it was."""
    host = _served_proxy(tenant, name)
    tenant.apply(f"{name}.yaml", [bad])
    tenant.wait_status("HTTPProxy", "default", kind_name, problem)
    assert tenant.get(host) == 200, "the previous version is no longer served"
    assert detail in _problems(tenant.status("HTTPProxy", "default", kind_name))
    if kind_name != name:  # the edit renamed it: the old one stays, and says why
        assert "ManifestError/KeptWhileRefused" in _problems(tenant.status("HTTPProxy", "default", name))
    # The whole contract, with the bad edit still in the file (rewritten: the same refusal again).
    tenant.check_bad_input(f"{name}.yaml", [bad], kind="HTTPProxy", name=kind_name, problem=problem)
    wait_until(lambda: tenant.get(host) == 404, what="the object gone with its file")


def test_a_refused_edit_keeps_the_previous_version_served(tenant: TenantStack) -> None:
    bad = valid_httpproxy("misplaced", "misplaced.tenant.test", service=BACKEND)
    bad["spec"]["fqdn"] = bad["spec"].pop("virtualhost")["fqdn"]  # one level too high
    _check_refused_edit(
        tenant,
        "misplaced",
        bad,
        kind_name="misplaced",
        problem="spec.fqdn: unknown field",
        detail="SchemaError/Invalid: refused (the previous version is kept): ",
    )
    assert tenant.status("HTTPProxy", "default", "misplaced") is None  # gone with its file


def test_an_edit_to_a_bad_name_keeps_the_previous_version_served(tenant: TenantStack) -> None:
    bad = valid_httpproxy("Bad_Name", "bad-name.tenant.test", service=BACKEND)
    _check_refused_edit(
        tenant,
        "bad-name",
        bad,
        kind_name="Bad_Name",
        problem="metadata.name",
        detail="SchemaError/Invalid: refused (not served): ",
    )


def test_a_bad_namespace_is_refused(tenant: TenantStack) -> None:
    doc = valid_httpproxy("elsewhere", "elsewhere.tenant.test", namespace="Team_A", service=BACKEND)
    tenant.check_bad_input(
        "bad-namespace.yaml",
        [doc],
        kind="HTTPProxy",
        namespace="Team_A",
        name="elsewhere",
        problem="metadata.namespace",
    )


def test_an_object_in_two_files_is_a_conflict_served_from_the_first_file(tenant: TenantStack) -> None:
    later = valid_httpproxy("twice", "twice-b.tenant.test", service=BACKEND)
    tenant.apply("twice-b.yaml", [later])
    tenant.wait_served("twice-b.tenant.test")
    first = valid_httpproxy("twice", "twice-a.tenant.test", service=BACKEND)
    shown = tenant.check_bad_input(
        "twice-a.yaml", [first], kind="HTTPProxy", name="twice", problem="is defined in 2 files"
    )
    assert "twice-a.yaml" in shown and "twice-b.yaml" in shown and "DuplicateObject" in shown
    # twice-a.yaml sorts first, so its version was served; now it is gone, twice-b.yaml's is again.
    tenant.wait_served("twice-b.tenant.test")
    wait_until(lambda: "is defined in" not in str(tenant.status("HTTPProxy", "default", "twice")))
    tenant.remove("twice-b.yaml")


def test_the_first_file_wins_whichever_was_written_last(tenant: TenantStack) -> None:
    tenant.apply("order-a.yaml", [valid_httpproxy("order", "order-a.tenant.test", service=BACKEND)])
    tenant.wait_served("order-a.tenant.test")
    tenant.apply("order-b.yaml", [valid_httpproxy("order", "order-b.tenant.test", service=BACKEND)])
    tenant.wait_status("HTTPProxy", "default", "order", "is defined in 2 files")
    assert tenant.get("order-a.tenant.test") == 200 and tenant.get("order-b.tenant.test") == 404
    tenant.remove("order-a.yaml")
    tenant.remove("order-b.yaml")


def test_a_yaml_alias_bomb_is_refused_quickly(tenant: TenantStack) -> None:
    """An 11 KB file expanding to 1,000 x 1,000 values: the file's last good version is kept."""
    _served_proxy(tenant, "laughs")
    inner = "[" + ", ".join(["lol"] * 1000) + "]"
    bomb = (
        "apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: laughs, namespace: default}\n"
        f"x-a: &a {inner}\nx-b: [" + ", ".join(["*a"] * 1000) + "]\n"
    )
    started = time.monotonic()
    shown = tenant.check_bad_input(
        "laughs.yaml", bomb, kind="HTTPProxy", name="laughs", problem="aliases expand"
    )
    assert time.monotonic() - started < 10
    [problem] = _problems(shown).splitlines()
    assert problem.startswith("ManifestError/Malformed: ") and problem.endswith(" is kept")
    assert "laughs.yaml: malformed YAML: document 1: aliases expand" in problem


def test_a_file_caught_mid_write_is_read_again(tenant: TenantStack) -> None:
    """An editor writing in place, in two steps: the first half alone is not valid YAML."""
    log_start = len(tenant.cpx.log_text())
    path = tenant.manifests / "midwrite.yaml"
    text = (
        "apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: midwrite, namespace: default}\n"
        "spec: {virtualhost: {fqdn: midwrite.tenant.test},\n"
        "  routes: [{services: [{name: tenant-echo, port: 80}]}]}\n"
    )
    half = text.index("routes:")
    with path.open("w") as fh:
        fh.write(text[:half])
        fh.flush()
        time.sleep(0.12)  # long enough for the watch to report the half-written file
        fh.write(text[half:])
    tenant.wait_served("midwrite.tenant.test")
    time.sleep(0.5)  # past the settle delay: a report would have been logged by now
    log = tenant.cpx.log_text()[log_start:]
    assert "midwrite.yaml" not in log, log
    assert "currentStatus: valid" in tenant.wait_status("HTTPProxy", "default", "midwrite", "currentStatus")
    tenant.remove("midwrite.yaml")
