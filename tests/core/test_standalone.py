from __future__ import annotations

from pathlib import Path
from typing import Any

from cpx.config import Config
from cpx.pipeline import Pipeline
from cpx.plugins import PluginHost
from cpx.standalone import prepare


def _service(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "resourceVersion": "42"},
        "spec": {"ports": [{"port": port}]},
    }


def test_an_edit_that_keeps_the_resource_version_still_applies() -> None:
    """Manifests copied from `kubectl get -o yaml` carry a resourceVersion that never changes."""
    pipeline = Pipeline.create(PluginHost.load([]), Config())
    first, errors = prepare(pipeline, Path("s.yaml"), [_service(80)])
    assert errors == [] and first[0]["metadata"] == {"name": "s", "namespace": "default"}
    pipeline.upsert(first[0])
    pipeline.source.referenced_services.add(("default", "s"))  # as if a route used it
    edited, _ = prepare(pipeline, Path("s.yaml"), [_service(81)])
    assert pipeline.upsert(edited[0]) is True


def test_unknown_kinds_are_reported_with_file_and_document() -> None:
    pipeline = Pipeline.create(PluginHost.load([]), Config())
    odd = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    kept, errors = prepare(pipeline, Path("g.yaml"), [_service(80), odd])
    assert len(kept) == 1
    assert [str(e) for e in errors] == [
        "g.yaml (document 2): Gadget g: unknown kind example.com/v1/Gadget: no enabled plugin handles it "
        "(known kinds: EndpointSlice.discovery.k8s.io, Namespace, Secret, Service)"
    ]
