"""TLSCertificateDelegation through `cpx translate`: Contour's documentation examples, the refusals
with and without the plugin, the fallback certificate, Ingress, upstream validation CAs, Gateways."""

from __future__ import annotations

from typing import Any

import pytest
from cpx.testing import Translation, make_ca_secret, make_tls_secret, translate_yaml

from cpx_tlsdelegation.testing import delegation, docs_delegation, dump, ingress, proxy, service

WILDCARD, _ = make_tls_secret("www-admin", "example-com-wildcard", ["*.bar.com"])
ANOTHER, _ = make_tls_secret("www-admin", "another-com-wildcard", ["*.bar.com"])
FALLBACK, _ = make_tls_secret("www-admin", "fallback-secret-name", ["fallback.bar.com"])
ALL = ["ingress", "httpproxy", "tlsdelegation"]
WITHOUT = ["ingress", "httpproxy"]
NOT_ENABLED = "TLS certificate delegation is not enabled (the tlsdelegation plugin is not enabled)"


def build(
    *objects: dict[str, Any], plugins: list[str] = ALL, options: dict[str, Any] | None = None
) -> Translation:
    return translate_yaml(dump([WILDCARD, ANOTHER, FALLBACK, *objects]), plugins, options=options)


def secure_hosts(result: Translation) -> dict[str, Any]:
    listener = result.dag.listeners.get("ingress_https")
    return dict(listener.secure_virtual_hosts) if listener is not None else {}


def tls_errors(result: Translation, kind: str, namespace: str, name: str) -> list[tuple[str, str]]:
    status = result.status(kind, name, namespace)
    conditions = status.get("conditions", [])
    errors = [e for c in conditions for e in c.get("errors", [])]
    return [(e["reason"], e["message"]) for e in errors if e["type"] == "TLSError"]


def notes(result: Translation, kind: str, namespace: str, name: str) -> list[tuple[str, str]]:
    problems = result.status(kind, name, namespace).get("cpx", {}).get("problems", [])
    return [(p["reason"], p["message"]) for p in problems]


# -- HTTPProxy ------------------------------------------------------------------------------------


def test_the_documented_delegation_serves_the_httpproxy() -> None:
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    result = build(docs_delegation(), service("example-com"), www)
    svhost = secure_hosts(result)["foo2.bar.com"]
    assert svhost.secret is not None and svhost.secret.ref == "www-admin/example-com-wildcard"
    assert result.status("HTTPProxy", "www", "example-com")["currentStatus"] == "valid"


def test_a_star_delegates_to_every_namespace() -> None:
    other = proxy("elsewhere", "www", "a.bar.com", {"secretName": "www-admin/another-com-wildcard"})
    result = build(docs_delegation(), service("elsewhere"), other)
    assert "a.bar.com" in secure_hosts(result)


@pytest.mark.parametrize(
    ("entries", "served"),
    [
        ([("example-com-wildcard", ["example-com"])], True),
        ([("example-com-wildcard", ["other", "example-com"])], True),
        ([("example-com-wildcard", ["other"])], False),  # another namespace
        ([("another-com-wildcard", ["example-com"])], False),  # another Secret
        ([("example-com-wildcard", [])], False),  # Contour ignores an empty list
        ([("example-com-wildcard", ["*", "other"])], False),  # "*" counts only alone (Contour)
    ],
)
def test_which_delegations_permit(entries: list[tuple[str, list[str]]], served: bool) -> None:
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    result = build(delegation("www-admin", "d", *entries), service("example-com"), www)
    assert ("foo2.bar.com" in secure_hosts(result)) is served


def test_a_delegation_in_another_namespace_than_the_secret_permits_nothing() -> None:
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    misplaced = delegation("example-com", "d", ("example-com-wildcard", ["*"]))
    result = build(misplaced, service("example-com"), www)
    assert tls_errors(result, "HTTPProxy", "example-com", "www") == [
        (
            "DelegationNotPermitted",
            'Spec.VirtualHost.TLS Secret "www-admin/example-com-wildcard" certificate delegation '
            "not permitted",
        )
    ]


def test_without_the_plugin_the_refusal_says_delegation_is_not_enabled() -> None:
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    result = build(service("example-com"), www, plugins=WITHOUT)
    assert secure_hosts(result) == {}
    assert tls_errors(result, "HTTPProxy", "example-com", "www") == [
        (
            "DelegationNotPermitted",
            'Spec.VirtualHost.TLS Secret "www-admin/example-com-wildcard" is in another namespace and '
            + NOT_ENABLED,
        )
    ]


# -- the fallback certificate ---------------------------------------------------------------------


def fallback_proxy() -> list[dict[str, Any]]:
    secret, _ = make_tls_secret("defaultub", "testsecret", ["fallback.bar.com"])
    tls = {"secretName": "testsecret", "enableFallbackCertificate": True}
    return [secret, service("defaultub"), proxy("defaultub", "fallback-tls-example", "fallback.bar.com", tls)]


FALLBACK_OPTION: dict[str, Any] = {"fallback_certificate": "www-admin/fallback-secret-name"}


def test_the_documented_fallback_recipe_serves() -> None:
    recipe = delegation("www-admin", "fallback-delegation", ("fallback-secret-name", ["*"]))
    result = build(recipe, *fallback_proxy(), options=FALLBACK_OPTION)
    svhost = secure_hosts(result)["fallback.bar.com"]
    assert svhost.fallback_certificate is not None
    assert svhost.fallback_certificate.ref == "www-admin/fallback-secret-name"


