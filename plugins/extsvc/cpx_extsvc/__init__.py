"""cpx-extsvc: Project Contour's ExtensionService (projectcontour.io/v1alpha1) as a cpx plugin."""

from __future__ import annotations
