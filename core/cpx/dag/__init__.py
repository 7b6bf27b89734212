"""The DAG: what the plugins' processors build and the xDS caches translate (public plugin API).

``DAG`` holds ``Listener`` s, each with ``VirtualHost`` s (``SecureVirtualHost`` for TLS) whose ``Route`` s
point at ``Cluster`` s; ``Note`` is a problem about one source object, shown in its status.  Every node
value is a frozen attrs class: build new ones with ``attrs.evolve``, never mutate.
"""

from __future__ import annotations

from cpx.dag.attachments import AttachmentKey, Attachments
from cpx.dag.dag import (
    DAG,
    Listener,
    Note,
    Protocol,
    SecureVirtualHost,
    VirtualHost,
)
from cpx.dag.nodes import (
    AuthorityCheck,
    CircuitBreakers,
    Cluster,
    CookieRewrite,
    CORSPolicy,
    CustomNode,
    DirectResponse,
    Duration,
    ExtensionUpstream,
    HashPolicy,
    HeaderMatch,
    HeaderMatchKind,
    HeadersPolicy,
    HeaderValue,
    HealthCheck,
    InternalRedirectPolicy,
    IPFilter,
    IPRule,
    LoadAssignment,
    LocalRateLimit,
    MirrorPolicy,
    PathKind,
    PathMatch,
    QueryMatch,
    QueryMatchKind,
    Redirect,
    RegexRewrite,
    RetryPolicy,
    Route,
    Secret,
    ServicePort,
    SlowStart,
    TCPProxy,
    TimeoutPolicy,
    TLSParams,
    UpstreamProtocol,
    UpstreamValidation,
)
from cpx.dag.registry import Registries, RegistryKey

# Extension services (authorization, rate limiting) by the object that declares them: the plugin
# owning that kind publishes, HTTPProxy / Gateway API read (see cpx.dag.registry).
EXTENSION_UPSTREAMS = RegistryKey("extension-upstreams", ExtensionUpstream)

__all__ = [
    "DAG",
    "EXTENSION_UPSTREAMS",
    "AttachmentKey",
    "Attachments",
    "AuthorityCheck",
    "CORSPolicy",
    "CircuitBreakers",
    "Cluster",
    "CookieRewrite",
    "CustomNode",
    "DirectResponse",
    "Duration",
    "ExtensionUpstream",
    "HashPolicy",
    "HeaderMatch",
    "HeaderMatchKind",
    "HeaderValue",
    "HeadersPolicy",
    "HealthCheck",
    "IPFilter",
    "IPRule",
    "InternalRedirectPolicy",
    "Listener",
    "LoadAssignment",
    "LocalRateLimit",
    "MirrorPolicy",
    "Note",
    "PathKind",
    "PathMatch",
    "Protocol",
    "QueryMatch",
    "QueryMatchKind",
    "Redirect",
    "RegexRewrite",
    "Registries",
    "RegistryKey",
    "RetryPolicy",
    "Route",
    "Secret",
    "SecureVirtualHost",
    "ServicePort",
    "SlowStart",
    "TCPProxy",
    "TLSParams",
    "TimeoutPolicy",
    "UpstreamProtocol",
    "UpstreamValidation",
    "VirtualHost",
]
