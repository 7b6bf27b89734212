"""Kubernetes mode: the API client and the list/watch source that feeds the event handler."""

from __future__ import annotations

from cpx.sources.kube.client import new_api_client
from cpx.sources.kube.watch import KubeSource, MissingKindError, parse_namespaces

__all__ = ["KubeSource", "MissingKindError", "new_api_client", "parse_namespaces"]
