"""GatewayClasses and Gateways through a real build (``cpx_translate``): which are ours, the DAG
listeners their listeners get, conflicts, certificates, and the statuses they get."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import attrs
import pytest
import yaml
from cpx import ObjectKey, Phase, ProcessorSpec, SourceView, hookimpl
from cpx.dag import DAG, DirectResponse, PathKind, PathMatch, Protocol, Route
from cpx.testing import make_tls_secret
from cpx.testing.translation import Translation

from cpx_gatewayapi import gateways
from cpx_gatewayapi.model import Attachments, Resolution
from cpx_gatewayapi.settings import Settings

CONTROLLER = "projectcontour.io/gateway-controller"
GROUP = "gateway.networking.k8s.io"


def gateway_class(name: str = "contour", controller: str = CONTROLLER, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": name, "generation": 1},
        "spec": {"controllerName": controller, **spec},
    }


def gateway(
    listeners: list[dict[str, Any]],
    *,
    name: str = "gw",
    namespace: str = "infra",
    address: str | None = "127.0.0.2",
    class_name: str = "contour",
    generation: int = 3,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": {"gatewayClassName": class_name, "listeners": listeners, **spec},
    }
    if address is not None:
        obj["spec"].setdefault("addresses", [{"type": "IPAddress", "value": address}])
    if status is not None:
        obj["status"] = status
    return obj


def http(name: str = "http", port: int = 80, **fields: Any) -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": "HTTP", **fields}


def https(name: str = "https", port: int = 443, secret: str = "cert", **fields: Any) -> dict[str, Any]:
    tls = {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "group": "", "name": secret}]}
    return {"name": name, "port": port, "protocol": "HTTPS", "tls": tls, **fields}


def grant(
    namespace: str,
    from_namespace: str,
    to_name: str | None = None,
    version: str = "v1beta1",
    **overrides: Any,
) -> dict[str, Any]:
    to: dict[str, Any] = {"group": "", "kind": "Secret"}
    if to_name is not None:
        to["name"] = to_name
    source = {"group": GROUP, "kind": "Gateway", "namespace": from_namespace}
    source.update(overrides.pop("source", {}))
    to.update(overrides.pop("target", {}))
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ReferenceGrant",
        "metadata": {"name": f"grant-{len(str(overrides))}-{to_name}", "namespace": namespace},
        "spec": {"from": [source], "to": [to]},
    }


def tls_secret(namespace: str = "infra", name: str = "cert") -> dict[str, Any]:
    secret, _ca = make_tls_secret(namespace, name, ["*.example.com", "example.com"])
    return secret


@attrs.frozen
class Built:
    translation: Translation
    resolution: Resolution
    # Every DAG listener right after the Gateways were resolved (before empty ones are pruned).
    listeners: Mapping[str, tuple[Protocol, str, int]]

    def status(self, kind: str, name: str, namespace: str = "infra") -> Mapping[str, Any]:
        return self.translation.status(kind, name, namespace)

    def gateway_conditions(self, name: str = "gw") -> dict[str, tuple[str, str]]:
        return _by_type(self.status("Gateway", name)["conditions"])

    def listener_status(self, listener: str, gateway_name: str = "gw") -> Mapping[str, Any]:
        [entry] = [e for e in self.status("Gateway", gateway_name)["listeners"] if e["name"] == listener]
        return cast(Mapping[str, Any], entry)

    def listener_conditions(self, listener: str, gateway_name: str = "gw") -> dict[str, tuple[str, str]]:
        return _by_type(self.listener_status(listener, gateway_name)["conditions"])

    def resolved(self, listener: str, gateway_name: str = "gw", namespace: str = "infra") -> Any:
        found = self.resolution.gateway(namespace, gateway_name)
        assert found is not None
        return found.listener(listener)


def _by_type(conditions: list[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


Build = Callable[..., Built]


@pytest.fixture
def build(cpx_translate: Callable[..., Translation], monkeypatch: pytest.MonkeyPatch) -> Build:
    captured: dict[str, Any] = {}
    resolve = gateways.resolve

    def recording(dag: DAG, source: SourceView, settings: Settings) -> Resolution:
        resolution = resolve(dag, source, settings)
        captured["resolution"] = resolution
        captured["listeners"] = {n: (lst.protocol, lst.address, lst.port) for n, lst in dag.listeners.items()}
        return resolution

    monkeypatch.setattr(gateways, "resolve", recording)

    def run(*objects: Mapping[str, Any], modules: Any = (), **options: Any) -> Built:
        text = yaml.safe_dump_all(list(objects))
        translation = cpx_translate(text, ["gatewayapi"], modules=modules, options=options)
        return Built(translation, captured.get("resolution", Resolution({})), captured.get("listeners", {}))

    return run


# -- which objects are ours ------------------------------------------------------------------------


def test_nothing_changes_without_gateway_api_objects(build: Build) -> None:
    built = build({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "infra"}})
    assert built.resolution == Resolution({})
    assert set(built.listeners) == {"ingress_http", "ingress_https"}


def test_other_controllers_classes_and_gateways_get_no_status_and_no_listener(build: Build) -> None:
    built = build(
        gateway_class("other", controller="example.com/gateway"),
        gateway([http()], class_name="other"),
        gateway_class(),
    )
    assert built.status("GatewayClass", "other", "") == {}
    assert built.status("Gateway", "gw") == {}
    assert list(built.resolution) == []
    assert set(built.listeners) == {"ingress_http", "ingress_https"}


def test_gateway_of_a_missing_class_is_not_ours(build: Build) -> None:
    built = build(gateway_class(), gateway([http()], class_name="missing"))
    assert built.status("Gateway", "gw") == {}


def test_the_controller_name_option_picks_the_classes(build: Build) -> None:
    built = build(
        gateway_class("mine", controller="example.com/cpx"),
        gateway_class("contour"),
        gateway([http()], class_name="mine"),
        gateway([http()], name="gw2", class_name="contour", address="127.0.0.3"),
        gateway_controller_name="example.com/cpx",
    )
    assert built.status("GatewayClass", "contour", "") == {}
    assert _by_type(built.status("GatewayClass", "mine", "")["conditions"])["Accepted"] == (
        "True",
        "Accepted",
    )
    assert built.status("Gateway", "gw2") == {}
    assert built.gateway_conditions("gw")["Accepted"] == ("True", "Accepted")


def test_gateway_class_status(build: Build) -> None:
    status = build(gateway_class()).status("GatewayClass", "contour", "")
    assert _by_type(status["conditions"]) == {
        "Accepted": ("True", "Accepted"),
        "SupportedVersion": ("True", "SupportedVersion"),
    }
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    names = [f["name"] for f in status["supportedFeatures"]]
    assert names == sorted(names)
    assert {"Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant", "TLSRoute", "TCPRoute"} <= set(names)


def test_a_class_with_parameters_is_not_accepted_nor_are_its_gateways(build: Build) -> None:
    ref = {"group": "projectcontour.io", "kind": "ContourDeployment", "name": "x", "namespace": "infra"}
    built = build(gateway_class(parametersRef=ref), gateway([http()]))
    status = built.status("GatewayClass", "contour", "")
    assert _by_type(status["conditions"])["Accepted"] == ("False", "InvalidParameters")
    assert built.gateway_conditions() == {
        "Accepted": ("False", "Invalid"),
        "Programmed": ("False", "Invalid"),
    }
    assert "http-80-127_0_0_2" not in built.listeners


# -- listeners in Envoy ----------------------------------------------------------------------------


def test_each_gateway_address_gets_its_own_listener(build: Build) -> None:
    built = build(
        gateway_class(),
        gateway([http(), https()], address="127.0.0.2"),
        gateway([http(port=8080)], name="gw2", address="127.0.0.3"),
        tls_secret(),
    )
    assert built.listeners["http-80-127_0_0_2"] == (Protocol.HTTP, "127.0.0.2", 8080)
    assert built.listeners["https-443-127_0_0_2"] == (Protocol.HTTPS, "127.0.0.2", 8443)
    assert built.listeners["http-8080-127_0_0_3"] == (Protocol.HTTP, "127.0.0.3", 16080)
    listener = built.resolved("https")
    assert listener.dag_listener == "https-443-127_0_0_2"
    assert (listener.address, listener.envoy_port, listener.port) == ("127.0.0.2", 8443, 443)
    assert listener.secret is not None and listener.tls_mode == "Terminate"
    assert listener.kinds == {"HTTPRoute", "GRPCRoute"}
    assert built.resolved("http").secret is None


def test_listeners_of_one_port_share_the_dag_listener(build: Build) -> None:
    built = build(
        gateway_class(),
        gateway([http(), http("foo", hostname="foo.example.com"), http("wild", hostname="*.example.com")]),
    )
    assert {built.resolved(n).dag_listener for n in ("http", "foo", "wild")} == {"http-80-127_0_0_2"}
    assert built.resolved("foo").hostname == "foo.example.com"
    assert built.resolved("http").hostname is None


def test_default_address_shares_the_static_listeners(build: Build) -> None:
    built = build(gateway_class(), gateway([http(), https()], address=None), tls_secret())
    assert built.resolved("http").dag_listener == "ingress_http"
    assert built.resolved("https").dag_listener == "ingress_https"
    assert set(built.listeners) == {"ingress_http", "ingress_https"}


def test_default_address_on_other_ports_gets_contours_names(build: Build) -> None:
    built = build(gateway_class(), gateway([http(port=81), https(port=444)], address=None), tls_secret())
    assert built.listeners["http-81"] == (Protocol.HTTP, "0.0.0.0", 8081)
    assert built.listeners["https-444"] == (Protocol.HTTPS, "0.0.0.0", 8444)


def test_an_empty_ip_address_is_served_on_the_default_address(build: Build) -> None:
    built = build(gateway_class(), gateway([http()], addresses=[{"type": "IPAddress"}]))
    assert built.resolved("http").dag_listener == "ingress_http"


def test_a_listener_of_another_protocol_on_the_static_port_is_unavailable(build: Build) -> None:
    # Gateway port 443 maps to 8443 (ingress_https, HTTPS): an HTTP listener cannot share it.
    built = build(gateway_class(), gateway([http(port=443)], address=None))
    assert built.listener_conditions("http")["Accepted"] == ("False", "PortUnavailable")
    assert built.listener_conditions("http")["Programmed"] == ("False", "Invalid")
    assert built.resolved("http").dag_listener is None


def test_two_gateways_on_one_address_and_port_share_the_listener(build: Build) -> None:
    built = build(
        gateway_class(),
        gateway([http(hostname="a.example.com")], name="a", address="127.0.0.5"),
        gateway([http(hostname="a.example.com")], name="b", address="127.0.0.5"),
    )
    assert (
        built.resolved("http", "a").dag_listener
        == built.resolved("http", "b").dag_listener
        == "http-80-127_0_0_5"
    )
    assert built.gateway_conditions("b")["Accepted"] == ("True", "Accepted")


def test_ports_mapping_to_one_envoy_port_first_one_wins(build: Build) -> None:
    # 57536 and 58559 both map to Envoy port 1024.
    built = build(gateway_class(), gateway([http("first", port=57536), http("second", port=58559)]))
    assert built.listeners["http-57536-127_0_0_2"] == (Protocol.HTTP, "127.0.0.2", 1024)
    assert built.listener_conditions("first")["Accepted"] == ("True", "Accepted")
    assert built.listener_conditions("second")["Accepted"] == ("False", "PortUnavailable")
    assert built.listener_conditions("second")["Conflicted"] == ("False", "NoConflicts")
    assert built.resolved("second").dag_listener is None


def test_ports_mapping_to_one_envoy_port_across_gateways(build: Build) -> None:
    built = build(
        gateway_class(),
        gateway([http(port=57536)], name="a", address="127.0.0.5"),
        gateway([http(port=58559)], name="b", address="127.0.0.5"),
        gateway([http(port=58559)], name="c", address="127.0.0.6"),
    )
    assert built.listener_conditions("http", "b")["Accepted"] == ("False", "PortUnavailable")
    assert built.listener_conditions("http", "c")["Accepted"] == ("True", "Accepted")


def test_protocol_conflict(build: Build) -> None:
    built = build(gateway_class(), gateway([http(port=80), https("secure", port=80)]), tls_secret())
    assert built.listener_conditions("http")["Conflicted"] == ("False", "NoConflicts")
    conditions = built.listener_conditions("secure")
    assert conditions == {
        "Accepted": ("False", "ProtocolConflict"),
        "Programmed": ("False", "ProtocolConflict"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
        "Conflicted": ("True", "ProtocolConflict"),
    }
    assert built.resolved("secure").dag_listener is None
    assert not built.resolved("secure").accepted
    assert built.gateway_conditions()["Accepted"] == ("True", "ListenersNotValid")


def test_https_and_tls_may_share_a_port(build: Build) -> None:
    tls = {
        "name": "tls",
        "port": 443,
        "protocol": "TLS",
        "hostname": "tls.example.com",
        "tls": {"mode": "Passthrough"},
    }
    built = build(gateway_class(), gateway([https(), tls]), tls_secret())
    assert built.listener_conditions("tls")["Conflicted"] == ("False", "NoConflicts")
    assert built.listener_conditions("tls")["Accepted"] == ("True", "Accepted")


def test_hostname_conflict_first_listener_wins(build: Build) -> None:
    # The schema refuses two listeners with one (port, protocol, hostname): HTTPS and TLS share a
    # port (by SNI) but not a hostname.
    def tls(name: str, hostname: str | None = None) -> dict[str, Any]:
        listener = {"name": name, "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}}
        return {**listener, "hostname": hostname} if hostname else listener

    built = build(
        gateway_class(),
        gateway(
            [
                https("a", hostname="x.example.com"),
                tls("b", "x.example.com"),
                https("c"),
                tls("d"),
                tls("e", "y.example.com"),
            ]
        ),
        tls_secret(),
    )
    for winner in ("a", "c", "e"):
        assert built.listener_conditions(winner)["Accepted"] == ("True", "Accepted")
    for loser in ("b", "d"):
        assert built.listener_conditions(loser)["Conflicted"] == ("True", "HostnameConflict")
        assert built.listener_conditions(loser)["Accepted"] == ("False", "HostnameConflict")
        assert built.listener_conditions(loser)["Programmed"] == ("False", "HostnameConflict")


def test_tcp_listeners_share_no_port(build: Build) -> None:
    tcp = {"name": "tcp", "port": 9000, "protocol": "TCP"}
    tls = {"name": "tls", "port": 9000, "protocol": "TLS", "tls": {"mode": "Passthrough"}}
    built = build(gateway_class(), gateway([tcp, http("web", port=9000), tls]))
    assert built.listener_conditions("tcp")["Conflicted"] == ("False", "NoConflicts")
    assert built.listener_conditions("web")["Conflicted"] == ("True", "ProtocolConflict")
    assert built.listener_conditions("tls")["Conflicted"] == ("True", "ProtocolConflict")


def test_overlapping_tls_hostnames_are_flagged(build: Build) -> None:
    passthrough = {"name": "pass", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}}
    built = build(
        gateway_class(),
        gateway(
            [
                https("a", hostname="foo.example.com"),
                https("b", hostname="foo.example.org"),
                https("c", hostname="*.example.com"),
                https("d", port=8443, hostname="bar.example.com"),  # another port
                http("web", port=8080, hostname="foo.example.org"),  # not TLS
                {**passthrough, "hostname": "x.y.example.com"},
            ]
        ),
        tls_secret(),
    )
    flagged = {
        entry["name"]
        for entry in built.status("Gateway", "gw")["listeners"]
        for c in entry["conditions"]
        if c["type"] == "OverlappingTLSConfig"
    }
    assert flagged == {"a", "c", "pass"}
    assert built.listener_conditions("a")["OverlappingTLSConfig"] == ("True", "OverlappingHostnames")
    # Flagged listeners are served all the same.
    assert built.listener_conditions("a")["Programmed"] == ("True", "Programmed")

    everything = build(
        gateway_class(), gateway([https("any"), https("one", hostname="a.example.org")]), tls_secret()
    )
    assert "OverlappingTLSConfig" in everything.listener_conditions("any")
    assert "OverlappingTLSConfig" in everything.listener_conditions("one")


def test_unsupported_protocol(build: Build) -> None:
    built = build(gateway_class(), gateway([http(), {"name": "bad", "port": 81, "protocol": "INVALID"}]))
    bad = built.listener_status("bad")
    assert bad["supportedKinds"] == []
    assert _by_type(bad["conditions"])["Accepted"] == ("False", "UnsupportedProtocol")
    assert built.gateway_conditions()["Accepted"] == ("True", "ListenersNotValid")
    assert built.resolved("bad").kinds == frozenset()

    only_bad = build(gateway_class(), gateway([{"name": "bad", "port": 81, "protocol": "UDP"}]))
    assert only_bad.gateway_conditions()["Accepted"] == ("False", "ListenersNotValid")


def test_invalid_route_kinds(build: Build) -> None:
    kinds = [{"kind": "HTTPRoute"}, {"kind": "TCPRoute"}, {"group": "example.com", "kind": "HTTPRoute"}]
    built = build(gateway_class(), gateway([http(allowedRoutes={"kinds": kinds})]))
    status = built.listener_status("http")
    assert status["supportedKinds"] == [{"group": GROUP, "kind": "HTTPRoute"}]
    assert _by_type(status["conditions"])["ResolvedRefs"] == ("False", "InvalidRouteKinds")
    assert built.resolved("http").kinds == {"HTTPRoute"}
    # Still served: a bad kind is not a bad listener.
    assert built.resolved("http").dag_listener == "http-80-127_0_0_2"


def test_tls_and_tcp_listeners_are_programmed(build: Build) -> None:
    tls = {"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}}
    tcp = {"name": "tcp", "port": 9000, "protocol": "TCP"}
    built = build(gateway_class(), gateway([tls, tcp]))
    for name, kind in (("tls", "TLSRoute"), ("tcp", "TCPRoute")):
        conditions = built.listener_conditions(name)
        assert conditions["Accepted"] == ("True", "Accepted")
        assert conditions["Programmed"] == ("True", "Programmed")
        assert built.listener_status(name)["supportedKinds"] == [{"group": GROUP, "kind": kind}]
    assert built.resolved("tls").tls_mode == "Passthrough"
    assert built.resolved("tls").dag_listener == "https-443-127_0_0_2"
    assert built.resolved("tcp").dag_listener == "tcp-9000-127_0_0_2"
    assert built.listeners["https-443-127_0_0_2"] == (Protocol.HTTPS, "127.0.0.2", 8443)
    assert built.listeners["tcp-9000-127_0_0_2"] == (Protocol.TCP, "127.0.0.2", 17000)


def test_allowed_routes_namespaces_reach_the_route_side(build: Build) -> None:
    selector = {"matchLabels": {"team": "web"}}
    built = build(
        gateway_class(),
        gateway(
            [
                http("same"),
                http("all", hostname="all.example.com", allowedRoutes={"namespaces": {"from": "All"}}),
                http(
                    "sel",
                    hostname="sel.example.com",
                    allowedRoutes={"namespaces": {"from": "Selector", "selector": selector}},
                ),
            ]
        ),
    )
    assert built.resolved("same").admits_namespace("infra", {})
    assert not built.resolved("same").admits_namespace("apps", {})
    assert built.resolved("all").admits_namespace("apps", {})
    assert built.resolved("sel").admits_namespace("apps", {"team": "web"})
    assert not built.resolved("sel").admits_namespace("infra", {})


# -- certificates ----------------------------------------------------------------------------------


def _https_refs(built: Built, listener: str = "https") -> tuple[tuple[str, str], tuple[str, str]]:
    conditions = built.listener_conditions(listener)
    return conditions["ResolvedRefs"], conditions["Programmed"]


def test_https_listener_serves_its_secret(build: Build) -> None:
    built = build(gateway_class(), gateway([https()]), tls_secret())
    assert _https_refs(built) == (("True", "ResolvedRefs"), ("True", "Programmed"))
    secret = built.resolved("https").secret
    assert secret is not None and (secret.namespace, secret.name) == ("infra", "cert")


@pytest.mark.parametrize(
    "ref",
    [
        {"name": "missing"},
        {"group": "example.com", "kind": "Secret", "name": "cert"},
        {"group": "", "kind": "ConfigMap", "name": "cert"},
        {"name": "malformed"},
    ],
    ids=["nonexistent", "unsupported-group", "unsupported-kind", "malformed"],
)
def test_invalid_certificate_refs(build: Build, ref: dict[str, Any]) -> None:
    malformed = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "malformed", "namespace": "infra"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": "bm90IGEgY2VydA==", "tls.key": "bm90IGEga2V5"},
    }
    listener = https()
    listener["tls"]["certificateRefs"] = [ref]
    built = build(gateway_class(), gateway([listener, http()]), tls_secret(), malformed)
    assert _https_refs(built) == (("False", "InvalidCertificateRef"), ("False", "Invalid"))
    assert built.listener_conditions("https")["Accepted"] == ("True", "Accepted")
    resolved = built.resolved("https")
    assert resolved.dag_listener is None and resolved.secret is None
    assert resolved.kinds == {"HTTPRoute", "GRPCRoute"}  # routes still attach (and count)
    # The other listener is unaffected.
    assert built.listener_conditions("http")["Programmed"] == ("True", "Programmed")
    assert built.gateway_conditions()["Accepted"] == ("True", "Accepted")


def test_several_certificate_refs(build: Build) -> None:
    # None at all is refused by the schema; several are more than cpx (like Contour) serves.
    several = https("several")
    several["tls"]["certificateRefs"] = [{"name": "cert"}, {"name": "cert"}]
    built = build(gateway_class(), gateway([several]), tls_secret())
    assert _https_refs(built, "several") == (("False", "InvalidCertificateRef"), ("False", "Invalid"))


def test_https_without_tls_is_not_programmed(build: Build) -> None:
    built = build(gateway_class(), gateway([{"name": "https", "port": 443, "protocol": "HTTPS"}]))
    assert built.listener_conditions("https")["Programmed"] == ("False", "Invalid")
    assert built.resolved("https").dag_listener is None


def _cross_namespace(*grants: dict[str, Any]) -> list[dict[str, Any]]:
    listener = https()
    listener["tls"]["certificateRefs"][0]["namespace"] = "certs"
    return [gateway_class(), gateway([listener]), tls_secret("certs"), *grants]


def test_cross_namespace_secret_needs_a_reference_grant(build: Build) -> None:
    built = build(*_cross_namespace())
    assert _https_refs(built) == (("False", "RefNotPermitted"), ("False", "Invalid"))
    assert built.resolved("https").secret is None


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
@pytest.mark.parametrize("to_name", ["cert", None], ids=["specific", "all-in-namespace"])
def test_cross_namespace_secret_with_a_reference_grant(
    build: Build, to_name: str | None, version: str
) -> None:
    built = build(*_cross_namespace(grant("certs", "infra", to_name, version)))
    assert _https_refs(built) == (("True", "ResolvedRefs"), ("True", "Programmed"))
    secret = built.resolved("https").secret
    assert secret is not None and secret.namespace == "certs"


@pytest.mark.parametrize(
    "near_miss",
    [
        grant("infra", "infra", "cert"),  # in the wrong namespace
        grant("certs", "other", "cert"),  # from another namespace
        grant("certs", "infra", "cert", source={"group": ""}),  # from another group
        grant("certs", "infra", "cert", source={"kind": "HTTPRoute"}),  # from another kind
        grant("certs", "infra", "other-cert"),  # to another Secret
        grant("certs", "infra", "cert", target={"kind": "ConfigMap"}),  # to another kind
        grant("certs", "infra", "cert", target={"group": "example.com"}),  # to another group
    ],
    ids=["namespace", "from-namespace", "from-group", "from-kind", "to-name", "to-kind", "to-group"],
)
def test_near_miss_reference_grants_permit_nothing(build: Build, near_miss: dict[str, Any]) -> None:
    built = build(*_cross_namespace(near_miss))
    assert _https_refs(built) == (("False", "RefNotPermitted"), ("False", "Invalid"))


# -- Gateway status ----------------------------------------------------------------------------------


def test_gateway_status(build: Build) -> None:
    built = build(gateway_class(), gateway([http()]))
    status = built.status("Gateway", "gw")
    assert built.gateway_conditions() == {
        "Accepted": ("True", "Accepted"),
        "Programmed": ("True", "Programmed"),
    }
    assert status["addresses"] == [{"type": "IPAddress", "value": "127.0.0.2"}]
    [listener] = status["listeners"]
    assert listener["name"] == "http"
    assert listener["attachedRoutes"] == 0
    assert listener["supportedKinds"] == [
        {"group": GROUP, "kind": "HTTPRoute"},
        {"group": GROUP, "kind": "GRPCRoute"},
    ]
    assert _by_type(listener["conditions"]) == {
        "Accepted": ("True", "Accepted"),
        "Programmed": ("True", "Programmed"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
        "Conflicted": ("False", "NoConflicts"),
    }
    every = [*status["conditions"], *listener["conditions"]]
    assert {c["observedGeneration"] for c in every} == {3}
    assert all(c["lastTransitionTime"] and c["message"] for c in every)


def test_one_listener_status_per_spec_listener_in_order(build: Build) -> None:
    built = build(gateway_class(), gateway([http("b", port=81), http("a"), http("c", port=82)]))
    assert [entry["name"] for entry in built.status("Gateway", "gw")["listeners"]] == ["b", "a", "c"]


def test_without_any_address_the_gateway_is_not_programmed(build: Build) -> None:
    built = build(gateway_class(), gateway([http()], address=None))
    assert built.gateway_conditions()["Programmed"] == ("False", "AddressNotAssigned")
    assert built.status("Gateway", "gw")["addresses"] == []
    # It is served all the same.
    assert built.resolved("http").dag_listener == "ingress_http"


def test_status_address_option_gives_the_address(build: Build) -> None:
    built = build(
        gateway_class(), gateway([http()], address=None), ingress_status_address="10.0.0.7,lb.example.com"
    )
    assert built.status("Gateway", "gw")["addresses"] == [
        {"type": "IPAddress", "value": "10.0.0.7"},
        {"type": "Hostname", "value": "lb.example.com"},
    ]
    assert built.gateway_conditions()["Programmed"] == ("True", "Programmed")


def test_the_gateways_own_address_wins_over_the_status_address(build: Build) -> None:
    built = build(gateway_class(), gateway([http()]), ingress_status_address="10.0.0.7")
    assert built.status("Gateway", "gw")["addresses"] == [{"type": "IPAddress", "value": "127.0.0.2"}]


@pytest.mark.parametrize(
    "address",
    [{"type": "Hostname", "value": "gw.example.com"}, {"type": "example.com/Named", "value": "x"}],
)
def test_unsupported_address_types(build: Build, address: dict[str, str]) -> None:
    built = build(gateway_class(), gateway([http()], addresses=[address]))
    assert built.gateway_conditions() == {
        "Accepted": ("False", "UnsupportedAddress"),
        "Programmed": ("False", "Invalid"),
    }
    assert built.resolved("http").dag_listener is None
    assert not built.resolution.gateway("infra", "gw").accepted  # type: ignore[union-attr]


def test_an_address_that_is_no_ip_address_is_not_usable(build: Build) -> None:
    built = build(gateway_class(), gateway([http()], address="my-ip-address"))
    assert built.gateway_conditions() == {
        "Accepted": ("True", "Accepted"),
        "Programmed": ("False", "AddressNotUsable"),
    }
    assert built.status("Gateway", "gw")["addresses"] == []
    assert built.resolved("http").dag_listener is None


def test_a_gateway_served_nowhere_takes_no_port(build: Build) -> None:
    built = build(
        gateway_class(),
        gateway([http(port=57536)], name="a", addresses=[{"type": "Hostname", "value": "gw.example.com"}]),
        gateway([http(port=58559)], name="b", address=None),
    )
    assert built.listener_conditions("http", "b")["Accepted"] == ("True", "Accepted")
    assert built.resolved("http", "b").dag_listener == "http-58559"


def test_infrastructure_parameters_are_invalid(build: Build) -> None:
    ref = {"group": "example.com", "kind": "Params", "name": "p"}
    built = build(gateway_class(), gateway([http()], infrastructure={"parametersRef": ref}))
    assert built.gateway_conditions()["Accepted"] == ("False", "InvalidParameters")
    assert built.resolved("http").dag_listener is None


def test_a_listener_not_programmed_makes_the_gateway_not_programmed(build: Build) -> None:
    built = build(gateway_class(), gateway([http(), https(secret="missing")]))
    assert built.gateway_conditions() == {
        "Accepted": ("True", "Accepted"),
        "Programmed": ("False", "ListenersNotValid"),
    }


def test_unchanged_conditions_keep_their_transition_time(build: Build) -> None:
    first = build(gateway_class(), gateway([http()]))
    status = dict(first.status("Gateway", "gw"))
    old = "2020-01-01T00:00:00Z"
    for condition in [*status["conditions"], *status["listeners"][0]["conditions"]]:
        condition["lastTransitionTime"] = old
    # Programmed was True, now False (AddressNotAssigned): its time changes; the others keep theirs.
    again = build(gateway_class(), gateway([http()], generation=4, status=status, addresses=[]))
    new = again.status("Gateway", "gw")
    times = {c["type"]: c["lastTransitionTime"] for c in new["conditions"]}
    assert times["Accepted"] == old and times["Programmed"] != old
    assert {c["lastTransitionTime"] for c in new["listeners"][0]["conditions"]} == {old}
    assert {c["observedGeneration"] for c in new["conditions"]} == {4}


def test_report_counts_attached_routes(build: Build) -> None:
    built = build(gateway_class(), gateway([http(), http("other", port=81)]))
    gw = built.resolution.gateway("infra", "gw")
    assert gw is not None
    attachments = Attachments()
    http_listener = gw.listener("http")
    assert http_listener is not None
    attachments.add(http_listener)
    attachments.add(http_listener)
    dag = DAG()
    objects = {ObjectKey.of(o): o for o in (gateway_class(), gateway([http(), http("other", port=81)]))}
    source = cast(SourceView, _Objects(objects))
    gateways.report(dag, source, built.resolution, attachments, _settings())
    status = dag.statuses[gw.key]
    assert [(e["name"], e["attachedRoutes"]) for e in status["listeners"]] == [("http", 2), ("other", 0)]
    assert ObjectKey(GROUP, "GatewayClass", "", "contour") in dag.statuses


@attrs.frozen
class _Objects:
    """Just what ``report`` reads of a source view."""

    objects: Mapping[ObjectKey, Mapping[str, Any]]

    def get(self, key: ObjectKey) -> Mapping[str, Any] | None:
        return self.objects.get(key)


def _settings() -> Settings:
    return Settings(
        controller_name=CONTROLLER,
        default_address="0.0.0.0",
        http_port=8080,
        https_port=8443,
        status_address=None,
    )


# -- into Envoy ------------------------------------------------------------------------------------


class _HelloOnGatewayListeners:
    """A stand-in for the route side: a direct response on every Gateway listener's ``*`` host."""

    @hookimpl
    def cpx_dag_processors(self) -> Iterator[ProcessorSpec]:
        yield ProcessorSpec(
            name="hello", factory=lambda _config: self, phase=Phase.ROUTES, after=("gatewayapi",)
        )

    def run(self, dag: DAG, source: SourceView) -> None:
        for name, listener in dag.listeners.items():
            if name.startswith("http-"):
                vhost = dag.ensure_virtual_host(name, "*")
                vhost.add_route(
                    Route(
                        path=PathMatch(kind=PathKind.PREFIX, value="/"),
                        direct_response=DirectResponse(status_code=200, body="hello"),
                    )
                )
                assert listener.protocol is Protocol.HTTP


def test_envoy_listens_on_the_gateway_address_and_mapped_port(build: Build) -> None:
    built = build(
        gateway_class(),
        gateway([http()], address="127.0.0.2"),
        gateway([http(port=8080)], name="gw2", address="127.0.0.3"),
        modules=[("hello", _HelloOnGatewayListeners())],
    )
    envoy = {
        listener["name"]: listener["address"]["socketAddress"]
        for listener in built.translation.envoy_json()["listeners"]
    }
    assert envoy["http-80-127_0_0_2"] == {"address": "127.0.0.2", "portValue": 8080}
    assert envoy["http-8080-127_0_0_3"] == {"address": "127.0.0.3", "portValue": 16080}
    assert "http-80-127_0_0_2" in {c["name"] for c in built.translation.envoy_json()["routes"]}
