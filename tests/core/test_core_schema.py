from __future__ import annotations

from typing import Any

from cpx.builtin.schema import validate_endpoint_slice, validate_secret, validate_service
from cpx.config import Config
from cpx.objects import ObjectKey
from cpx.pipeline import Pipeline
from cpx.plugins import PluginHost


def _service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"}, "spec": spec}


def test_service_schema() -> None:
    assert validate_service(_service(ports=[{"name": "http", "port": 80}])) == []
    assert validate_service(_service(ports=[{"port": 0}, {"port": 80, "name": "Bad_Name"}])) == [
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535",
        "spec.ports[0].name: Required value: when more than one port is defined",
        'spec.ports[1].name: Invalid value: "Bad_Name": must be a DNS-1123 label',
    ]
    assert validate_service(_service(type="ExternalName")) == ["spec.externalName: Required value"]
    assert validate_service(_service(type="Nope", ports=[])) == [
        'spec.type: Unsupported value: "Nope": '
        "supported values: ClusterIP, NodePort, LoadBalancer, ExternalName"
    ]
    assert validate_service({"kind": "Service"}) == ["spec: Required value"]


def test_endpoint_slice_schema() -> None:
    good = {
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["10.0.0.1"]}],
    }
    assert validate_endpoint_slice(good) == []
    bad = {"addressType": "IP", "ports": [{"port": 70000}], "endpoints": [{"addresses": []}]}
    assert validate_endpoint_slice(bad) == [
        'addressType: Unsupported value: "IP": supported values: IPv4, IPv6, FQDN',
        "ports[0].port: Invalid value: 70000: must be between 1 and 65535",
        "endpoints[0].addresses: Required value: must contain at least 1 address",
    ]


def test_secret_schema() -> None:
    assert validate_secret({"data": {"tls.crt": "aGVsbG8="}}) == []
    assert validate_secret({"data": {"tls.crt": "not base64!"}}) == [
        "data[tls.crt]: Invalid value: illegal base64 data"
    ]


def test_refused_core_objects_are_reported_and_not_served() -> None:
    pipeline = Pipeline.create(PluginHost.load([]), Config())
    bad = _service(ports=[{"port": 0}])
    # A new refusal asks for a rebuild, after which its status is reported; the same one again does not.
    assert pipeline.upsert(bad, validate=True) is True
    assert pipeline.upsert(bad, validate=True) is False
    assert pipeline.source.get(ObjectKey.of(bad)) is None
    pipeline.rebuild()
    status = pipeline.statuses()[ObjectKey.of(bad)]
    assert [n.message for n in status.notes] == [
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535"
    ]
    # Fixing it replaces the refusal (and asks for a rebuild even though no route uses the Service).
    assert pipeline.upsert(_service(ports=[{"port": 80}]), validate=True) is True
    pipeline.rebuild()
    assert ObjectKey.of(bad) not in pipeline.statuses()
    # So does deleting a refused object: its status entry must go.
    pipeline.upsert(bad, validate=True)
    assert pipeline.delete(bad) is True
