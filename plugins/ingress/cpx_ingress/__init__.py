"""cpx plugin for Kubernetes ``networking.k8s.io/v1`` Ingress (entry point ``ingress``)."""

from __future__ import annotations

__version__ = "0.1.0"
