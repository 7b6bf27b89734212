"""The core's --enable-external-name-service, for every kind, and boolean options on the command line
(a flag that also takes an explicit value), through the real ``cpx translate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cpx.cli import cli
from cpx.testing.cpxproc import write_manifest
from cpx_ingress.testing import simple_ingress as ingress

# The command itself: the cli group would point the root logger at the runner's stderr.
TRANSLATE = cli.commands["translate"]
DISABLED = "default/ext is an ExternalName service, these are not currently enabled"
LOCALHOST = "default/ext is an ExternalName service that points to localhost, this is not allowed"


def external_service(target: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "ext", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": target, "ports": [{"name": "http", "port": 80}]},
    }


def httpproxy() -> dict[str, Any]:
    return {
        "apiVersion": "projectcontour.io/v1",
        "kind": "HTTPProxy",
        "metadata": {"name": "proxy", "namespace": "default"},
        "spec": {"virtualhost": {"fqdn": "p.test"}, "routes": [{"services": [{"name": "ext", "port": 80}]}]},
    }


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    folder = tmp_path / "m"
    write_manifest(folder, "objects.yaml", [ingress("ing", [("i.test", "/", "ext")]), httpproxy()])
    return folder


def translate(*args: str | Path) -> Result:
    return CliRunner().invoke(TRANSLATE, ["--plugins", "ingress,httpproxy", "-o", "json", *map(str, args)])


def problems(result: Result) -> dict[str, str]:
    """kind -> the text of its status (problems and conditions)."""
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    return {o["kind"]: json.dumps(o.get("status", {})) for o in doc["objects"] if o["kind"] != "Service"}


def test_external_name_is_refused_for_every_kind_by_default(manifests: Path) -> None:
    write_manifest(manifests, "svc.yaml", [external_service("api.example.com")])
    shown = problems(translate(manifests))
    assert DISABLED in shown["Ingress"]
    assert DISABLED in shown["HTTPProxy"]


@pytest.mark.parametrize(
    "flag",
    [
        ["--enable-external-name-service"],
        ["--enable-external-name-service=true"],
        ["--enable-external-name-service", "true"],
        ["--enable-external-name-service", "YES"],
        ["--enable-external-name-service=1"],
    ],
)
def test_enabled_external_names_still_refuse_localhost(manifests: Path, flag: list[str]) -> None:
    write_manifest(manifests, "svc.yaml", [external_service("localhost")])
    shown = problems(translate(*flag, manifests))
    assert LOCALHOST in shown["Ingress"]
    assert LOCALHOST in shown["HTTPProxy"]


@pytest.mark.parametrize(
    "flag",
    [
        [],
        ["--enable-external-name-service=false"],
        ["--enable-external-name-service", "off"],
        ["--no-enable-external-name-service"],
        ["--enable-external-name-service", "--no-enable-external-name-service"],
    ],
)
def test_disabled_forms(manifests: Path, flag: list[str]) -> None:
    write_manifest(manifests, "svc.yaml", [external_service("localhost")])
    assert DISABLED in problems(translate(*flag, manifests))["Ingress"]


def test_a_bare_boolean_flag_does_not_swallow_the_next_argument(manifests: Path) -> None:
    write_manifest(manifests, "svc.yaml", [external_service("localhost")])
    # The manifests folder right after the flag stays the positional argument.
    assert LOCALHOST in problems(translate("--enable-external-name-service", manifests))["Ingress"]


def test_a_boolean_option_with_a_bad_value_is_refused(manifests: Path) -> None:
    result = translate("--enable-external-name-service=maybe", manifests)
    assert result.exit_code == 2
    assert "--enable-external-name-service: expected true or false, got 'maybe'" in result.output


@pytest.mark.parametrize(
    "flag",
    [
        ["--disable-permit-insecure"],
        ["--disable-permit-insecure", "true"],
        ["--disable-permit-insecure=false"],
    ],
)
def test_plugin_boolean_options_take_both_forms(manifests: Path, flag: list[str]) -> None:
    # The example: "--disable-permit-insecure true" used to be refused.
    result = translate(*flag, manifests)
    assert result.exit_code == 0, result.output
