"""BackendTLSPolicy on a long-lived source and processors (as in ``cpx serve``, where the route side
keeps its plans between builds): a policy, or its CA ConfigMap, added, changed or removed after the
routes were planned reaches their clusters and the policy status in the next build."""

from __future__ import annotations

from typing import Any

from cpx import Config, KubeObject, ObjectKey
from cpx.dag import DAG, Cluster
from cpx.ops import certgen
from cpx.testing import Builder, ListenerProcessor, SourceCache, default_ca

from cpx_gatewayapi import plugin
from cpx_gatewayapi.backendtlsstatus import BackendTLSStatusProcessor
from cpx_gatewayapi.processor import GatewayAPIProcessor

GROUP = "gateway.networking.k8s.io"
LISTENER = "http-80-127_0_0_10"
POLICY = ObjectKey(GROUP, "BackendTLSPolicy", "default", "p")


def obj(api_version: str, kind: str, name: str, **fields: Any) -> KubeObject:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        **fields,
    }


def base() -> list[KubeObject]:
    gateway_class = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "contour"},
        "spec": {"controllerName": "projectcontour.io/gateway-controller"},
    }
    listeners = [{"name": "http", "port": 80, "protocol": "HTTP"}]
    addresses = [{"type": "IPAddress", "value": "127.0.0.10"}]
    gateway_spec = {"gatewayClassName": "contour", "addresses": addresses, "listeners": listeners}
    docs = [gateway_class, obj(f"{GROUP}/v1", "Gateway", "gw", spec=gateway_spec)]
    for name in ("s0", "s1"):
        docs.append(obj("v1", "Service", name, spec={"ports": [{"name": "https", "port": 443}]}))
        rule = {
            "matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}],
            "backendRefs": [{"name": name, "port": 443}],
        }
        route_spec = {"parentRefs": [{"name": "gw"}], "hostnames": [f"{name}.example.com"], "rules": [rule]}
        docs.append(obj(f"{GROUP}/v1", "HTTPRoute", name, spec=route_spec))
    return docs


def policy(hostname: str = "abc.example.com") -> KubeObject:
    target = {"group": "", "kind": "Service", "name": "s1"}
    validation = {
        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
        "hostname": hostname,
    }
    return obj(
        f"{GROUP}/v1", "BackendTLSPolicy", "p", spec={"targetRefs": [target], "validation": validation}
    )


def ca(pem: bytes) -> KubeObject:
    return obj("v1", "ConfigMap", "ca", data={"ca.crt": pem.decode()})


class Stack:
    def __init__(self) -> None:
        self.source = SourceCache(watches={spec.gvk.group_kind: spec for spec in plugin.cpx_watches()})
        config = Config()
        self.builder = Builder(
            [
                ("listeners", ListenerProcessor(config)),
                ("gatewayapi", GatewayAPIProcessor.from_config(config)),
                ("gatewayapi-backendtls", BackendTLSStatusProcessor.from_config(config)),
            ]
        )
        for doc in base():
            self.source.insert(doc)
        self.dag = self.build()

    def build(self, *changes: KubeObject) -> DAG:
        for doc in changes:
            self.source.insert(doc)
        self.dag = self.builder.build(self.source)
        return self.dag

    def cluster(self, host: str) -> Cluster:
        [route] = self.dag.listeners[LISTENER].virtual_hosts[host].routes.values()
        [cluster] = route.clusters
        return cluster

    def accepted(self) -> str:
        [ancestor] = self.dag.statuses[POLICY]["ancestors"]
        return str(next(c["reason"] for c in ancestor["conditions"] if c["type"] == "Accepted"))


def test_policy_and_ca_changes_reach_planned_routes() -> None:
    stack = Stack()
    assert stack.cluster("s1.example.com").validation is None

    stack.build(ca(default_ca().cert_pem), policy())  # a policy after the routes were planned
    applied = stack.cluster("s1.example.com")
    assert applied.validation is not None and applied.sni == "abc.example.com"
    assert applied.validation.ca.ca_pem == default_ca().cert_pem
    assert stack.cluster("s0.example.com").validation is None
    assert stack.accepted() == "Accepted"

    stack.build(policy("other.example.com"))  # the policy edited
    assert stack.cluster("s1.example.com").sni == "other.example.com"

    other = certgen.new_ca("another CA").cert_pem
    stack.build(ca(other))  # the CA ConfigMap edited
    validation = stack.cluster("s1.example.com").validation
    assert validation is not None and validation.ca.ca_pem == other

    stack.build(ca(b"broken"))  # no usable CA: weight 0, the rule answers 500
    assert stack.accepted() == "NoValidCACertificate"
    [route] = stack.dag.listeners[LISTENER].virtual_hosts["s1.example.com"].routes.values()
    assert route.direct_response is not None and route.direct_response.status_code == 500

    stack.source.remove(policy())  # the policy gone: plaintext again
    stack.build()
    assert stack.cluster("s1.example.com").validation is None


def test_a_missing_ca_config_map_created_later_is_picked_up() -> None:
    stack = Stack()
    stack.build(policy())
    assert stack.accepted() == "NoValidCACertificate"
    stack.build(ca(default_ca().cert_pem))
    assert stack.accepted() == "Accepted"
    validation = stack.cluster("s1.example.com").validation
    assert validation is not None and validation.ca.ca_pem == default_ca().cert_pem
