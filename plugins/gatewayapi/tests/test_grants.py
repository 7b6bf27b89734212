"""ReferenceGrants: who may refer to what across namespaces (``grants.permitted``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

import attrs
import pytest
from cpx import GroupVersionKind, ObjectKey, SourceView

from cpx_gatewayapi.gateway_tls import secret_reference
from cpx_gatewayapi.grants import Reference, permitted
from cpx_gatewayapi.kinds import GROUP, REFERENCE_GRANT

GATEWAY = ObjectKey(GROUP, "Gateway", "infra", "gw")


@attrs.frozen
class _Grants:
    """Just what ``permitted`` reads of a source view."""

    grants: tuple[Mapping[str, Any], ...]

    def list(self, gvk: GroupVersionKind) -> Iterator[Mapping[str, Any]]:
        assert (gvk.group, gvk.kind) == (REFERENCE_GRANT.group, REFERENCE_GRANT.kind)
        return iter(self.grants)


def grant(namespace: str, sources: list[dict[str, Any]], targets: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "g", "namespace": namespace},
        "spec": {"from": sources, "to": targets},
    }


FROM_INFRA_GATEWAYS = {"group": GROUP, "kind": "Gateway", "namespace": "infra"}


def allowed(*grants: dict[str, Any], ref: Reference | None = None) -> bool:
    source = cast(SourceView, _Grants(tuple(grants)))
    return permitted(source, ref or secret_reference(GATEWAY, "certs", "cert"))


def test_same_namespace_needs_no_grant() -> None:
    assert allowed(ref=secret_reference(GATEWAY, "infra", "cert"))


def test_other_namespace_needs_a_grant() -> None:
    assert not allowed()


@pytest.mark.parametrize(
    "target", [{"group": "", "kind": "Secret"}, {"group": "", "kind": "Secret", "name": "cert"}]
)
def test_a_grant_to_the_secret_or_all_secrets(target: dict[str, Any]) -> None:
    assert allowed(grant("certs", [FROM_INFRA_GATEWAYS], [target]))


def test_entries_are_ored() -> None:
    other = {"group": GROUP, "kind": "HTTPRoute", "namespace": "apps"}
    assert allowed(
        grant(
            "certs",
            [other, FROM_INFRA_GATEWAYS],
            [{"group": "", "kind": "Service"}, {"group": "", "kind": "Secret"}],
        )
    )


@pytest.mark.parametrize(
    ("namespace", "source", "target"),
    [
        ("infra", FROM_INFRA_GATEWAYS, {"group": "", "kind": "Secret"}),
        ("certs", {**FROM_INFRA_GATEWAYS, "namespace": "apps"}, {"group": "", "kind": "Secret"}),
        ("certs", {**FROM_INFRA_GATEWAYS, "kind": "HTTPRoute"}, {"group": "", "kind": "Secret"}),
        ("certs", {**FROM_INFRA_GATEWAYS, "group": ""}, {"group": "", "kind": "Secret"}),
        ("certs", FROM_INFRA_GATEWAYS, {"group": "", "kind": "Secret", "name": "other"}),
        ("certs", FROM_INFRA_GATEWAYS, {"group": "", "kind": "ConfigMap"}),
        ("certs", FROM_INFRA_GATEWAYS, {"group": "example.com", "kind": "Secret"}),
    ],
    ids=["grant-namespace", "from-namespace", "from-kind", "from-group", "to-name", "to-kind", "to-group"],
)
def test_near_misses_permit_nothing(namespace: str, source: dict[str, Any], target: dict[str, Any]) -> None:
    assert not allowed(grant(namespace, [source], [target]))


def test_malformed_grants_permit_nothing() -> None:
    assert not allowed({"metadata": {"namespace": "certs"}, "spec": {"from": "x", "to": [None]}})
    assert not allowed({"metadata": {"namespace": "certs"}})


def test_the_plugin_answers_the_secret_policy_for_gateways_only() -> None:
    from cpx_gatewayapi import plugin

    source = cast(
        SourceView, _Grants((grant("certs", [FROM_INFRA_GATEWAYS], [{"group": "", "kind": "Secret"}]),))
    )
    assert plugin.cpx_secret_access_permitted("certs", "cert", GATEWAY, source) is True
    assert plugin.cpx_secret_access_permitted("other", "cert", GATEWAY, source) is False
    ingress = ObjectKey("networking.k8s.io", "Ingress", "infra", "web")
    assert plugin.cpx_secret_access_permitted("certs", "cert", ingress, source) is None
