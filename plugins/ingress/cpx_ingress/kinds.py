"""The kind this plugin owns, the core listeners it attaches routes to, and object accessors."""

from __future__ import annotations

from cpx import GroupVersionKind

INGRESS = GroupVersionKind(group="networking.k8s.io", version="v1", kind="Ingress", plural="ingresses")

# The core's static listeners (cpx.builtin.plugin); named here rather than imported so that
# importing this plugin never drags in the core's xDS caches.
HTTP_LISTENER = "ingress_http"
HTTPS_LISTENER = "ingress_https"
