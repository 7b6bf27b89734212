"""The policy (Contour's delegationPermitted), the schema check and the plugin's declarations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cpx import ObjectKey, SourceView
from cpx.testing import SourceCache, private_imports
from cpx.testing.strategies import World
from hypothesis import HealthCheck, given, settings

import cpx_tlsdelegation
from cpx_tlsdelegation import plugin, schema, strategies
from cpx_tlsdelegation.testing import delegation, docs_delegation

HTTPPROXY = ObjectKey("projectcontour.io", "HTTPProxy", "example-com", "www")


def view(*objects: dict[str, Any]) -> SourceView:
    source = SourceCache()
    for obj in objects:
        source.insert(obj)
    return source.view


def answer(source: SourceView, namespace: str, name: str, referrer: ObjectKey = HTTPPROXY) -> bool | None:
    return plugin.cpx_secret_access_permitted(namespace, name, referrer, source)


def test_the_documented_delegations() -> None:
    source = view(docs_delegation())
    assert answer(source, "www-admin", "example-com-wildcard") is True
    assert answer(source, "www-admin", "another-com-wildcard") is True
    elsewhere = ObjectKey("networking.k8s.io", "Ingress", "elsewhere", "web")
    assert answer(source, "www-admin", "example-com-wildcard", elsewhere) is False
    assert answer(source, "www-admin", "another-com-wildcard", elsewhere) is True
    assert answer(source, "other", "example-com-wildcard") is False


def test_gateway_api_referrers_are_left_to_reference_grants() -> None:
    gateway = ObjectKey("gateway.networking.k8s.io", "Gateway", "example-com", "gw")
    assert answer(view(docs_delegation()), "www-admin", "another-com-wildcard", gateway) is None


def test_type_confused_entries_permit_nothing_and_do_not_raise() -> None:
    odd = delegation("www-admin", "odd")
    odd["spec"]["delegations"] = [None, {"secretName": 1, "targetNamespaces": ["*"]}, {"secretName": "x"}]
    broken = {**delegation("www-admin", "broken"), "spec": "nope"}
    source = view(odd, broken)
    assert answer(source, "www-admin", "x") is False


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        ({"delegations": []}, []),
        (None, ["spec: Required value"]),
        ({}, ["spec.delegations: Required value"]),
        ({"delegations": {}}, ["spec.delegations: Invalid value: {}: must be a list"]),
        (
            {"delegations": [{}]},
            [
                "spec.delegations[0].secretName: Required value",
                "spec.delegations[0].targetNamespaces: Required value",
            ],
        ),
        (
            {"delegations": [{"secretName": "s", "targetNamespaces": [1]}], "extra": True},
            [
                "spec.delegations[0].targetNamespaces[0]: Invalid value: 1: must be a string",
                "spec.extra: unknown field",
            ],
        ),
    ],
)
def test_the_schema_check(spec: Any, problems: list[str]) -> None:
    obj = delegation("www-admin", "d")
    if spec is None:
        del obj["spec"]
    else:
        obj["spec"] = spec
    assert schema.validate(obj) == problems


def test_the_rendered_crd_is_the_shipped_one() -> None:
    from cpx_tlsdelegation import crd

    shipped = Path(cpx_tlsdelegation.__file__).parent.parent / "crd" / "tlscertificatedelegation.yaml"
    assert shipped.read_text() == crd.render()


def test_only_the_public_api() -> None:
    assert private_imports(Path(cpx_tlsdelegation.__file__).parent) == []


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(strategies.delegations(World(hostile=False)))
def test_generated_delegations_without_hostile_leaves_pass_the_schema(obj: dict[str, Any]) -> None:
    assert schema.validate(obj) == []


def test_plugins_list_shows_what_the_plugin_contributes() -> None:
    import json

    from click.testing import CliRunner
    from cpx.testing import cli

    result = CliRunner().invoke(cli, ["plugins", "list", "--plugins", "tlsdelegation", "-o", "json"])
    [row] = [row for row in json.loads(result.stdout) if row["name"] == "tlsdelegation"]
    assert row["watches"] == ["projectcontour.io/v1/TLSCertificateDelegation"]
    assert row["policies"] == ["secret access (cpx_secret_access_permitted)"]
    assert row["status_writers"] == ["projectcontour.io/v1/TLSCertificateDelegation (reported, not written)"]
