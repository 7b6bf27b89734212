"""cpx plugin for the Kubernetes Gateway API, ``gateway.networking.k8s.io`` (entry point ``gatewayapi``)."""

from __future__ import annotations

__version__ = "0.1.0"