def test_the_fallback_certificate_needs_its_delegation_as_in_contour() -> None:
    result = build(*fallback_proxy(), options=FALLBACK_OPTION)
    assert tls_errors(result, "HTTPProxy", "defaultub", "fallback-tls-example") == [
        (
            "FallbackNotDelegated",
            'Spec.VirtualHost.TLS Secret "www-admin/fallback-secret-name" is not configured for certificate '
            "delegation",
        )
    ]


def test_without_the_plugin_the_fallback_refusal_says_delegation_is_not_enabled() -> None:
    result = build(*fallback_proxy(), plugins=WITHOUT, options=FALLBACK_OPTION)
    [(reason, message)] = tls_errors(result, "HTTPProxy", "defaultub", "fallback-tls-example")
    assert reason == "FallbackNotDelegated"
    assert message == (
        'The fallback certificate Secret "www-admin/fallback-secret-name" is in another namespace and '
        + NOT_ENABLED
    )


# -- Ingress --------------------------------------------------------------------------------------


def test_the_documented_ingress_with_the_annotation_is_served_over_https() -> None:
    www = ingress("example-com", "www", "foo2.bar.com", "example-com-wildcard", cert_namespace="www-admin")
    result = build(docs_delegation(), service("example-com"), www)
    svhost = secure_hosts(result)["foo2.bar.com"]
    assert svhost.secret is not None and svhost.secret.ref == "www-admin/example-com-wildcard"


def test_an_ingress_without_delegation_gets_contours_wording() -> None:
    www = ingress("example-com", "www", "foo2.bar.com", "example-com-wildcard", cert_namespace="www-admin")
    result = build(service("example-com"), www)
    assert secure_hosts(result) == {}
    assert notes(result, "Ingress", "example-com", "www") == [
        (
            "DelegationNotPermitted",
            "spec.tls[0].secretName: Secret www-admin/example-com-wildcard certificate delegation "
            "not permitted; foo2.bar.com served over HTTP only",
        )
    ]


def test_an_ingress_without_the_plugin_says_delegation_is_not_enabled() -> None:
    www = ingress("example-com", "www", "foo2.bar.com", "example-com-wildcard", cert_namespace="www-admin")
    result = build(service("example-com"), www, plugins=WITHOUT)
    [(reason, message)] = notes(result, "Ingress", "example-com", "www")
    assert reason == "DelegationNotPermitted"
    assert f"Secret www-admin/example-com-wildcard is in another namespace and {NOT_ENABLED}" in message


# -- upstream validation CA ---------------------------------------------------------------------


def upstream_tls_proxy() -> list[dict[str, Any]]:
    backend = service("example-com")
    backend["metadata"]["annotations"] = {"projectcontour.io/upstream-protocol.tls": "80"}
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    www["spec"]["routes"][0]["services"][0]["validation"] = {
        "caSecret": "www-admin/ca",
        "subjectName": "s1.example-com",
    }
    return [make_ca_secret("www-admin", "ca"), backend, www]


@pytest.mark.parametrize("delegated", [True, False])
def test_an_upstream_validation_ca_goes_through_delegation(delegated: bool) -> None:
    entries = [("example-com-wildcard", ["example-com"])] + ([("ca", ["example-com"])] if delegated else [])
    result = build(delegation("www-admin", "d", *entries), *upstream_tls_proxy())
    status = result.status("HTTPProxy", "www", "example-com")
    assert (status["currentStatus"] == "valid") is delegated
    if not delegated:
        assert tls_errors(result, "HTTPProxy", "example-com", "www") == [
            (
                "CACertificateNotDelegated",
                'service.UpstreamValidation.CACertificate Secret "www-admin/ca" is not configured for '
                "certificate delegation",
            )
        ]


# -- the delegation's own status --------------------------------------------------------------------


def test_ignored_entries_are_reported_as_warnings() -> None:
    odd = delegation("www-admin", "odd", ("a", []), ("b", ["*", "team"]), ("c", ["team"]))
    result = build(odd)
    assert [reason for reason, _ in notes(result, "TLSCertificateDelegation", "www-admin", "odd")] == [
        "NoTargetNamespaces",
        "WildcardNotAlone",
    ]
    assert result.status("TLSCertificateDelegation", "odd", "www-admin")["cpx"]["problems"][0][
        "severity"
    ] == ("warning")


def test_an_invalid_delegation_is_refused_with_the_schema_problems_and_permits_nothing() -> None:
    bad = delegation("www-admin", "bad")
    bad["spec"]["delegations"] = [{"secretName": "example-com-wildcard", "targetNamespaces": "example-com"}]
    www = proxy("example-com", "www", "foo2.bar.com", {"secretName": "www-admin/example-com-wildcard"})
    result = build(bad, service("example-com"), www)
    assert notes(result, "TLSCertificateDelegation", "www-admin", "bad") == [
        ("Invalid", 'spec.delegations[0].targetNamespaces: Invalid value: "example-com": must be a list')
    ]
    assert secure_hosts(result) == {}


def test_a_valid_delegation_has_no_status_of_its_own() -> None:
    assert (
        build(docs_delegation()).status("TLSCertificateDelegation", "example-com-wildcard", "www-admin") == {}
    )
