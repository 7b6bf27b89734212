"""Ingress class selection for HTTPProxy: the core's rule and its shared ``--ingress-class-name``."""

from __future__ import annotations

from cpx.ingressclass import accepts, class_names, matches, object_class

__all__ = ["accepts", "class_names", "matches", "object_class"]
