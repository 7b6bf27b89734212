"""The kinds this plugin owns, at the versions the conformance suite's manifests use."""

from __future__ import annotations

from cpx import GroupVersionKind

GROUP = "gateway.networking.k8s.io"

GATEWAY_CLASS = GroupVersionKind(
    group=GROUP, version="v1", kind="GatewayClass", plural="gatewayclasses", namespaced=False
)
GATEWAY = GroupVersionKind(group=GROUP, version="v1", kind="Gateway", plural="gateways")
HTTPROUTE = GroupVersionKind(group=GROUP, version="v1", kind="HTTPRoute", plural="httproutes")
GRPCROUTE = GroupVersionKind(group=GROUP, version="v1", kind="GRPCRoute", plural="grpcroutes")
REFERENCE_GRANT = GroupVersionKind(
    group=GROUP, version="v1beta1", kind="ReferenceGrant", plural="referencegrants"
)

# Contour's controller name: GatewayClasses naming another controller are someone else's.
DEFAULT_CONTROLLER_NAME = "projectcontour.io/gateway-controller"
