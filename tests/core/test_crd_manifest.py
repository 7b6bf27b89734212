"""cpx.crd_manifest: a plugin kind's CustomResourceDefinition, in controller-gen's key order."""

from __future__ import annotations

import attrs

from cpx import GroupVersionKind, crd_manifest

WIDGET = GroupVersionKind(group="example.com", version="v1", kind="Widget", plural="widgets")
SCHEMA = {"type": "object", "properties": {"spec": {"type": "object"}}}


def test_namespaced_kind() -> None:
    manifest = crd_manifest(WIDGET, SCHEMA)
    assert manifest == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "schema": {"openAPIV3Schema": SCHEMA},
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def test_short_names_printer_columns_and_cluster_scope() -> None:
    columns = [{"name": "Status", "type": "string", "jsonPath": ".status.currentStatus"}]
    gvk = GroupVersionKind(group="example.com", version="v2", kind="Gadget", plural="gadgets")
    gvk = attrs.evolve(gvk, namespaced=False)
    spec = crd_manifest(gvk, SCHEMA, short_names=("gd",), printer_columns=columns)["spec"]
    assert spec["scope"] == "Cluster"
    assert list(spec["names"]) == ["kind", "listKind", "plural", "shortNames", "singular"]
    assert spec["names"]["shortNames"] == ["gd"]
    version = spec["versions"][0]
    assert list(version) == sorted(version)  # additionalPrinterColumns first
    assert version["additionalPrinterColumns"] == columns
