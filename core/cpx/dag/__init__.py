"""The DAG: what processors build and the xDS caches translate (public for plugins)."""

from __future__ import annotations

from cpx.dag.attachments import AttachmentKey, Attachments

__all__ = ["AttachmentKey", "Attachments"]
