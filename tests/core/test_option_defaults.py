"""Option defaults have one source, the records of ``cpx.config``: a default changed there changes
the command line's ``--help`` and what the commands do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

import cpx.config
from cpx.cli import cli
from cpx.config import (
    BootstrapOptions,
    CertgenOptions,
    Config,
    ServeOptions,
    StatusWritingOptions,
    default,
)

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"

# Command, flag -> the record field it defaults from.
FLAG_DEFAULTS = [
    ("serve", "xds_address", Config, "xds_address"),
    ("serve", "xds_port", Config, "xds_port"),
    ("serve", "envoy_service_http_address", Config, "http_address"),
    ("serve", "envoy_service_http_port", Config, "http_port"),
    ("serve", "envoy_service_https_address", Config, "https_address"),
    ("serve", "envoy_service_https_port", Config, "https_port"),
    ("serve", "health_address", ServeOptions, "health_address"),
    ("serve", "health_port", ServeOptions, "health_port"),
    ("serve", "debug_http_address", ServeOptions, "debug_address"),
    ("serve", "debug_http_port", ServeOptions, "debug_port"),
    ("serve", "on_missing_crd", ServeOptions, "on_missing_crd"),
    ("serve", "leader_election_resource_name", StatusWritingOptions, "leader_election_resource_name"),
    (
        "serve",
        "leader_election_resource_namespace",
        StatusWritingOptions,
        "leader_election_resource_namespace",
    ),
    ("serve", "envoy_service_name", StatusWritingOptions, "envoy_service_name"),
    ("serve", "envoy_service_namespace", StatusWritingOptions, "envoy_service_namespace"),
    ("translate", "envoy_service_http_port", Config, "http_port"),
    ("bootstrap", "xds_address", Config, "xds_address"),
    ("bootstrap", "xds_port", Config, "xds_port"),
    ("bootstrap", "admin_address", BootstrapOptions, "admin_address"),
    ("bootstrap", "admin_port", BootstrapOptions, "admin_port"),
    ("bootstrap", "stats_address", BootstrapOptions, "stats_address"),
    ("bootstrap", "stats_port", BootstrapOptions, "stats_port"),
    ("bootstrap", "node_id", BootstrapOptions, "node_id"),
    ("bootstrap", "xds_api", BootstrapOptions, "xds_api"),
    ("certgen", "namespace", CertgenOptions, "namespace"),
    ("certgen", "lifetime_days", CertgenOptions, "lifetime_days"),
    ("run", "http_port", Config, "http_port"),
    ("run", "https_port", Config, "https_port"),
    ("run", "xds_port", Config, "xds_port"),
    ("run", "admin_port", BootstrapOptions, "admin_port"),
]


def _param(command: str, name: str) -> click.Parameter:
    return next(p for p in cli.commands[command].params if p.name == name)


@pytest.mark.parametrize(("command", "name", "record", "field"), FLAG_DEFAULTS)
def test_flag_defaults_are_the_records(command: str, name: str, record: type[Any], field: str) -> None:
    assert _param(command, name).default == default(record, field)


def test_durations_default_to_the_record_in_seconds() -> None:
    param = _param("serve", "leader_election_lease_duration")
    assert (
        param.type.convert(param.default, param, None)
        == StatusWritingOptions().leader_election_lease_duration
    )


# Run cpx with cpx.config's source edited, as a maintainer would change a default.
EDITED = """
import sys, types
from pathlib import Path

path = Path(sys.argv[1])
source = path.read_text()
for old, new in (
    ("http_port: int = 8080", "http_port: int = 18080"),
    ("leader_election_lease_duration: float = 15.0", "leader_election_lease_duration: float = 42.0"),
    ("admin_port: int = 9001", "admin_port: int = 9101"),
):
    assert source.count(old) == 1, old
    source = source.replace(old, new)
module = types.ModuleType("cpx.config")
module.__file__ = str(path)
sys.modules["cpx.config"] = module
exec(compile(source, str(path), "exec"), module.__dict__)

from cpx.cli import main
main(sys.argv[2:])
"""


def _cpx_with_edited_defaults(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", EDITED, cpx.config.__file__, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _help_line(text: str, flag: str) -> str:
    # click wraps a long help entry: the default is on the flag's line or a following one.
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(flag))
    entry = [lines[start]]
    for line in lines[start + 1 :]:
        if line.strip().startswith("-"):
            break
        entry.append(line)
    return " ".join(" ".join(entry).split())


def test_a_default_changed_in_cpx_config_changes_help() -> None:
    serve_help = _cpx_with_edited_defaults("serve", "--help")
    assert "[default: 18080]" in _help_line(serve_help, "--envoy-service-http-port")
    assert "[default: 42s]" in _help_line(serve_help, "--leader-election-lease-duration")
    translate_help = _cpx_with_edited_defaults("translate", "--help")
    assert "[default: 18080]" in _help_line(translate_help, "--envoy-service-http-port")
    assert "[default: 18080]" in _help_line(_cpx_with_edited_defaults("run", "--help"), "--http-port")
    bootstrap_help = _cpx_with_edited_defaults("bootstrap", "--help")
    assert "[default: 9101]" in _help_line(bootstrap_help, "--admin-port")


def test_a_default_changed_in_cpx_config_changes_behaviour() -> None:
    doc = json.loads(
        _cpx_with_edited_defaults("translate", "--plugins", "ingress", str(QUICKSTART), "-o", "json")
    )
    ports = {
        listener["name"]: listener["address"]["socketAddress"]["portValue"]
        for listener in doc["xds"]["listeners"]
    }
    assert ports["ingress_http"] == 18080
    bootstrap = json.loads(_cpx_with_edited_defaults("bootstrap", "-"))
    admin_ports = [
        listener["address"]["socket_address"]["port_value"]
        for listener in bootstrap["static_resources"]["listeners"]
        if listener["name"] == "envoy-admin"
    ]
    assert admin_ports == [9101]
