"""Upstream HTTPRouteServiceTypes (conformance/tests/httproute-service-types.go).

Backends that are a Service without selector (manual EndpointSlices), a headless Service, and a
headless Service with manual EndpointSlices.  Adapted: upstream patches the manual IPv4 slices with
infra-backend-v1's pod IPs; here they get the echo server's address and port, and the headless
Service's slice (Kubernetes' endpoints controller would write it) is written by the test.
"""

from __future__ import annotations

from typing import Any

from cpx_gatewayapi.testing import INFRA_NS, INFRA_V1, SAME_NAMESPACE, Conformance, Expect

MANIFEST = "httproute-service-types.yaml"
MANUAL = ("manual-endpointslices", "headless-manual-endpointslices")


def test_httproute_service_types(upstream: Conformance) -> None:
    echo_port = upstream.backend(INFRA_NS, INFRA_V1).port
    endpoints = [
        {"addresses": ["127.0.0.1"], "conditions": {"ready": True, "serving": True, "terminating": False}}
    ]
    for service in MANUAL:
        slice_ = upstream.get("EndpointSlice", INFRA_NS, f"{service}-ip4")
        slice_["endpoints"] = endpoints
        slice_["ports"] = [{"name": "first-port", "port": echo_port, "protocol": "TCP"}]
        upstream.update(slice_)
    managed: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "headless-abcde",
            "namespace": INFRA_NS,
            "labels": {"kubernetes.io/service-name": "headless"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "first-port", "port": echo_port, "protocol": "TCP"}],
        "endpoints": endpoints,
    }
    upstream.apply_docs("zz-headless-endpoints.yaml", [managed])
    try:
        upstream.wait_routes_accepted(SAME_NAMESPACE, (INFRA_NS, "service-types"))
        upstream.expect_all(
            SAME_NAMESPACE,
            [Expect(path=f"/{path}", backend=INFRA_V1, namespace=INFRA_NS) for path in (*MANUAL, "headless")],
        )
    finally:
        upstream.remove("zz-headless-endpoints.yaml")
