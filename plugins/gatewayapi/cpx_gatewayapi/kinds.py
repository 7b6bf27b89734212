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
# TLSRoute and TCPRoute: v1 in the standard channel since v1.5 / v1.6 (what the watches ask the API
# server for); the v1alpha2 manifests of the conformance suite are the same kinds to cpx.
TLSROUTE = GroupVersionKind(group=GROUP, version="v1", kind="TLSRoute", plural="tlsroutes")
TCPROUTE = GroupVersionKind(group=GROUP, version="v1", kind="TCPRoute", plural="tcproutes")
REFERENCE_GRANT = GroupVersionKind(
    group=GROUP, version="v1beta1", kind="ReferenceGrant", plural="referencegrants"
)

# Contour's controller name: GatewayClasses naming another controller are someone else's.
DEFAULT_CONTROLLER_NAME = "projectcontour.io/gateway-controller"

BACKEND_TLS_POLICY = GroupVersionKind(
    group=GROUP, version="v1", kind="BackendTLSPolicy", plural="backendtlspolicies"
)
# BackendTLSPolicy CA bundles (``ca.crt``): watched by this plugin, the core knows no ConfigMap.
CONFIG_MAP = GroupVersionKind(group="", version="v1", kind="ConfigMap", plural="configmaps")
