"""The kind this plugin owns."""

from __future__ import annotations

from cpx import GroupVersionKind

EXTENSION_SERVICE = GroupVersionKind(
    group="projectcontour.io", version="v1alpha1", kind="ExtensionService", plural="extensionservices"
)
