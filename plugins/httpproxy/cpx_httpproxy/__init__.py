"""cpx plugin for Project Contour's ``projectcontour.io/v1`` HTTPProxy (entry point ``httpproxy``)."""

from __future__ import annotations

__version__ = "0.1.0"
