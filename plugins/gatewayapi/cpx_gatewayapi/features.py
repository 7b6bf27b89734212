"""The conformance features this plugin supports: GatewayClass ``status.supportedFeatures``.

The suite runs a test only when every feature it needs is listed here (GEP-2162), so the list
names what works today, nothing planned.  Names are ``pkg/features`` of kubernetes-sigs/gateway-api.
"""

from __future__ import annotations

SUPPORTED_FEATURES: tuple[str, ...] = tuple(
    sorted(
        (
            # Core.
            "Gateway",
            "HTTPRoute",
            "ReferenceGrant",
            "TLSRoute",
            "TCPRoute",
            # TLSRoute extended: TLS listeners that terminate (and, on one port, next to
            # Passthrough ones: SNI picks the filter chain).
            "TLSRouteModeTerminate",
            "TLSRouteModeMixed",
            # Gateway extended: any listener port (80 -> Envoy 8080, 8080 -> 16080).
            "GatewayPort8080",
            # Gateway extended: client certificate validation (spec.tls.frontend), and its
            # AllowInsecureFallback mode.
            "GatewayFrontendClientCertificateValidation",
            "GatewayFrontendClientCertificateValidationInsecureFallback",
            # HTTPRoute extended.
            "HTTPRouteQueryParamMatching",
            "HTTPRouteMethodMatching",
            "HTTPRouteResponseHeaderModification",
            "HTTPRoutePortRedirect",
            "HTTPRouteSchemeRedirect",
            "HTTPRoutePathRedirect",
            "HTTPRouteHostRewrite",
            "HTTPRoutePathRewrite",
            "HTTPRouteRequestMirror",
            "HTTPRouteRequestMultipleMirrors",
            "HTTPRouteRequestTimeout",
            "HTTPRouteBackendTimeout",
            # HTTPRoute experimental: rule ``retry`` (codes, attempts, backoff; connection errors
            # always; a per-try timeout is retried).
            "HTTPRouteRetry",
            "HTTPRouteRetryBackendTimeout",
            "HTTPRouteRetryConnectionError",
            # GRPCRoute core and extended (RequestHeaderModifier is a feature on upstream main).
            "GRPCRoute",
            "GRPCRouteNamedRouteRule",
            "GRPCRouteRequestHeaderModifier",
            # Backend TLS: CA from ConfigMaps or Secrets, SNI, and Hostname / URI subjectAltNames.
            "BackendTLSPolicy",
            "BackendTLSPolicySANValidation",
        )
    )
)


def supported_features() -> list[dict[str, str]]:
    """``status.supportedFeatures`` (a sorted list of ``{name}`` since v1.2)."""
    return [{"name": name} for name in SUPPORTED_FEATURES]
