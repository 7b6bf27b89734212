"""The status ``cpx translate`` writes for valid, invalid and orphaned HTTPProxies.

One translation of one directory of manifests (Services, a TLS Secret and many HTTPProxies, each
showing one case); every proxy's status is compared in full with what Contour writes: the legacy
``currentStatus``/``description`` and the ``Valid`` DetailedCondition with its errors and warnings
(type, reason, message as in ``internal/dag/httpproxy_processor.go`` and ``conditions.go``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from cpx.testing import backend, cli, make_tls_secret, write_manifest

from cpx_httpproxy import schema
from cpx_httpproxy.testing import (
    child,
    exact,
    header,
    include,
    ip_rule,
    prefix,
    root,
    route,
    service,
    tcpproxy,
    tls,
)

GENERATION = 3
VALID_MESSAGE = "Valid HTTPProxy"
ERROR_MESSAGE = "At least one error present, see Errors for details"
ORPHANED_MESSAGE = "this HTTPProxy is not part of a delegation chain from a root HTTPProxy"


def _proxies() -> list[dict[str, Any]]:
    echo = [service("echo")]
    team_echo = [service("team-echo")]
    return [
        # A root with TLS, a route and a cross-namespace include: all valid.
        root(
            "valid-root",
            "valid.test",
            route(prefix("/"), services=echo),
            tls=tls("valid-cert"),
            includes=[
                include("valid-child", prefix("/team"), namespace="team"),
                include("child-missing-service", prefix("/broken"), namespace="team"),
            ],
        ),
        child("valid-child", route(services=team_echo), namespace="team"),
        # An error inside an included child is recorded on the child; its root stays valid.
        child(
            "child-missing-service",
            route(prefix("/gone"), services=[service("nope")]),
            route(services=team_echo),
            namespace="team",
        ),
        # No root includes it.
        child("orphan", route(services=team_echo), namespace="team"),
        # A missing include: the include's conditions answer 502, the root is invalid.
        root(
            "missing-include",
            "missing-include.test",
            route(services=echo),
            includes=[include("nope", prefix("/nope"), namespace="team")],
        ),
        # One service of one route missing: only that service is skipped.
        root(
            "missing-service",
            "missing-service.test",
            route(prefix("/gone"), services=[service("nope")]),
            route(services=echo),
        ),
        root("empty", "empty.test"),
        root(
            "two-actions",
            "two-actions.test",
            route(services=echo, direct_response_policy={"statusCode": 200, "body": "ok"}),
        ),
        # exact is not allowed in include conditions: the include is skipped, its target orphaned.
        root(
            "exact-include",
            "exact-include.test",
            route(services=echo),
            includes=[include("exact-child", exact("/x"))],
        ),
        child("exact-child", route(services=echo)),
        # root -> a -> b -> a: the error lands on the proxy whose include closes the cycle.
        root("cycle-root", "cycle.test", includes=[include("cycle-a", prefix("/a"))]),
        child("cycle-a", route(services=echo), includes=[include("cycle-b", prefix("/b"))]),
        child("cycle-b", route(services=echo), includes=[include("cycle-a", prefix("/c"))]),
        root("tcp-no-tls", "tcp-no-tls.test", tcpproxy=tcpproxy(service("echo"))),
        # The same fqdn on two roots: both are refused.
        root("dup-a", "dup.test", route(services=echo)),
        root("dup-b", "dup.test", route(services=echo)),
        root("bad-secret", "bad-secret.test", route(services=echo), tls=tls("missing")),
        root(
            "contradiction",
            "contradiction.test",
            route(header("x-a", present=True), header("x-a", notpresent=True), services=echo),
        ),
        root(
            "includes-root",
            "includes-root.test",
            route(services=echo),
            includes=[include("valid-root", prefix("/other"))],
        ),
        root(
            "duplicate-includes",
            "duplicate-includes.test",
            includes=[
                include("valid-child", prefix("/same"), namespace="team"),
                include("orphan", prefix("/same"), namespace="team"),
            ],
        ),
        root(
            "both-ip-filters",
            "both-ip-filters.test",
            route(services=echo),
            ip_allow_policy=[ip_rule("10.0.0.0/8")],
            ip_deny_policy=[ip_rule("10.1.0.0/16")],
        ),
        # A warning does not make the proxy invalid.
        root(
            "tcp-cookie",
            "tcp-cookie.test",
            tls=tls("valid-cert"),
            tcpproxy=tcpproxy(service("echo"), load_balancer_policy={"strategy": "Cookie"}),
        ),
    ]


def _with_generation(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["generation"] = GENERATION
    return obj


@pytest.fixture(scope="module")
def translated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("httpproxy-status")
    secret, _ = make_tls_secret("default", "valid-cert", ["valid.test", "tcp-cookie.test"])
    proxies = [_with_generation(p) for p in _proxies()]
    for proxy in proxies:  # the manifests themselves are fine: only the processor objects
        assert schema.validate(proxy) == [], proxy["metadata"]["name"]
    write_manifest(
        folder,
        "all.yaml",
        [*backend("echo", 8080), *backend("team-echo", 8080, namespace="team"), secret, *proxies],
    )
    result = CliRunner().invoke(cli, ["translate", "--plugins", "httpproxy", "-o", "json", str(folder)])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["errors"] == []
    return doc


def _status(doc: dict[str, Any], name: str, namespace: str = "default") -> dict[str, Any]:
    (obj,) = (
        o
        for o in doc["objects"]
        if o["kind"] == "HTTPProxy"
        and o["metadata"]["name"] == name
        and o["metadata"].get("namespace") == namespace
    )
    assert "status" in obj, f"{namespace}/{name} has no status"
    status: dict[str, Any] = obj["status"]
    return status


def _contour_part(status: dict[str, Any]) -> dict[str, Any]:
    """currentStatus, description and conditions, lastTransitionTime checked and left out."""
    conditions = []
    for original in status.get("conditions", []):
        condition = dict(original)
        assert condition.pop("lastTransitionTime", "").endswith("Z"), condition
        conditions.append(condition)
    return {
        "currentStatus": status.get("currentStatus"),
        "description": status.get("description"),
        "conditions": conditions,
    }


def _valid(*warnings: tuple[str, str, str]) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": "Valid",
        "status": "True",
        "reason": "Valid",
        "message": VALID_MESSAGE,
        "observedGeneration": GENERATION,
    }
    if warnings:
        condition["warnings"] = [_sub(*w) for w in warnings]
    return {"currentStatus": "valid", "description": VALID_MESSAGE, "conditions": [condition]}


def _invalid(
    *errors: tuple[str, str, str], current: str = "invalid", description: str = ERROR_MESSAGE
) -> dict[str, Any]:
    condition = {
        "type": "Valid",
        "status": "False",
        "reason": "ErrorPresent",
        "message": ERROR_MESSAGE,
        "observedGeneration": GENERATION,
        "errors": [_sub(*e) for e in errors],
    }
    return {"currentStatus": current, "description": description, "conditions": [condition]}


def _sub(type_: str, reason: str, message: str) -> dict[str, str]:
    return {"type": type_, "status": "True", "reason": reason, "message": message}


def _orphaned() -> dict[str, Any]:
    return _invalid(
        ("Orphaned", "Orphaned", ORPHANED_MESSAGE), current="orphaned", description=ORPHANED_MESSAGE
    )


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("default", "valid-root"), ("team", "valid-child"), ("default", "cycle-root"), ("default", "cycle-b")],
)
def test_valid(translated: dict[str, Any], namespace: str, name: str) -> None:
    status = _status(translated, name, namespace)
    assert _contour_part(status) == _valid()
    assert "cpx" not in status  # no problems noted either


def test_warning_keeps_the_proxy_valid(translated: dict[str, Any]) -> None:
    message = (
        'ignoring field "Spec.TCPProxy.LoadBalancerPolicy"; '
        "Cookie load balancer policy is not supported for TCPProxies"
    )
    status = _status(translated, "tcp-cookie")
    assert _contour_part(status) == _valid(("TCPProxyError", "IgnoredField", message))
    problems = status["cpx"]["problems"]
    assert [(p["type"], p["reason"], p["severity"]) for p in problems] == [
        ("TCPProxyError", "IgnoredField", "warning")
    ]


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("team", "orphan"), ("default", "exact-child")],
    ids=["never-included", "include-skipped"],
)
def test_orphaned(translated: dict[str, Any], namespace: str, name: str) -> None:
    assert _contour_part(_status(translated, name, namespace)) == _orphaned()


INVALID: dict[str, tuple[str, str, tuple[str, str, str]]] = {
    "child-missing-service": (
        "team",
        "error on the included child",
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            'Spec.Routes unresolved service reference: service "team/nope" not found',
        ),
    ),
    "missing-include": (
        "default",
        "include not found",
        ("IncludeError", "IncludeNotFound", "include team/nope not found"),
    ),
    "missing-service": (
        "default",
        "missing service",
        (
            "ServiceError",
            "ServiceUnresolvedReference",
            'Spec.Routes unresolved service reference: service "default/nope" not found',
        ),
    ),
    "empty": (
        "default",
        "nothing defined",
        (
            "SpecError",
            "NothingDefined",
            "HTTPProxy.Spec must have at least one Route, Include, or a TCPProxy",
        ),
    ),
    "two-actions": (
        "default",
        "two route actions",
        (
            "RouteError",
            "RouteActionCountNotValid",
            "must set exactly one of route.services or route.requestRedirectPolicy or "
            "route.directResponsePolicy",
        ),
    ),
    "exact-include": (
        "default",
        "exact in include",
        (
            "IncludeError",
            "PathMatchConditionsNotValid",
            "include: exact conditions are not allowed in includes block",
        ),
    ),
    "cycle-a": (
        "default",
        "include cycle",
        (
            "IncludeError",
            "IncludeCreatesCycle",
            "include creates an include cycle: default/cycle-root -> default/cycle-a -> "
            "default/cycle-b -> default/cycle-a",
        ),
    ),
    "tcp-no-tls": (
        "default",
        "tcpproxy without TLS",
        (
            "TCPProxyError",
            "TLSMustBeConfigured",
            "Spec.TCPProxy requires that either Spec.TLS.Passthrough or Spec.TLS.SecretName be set",
        ),
    ),
    "dup-a": (
        "default",
        "duplicate fqdn (first)",
        (
            "VirtualHostError",
            "DuplicateVhost",
            'fqdn "dup.test" is used in multiple HTTPProxies: default/dup-a, default/dup-b',
        ),
    ),
    "dup-b": (
        "default",
        "duplicate fqdn (second)",
        (
            "VirtualHostError",
            "DuplicateVhost",
            'fqdn "dup.test" is used in multiple HTTPProxies: default/dup-a, default/dup-b',
        ),
    ),
    "contradiction": (
        "default",
        "present and notpresent",
        (
            "RouteError",
            "HeaderMatchConditionsNotValid",
            "cannot specify contradictory 'present' and 'notpresent' conditions for the same route "
            "and header",
        ),
    ),
    "includes-root": (
        "default",
        "root includes root",
        (
            "IncludeError",
            "RootIncludesRoot",
            "root httpproxy cannot include another root httpproxy (default/valid-root)",
        ),
    ),
    "duplicate-includes": (
        "default",
        "duplicate include conditions",
        ("IncludeError", "DuplicateMatchConditions", "duplicate conditions defined on an include"),
    ),
    "both-ip-filters": (
        "default",
        "allow and deny",
        (
            "IPFilterError",
            "IncompatibleIPAddressFilters",
            # sic: Contour's message has this typo
            "Spec.VirtualHost.IPAllowFilterPolicy and Spec.VirtualHost.IPDepnyFilterPolicy cannot both "
            "be defined.",
        ),
    ),
}


@pytest.mark.parametrize("name", list(INVALID), ids=[case[1] for case in INVALID.values()])
def test_invalid(translated: dict[str, Any], name: str) -> None:
    namespace, _, error = INVALID[name]
    status = _status(translated, name, namespace)
    assert _contour_part(status) == _invalid(error)
    # cpx translate repeats the errors as problems, so that they are seen next to the object.
    problems = status["cpx"]["problems"]
    assert [(p["type"], p["reason"], p["message"], p["severity"]) for p in problems] == [(*error, "error")]


def test_secret_not_valid(translated: dict[str, Any]) -> None:
    # The message's tail is the core's Secret check ("Secret default/missing not found").
    status = _contour_part(_status(translated, "bad-secret"))
    (condition,) = status["conditions"]
    (error,) = condition.pop("errors")
    assert status == {
        "currentStatus": "invalid",
        "description": ERROR_MESSAGE,
        "conditions": [
            {
                "type": "Valid",
                "status": "False",
                "reason": "ErrorPresent",
                "message": ERROR_MESSAGE,
                "observedGeneration": GENERATION,
            }
        ],
    }
    assert (error["type"], error["status"], error["reason"]) == ("TLSError", "True", "SecretNotValid")
    assert error["message"].startswith('Spec.VirtualHost.TLS Secret "missing" is invalid: ')
    assert "not found" in error["message"]


def test_every_proxy_has_a_status(translated: dict[str, Any]) -> None:
    names = {
        (o["metadata"].get("namespace"), o["metadata"]["name"]): o.get("status", {}).get("currentStatus")
        for o in translated["objects"]
        if o["kind"] == "HTTPProxy"
    }
    assert len(names) == len(_proxies())
    assert None not in names.values(), names
    counts = {state: sorted(n for (_, n), s in names.items() if s == state) for state in set(names.values())}
    assert counts == {
        "valid": ["cycle-b", "cycle-root", "tcp-cookie", "valid-child", "valid-root"],
        "orphaned": ["exact-child", "orphan"],
        "invalid": sorted([*INVALID, "bad-secret"]),
    }


def test_invalid_roots_are_not_served_but_valid_parts_are(translated: dict[str, Any]) -> None:
    """Best effort: a root with a missing include or service still serves what resolved."""
    # Plain HTTP: ingress_http and, with the scoped route shape, ingress_http/<fqdn>.
    http = [r for r in translated["xds"]["routes"] if r["name"].split("/")[0] == "ingress_http"]
    domains = {d for config in http for vhost in config.get("virtualHosts", ()) for d in vhost["domains"]}
    # Dropped: nothing to serve, duplicates, an invalid secret, a tcpproxy without TLS.
    for host in ("empty.test", "dup.test", "bad-secret.test", "tcp-no-tls.test", "both-ip-filters.test"):
        assert host not in domains, host
    # Served in part: the resolvable routes stay.
    for host in ("missing-include.test", "missing-service.test", "valid.test", "cycle.test"):
        assert host in domains, host
